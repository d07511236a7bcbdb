"""tms-admin topic tail | publish | stats, sub …, metrics serve: real processes on the real HBase (and a
real transaction server for transaction states), human and JSON output, exit codes."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.client_tx import TransactionalPublisher
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.rows import MESSAGE_COLUMN, message_key
from tms_hbase.tx.client import TransactionClient
from tms_hbase.txaware.context import TransactionContext

from ..tx_server import TxServer, free_port
from .test_cli import TMS_ADMIN, ok, tms_admin

T = TopicId("cli", "feed")


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_publish_from_stdin_and_tail_in_every_format(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(T)
    published = subprocess.run(
        [TMS_ADMIN, "topic", "publish", str(T), "--batch", "2", "--json"],
        input=b"one\ntwo\n\nthree\nbin\x00ary\n",
        env=tms_env,
        capture_output=True,
        timeout=120,
    )
    assert published.returncode == 0, published.stderr
    assert json.loads(published.stdout) == {"topic": str(T), "published": 4, "batches": 2, "transactional": False}
    assert [m.payload for m in client.fetch(T)] == [b"one", b"two", b"three", b"bin\x00ary"]

    rows = json_lines(ok(tms_env, "topic", "tail", str(T), "--last", "100", "--json").stdout)
    assert [r["payload"] for r in rows] == ["one", "two", "three", None]
    assert rows[3]["payload_hex"] == b"bin\x00ary".hex() and rows[3]["size"] == 7
    assert [r["id"] for r in rows] == [m.id.hex() for m in client.fetch(T)]
    assert all(r["tx_state"] is None and r["tx_write_pointer"] is None for r in rows)

    text = ok(tms_env, "topic", "tail", str(T), "--last", "2").stdout.splitlines()
    assert len(text) == 2 and text[0].endswith("5 B  three") and text[1].endswith("hex:62696e00617279")
    assert ok(tms_env, "topic", "tail", str(T), "--from-id", rows[1]["id"], "--format", "raw").stdout == (
        "two\nthree\nbin\x00ary\n"
    )
    since = ok(tms_env, "topic", "tail", str(T), "--from-time", str(rows[2]["publish_time"]), "--json").stdout
    shown = [r["payload"] for r in json_lines(since)]
    assert shown in (["three", None], ["one", "two", "three", None])  # the batches may share a millisecond
    assert ok(tms_env, "topic", "tail", str(T)).stdout.count("\n") == 4  # default: the last 10


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["topic", "tail", "cli:missing"], 3, "error: topic cli:missing does not exist"),
        (["topic", "tail", "cli:feed", "--from-id", "zz"], 2, "error: bad --from-id"),
        (["topic", "tail", "cli:feed", "--from-id", "00"], 2, "corrupt message id"),
        (["topic", "tail", "cli:feed", "--from-time", "yesterday"], 2, "error: bad time 'yesterday'"),
        (["topic", "tail", "cli:feed", "--last", "3", "--from-time", "5"], 2, "at most one"),
        (["topic", "publish", "cli:missing"], 3, "does not exist"),
        (["sub", "get", "cli:feed", "nope"], 3, "error: subscription 'nope' of topic cli:feed does not exist"),
        (["sub", "create", "cli:feed", "a b"], 2, "error: bad subscription name"),
        (["sub", "create", "cli:feed", "x", "--start", "whenever"], 2, "error: bad time"),
        (["sub", "reset", "cli:feed", "x"], 2, "exactly one of"),
    ],
)
def test_bad_input_gives_one_line_and_an_exit_code(
    client: MessagingClient, tms_env: dict[str, str], args: list[str], code: int, message: str
) -> None:
    client.create_topic(T)
    result = tms_admin(tms_env, *args)
    assert result.returncode == code, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_tail_shows_transaction_states_and_corrupt_rows(client: MessagingClient, tms_env: dict[str, str]) -> None:
    server = TxServer(tms_env, free_port(), "--short-timeout", "3600").start()  # "in progress" for the whole test
    try:
        client.create_topic(T)
        with TransactionClient(server.address) as tx:
            context = TransactionContext(tx, publisher := TransactionalPublisher(client))
            with context.transaction():
                publisher.publish(T, [b"committed"])
            rolled = tx.start_short()
            client.rollback(T, client.publish(T, [b"rolled back"], tx_write_pointer=rolled.write_pointer))
            tx.abort(rolled)
            invalid = tx.start_short()
            client.publish(T, [b"invalid"], tx_write_pointer=invalid.write_pointer)
            tx.invalidate(invalid.tx_id)
            running = tx.start_short()
            client.publish(T, [b"in progress"], tx_write_pointer=running.write_pointer)
            client.publish(T, [b"plain"])
            client.publish(T, [b"after"])
            # "plain" overwritten by garbage; its position, since a sequencer topic's need not be 1, 2, 3, ... (a
            # publish that timed out on a loaded machine leaves a skip marker and goes on at a later offset)
            plain = MessageId.decode(next(m.id for m in client.fetch(T) if m.payload == b"plain"))
            junk = {MESSAGE_COLUMN: b"junk"}
            client.installation.table("messages").put(message_key(T, plain.generation, plain.position), junk)
            expected = ["committed", "rolled back", "invalid", "in progress"]
            corrupt = f"corrupt row at position {plain.position}"
            for source in (["--tx-server", server.address], []):  # the server, or its state in HBase
                rows = json_lines(ok(tms_env, "topic", "tail", str(T), "--from-time", "0", "--json", *source).stdout)
                assert [r.get("tx_state") for r in rows[:4]] == expected, source
                assert rows[4]["position"] == plain.position and f"{corrupt} of cli:feed" in rows[4]["corrupt"]
                assert (rows[5]["payload"], rows[5]["tx_state"], len(rows)) == ("after", None, 6)
            visible = ok(tms_env, "topic", "tail", str(T), "--from-time", "0", "--transactional", "--format", "raw")
            assert visible.stdout == "committed\n"  # and it stops at the transaction in progress
            text = ok(tms_env, "topic", "tail", str(T), "--from-time", "0").stdout
            assert f"tx {running.write_pointer} in progress" in text and f"!! {corrupt}" in text
            tx.abort(running)
    finally:
        server.stop()


def test_tail_follow_shows_new_messages_until_stopped(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(T)
    client.publish(T, [b"first"])
    follower = subprocess.Popen(
        [TMS_ADMIN, "topic", "tail", str(T), "--follow", "--format", "raw"],
        env=tms_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout.readline() == "first\n"
        client.publish(T, [b"second"])
        assert follower.stdout.readline() == "second\n"
    finally:
        follower.send_signal(signal.SIGTERM)
        _, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err


def test_subscription_commands(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(T)
    client.publish(T, [b"a", b"b", b"c"])
    created = json.loads(ok(tms_env, "sub", "create", str(T), "svc", "--json").stdout)
    assert (created["name"], created["position"], created["consumer"]) == ("svc", None, None)
    ok(tms_env, "sub", "create", str(T), "late", "--start", "latest")
    listed = json.loads(ok(tms_env, "sub", "list", str(T), "--json").stdout)
    assert [(s["name"], s["lag_messages"]) for s in listed] == [("late", 0), ("svc", 3)]
    table = ok(tms_env, "sub", "list", str(T)).stdout.splitlines()
    assert table[0].split() == ["NAME", "LAG(MSGS)", "HELD", "LAG(S)", "CONSUMER"]
    assert table[2].split()[:3] == ["svc", "3", "0"]
    with client.consumer(T, "svc", lease_seconds=30) as consumer:
        consumer.poll(max_messages=2)
        consumer.commit()
        shown = json.loads(ok(tms_env, "sub", "get", str(T), "svc", "--json").stdout)
        assert (shown["consumer"], shown["lag_messages"]) == (consumer.owner, 1)
        busy = tms_admin(tms_env, "sub", "reset", str(T), "svc", "--earliest")
        assert busy.returncode == 4 and "active consumer" in busy.stderr
        assert tms_admin(tms_env, "sub", "delete", str(T), "svc").returncode == 4
    reset = json.loads(ok(tms_env, "sub", "reset", str(T), "svc", "--time", "0", "--json").stdout)
    assert reset["position"] is None and client.lag(T, "svc").messages == 3
    ok(tms_env, "sub", "reset", str(T), "svc", "--id", next(iter(client.fetch(T))).id.hex())
    assert client.lag(T, "svc").messages == 3
    assert "lag           3 messages" in ok(tms_env, "sub", "get", str(T), "svc").stdout
    assert json.loads(ok(tms_env, "sub", "delete", str(T), "svc", "--json").stdout) == {
        "deleted": "svc",
        "topic": str(T),
    }
    assert [s.name for s in client.list_subscriptions(T)] == ["late"]  # (sub list itself is checked above)


def test_topic_stats(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(T, {"ordering": "chain"})  # exact totals: the chain's running totals per row
    client.publish(T, [b"12", b"345"])
    client.create_subscription(T, "svc")
    stats = json.loads(ok(tms_env, "topic", "stats", str(T), "--json").stdout)
    assert (stats["messages"], stats["bytes"], stats["exact"], stats["generation"]) == (2, 5, True, 1)
    assert stats["first"]["position"] == stats["last"]["position"] == 1
    assert stats["rates"]["60"] == pytest.approx(2 / 60)
    assert [(s["name"], s["lag_messages"]) for s in stats["subscriptions"]] == [("svc", 2)]
    text = ok(tms_env, "topic", "stats", str(T)).stdout
    assert "messages       2" in text and "svc" in text


def test_topic_stats_of_a_sequencer_topic(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(T, {"ordering": "sequencer"})  # totals from offsets, bytes from bytes checkpoints
    client.publish(T, [b"12", b"345"])
    client.publish(T, [b"6" * 100])
    client.create_subscription(T, "svc")
    stats = json.loads(ok(tms_env, "topic", "stats", str(T), "--json").stdout)
    assert (stats["messages"], stats["exact"], stats["generation"]) == (3, True, 1)
    assert (stats["bytes"], stats["bytes_exact"]) == (105, True)
    text = ok(tms_env, "topic", "stats", str(T)).stdout
    assert "bytes          105\n" in text  # no "estimated" label
    assert [(s["name"], s["lag_messages"]) for s in stats["subscriptions"]] == [("svc", 3)]


@pytest.fixture
def exporter(installed_env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [TMS_ADMIN, "metrics", "serve", "--port", str(port), "--max-age", "0"],
        env=installed_env,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url, timeout=5).read()
            break
        except OSError:
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the exporter did not start"
            time.sleep(0.1)
    yield url
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def test_metrics_exporter_serves_depth_and_lag(client: MessagingClient, exporter: str) -> None:
    client.create_topic(T)
    client.publish(T, [b"a", b"b", b"c"])
    client.create_subscription(T, "svc")
    text = urllib.request.urlopen(exporter, timeout=30).read().decode()
    assert 'tms_topic_messages{namespace="cli",topic="cli:feed"} 3.0' in text
    assert 'tms_topic_published_messages_total{namespace="cli",topic="cli:feed"} 3.0' in text
    assert 'tms_subscription_lag_messages{namespace="cli",subscription="svc",topic="cli:feed"} 3.0' in text
    assert 'tms_subscription_lag_seconds{namespace="cli",subscription="svc",topic="cli:feed"}' in text
    assert "_created" not in text and "process_resident_memory_bytes" in text and "python_info" in text
    assert "tms_topic_last_publish_timestamp_seconds" in text


def test_tail_shows_the_payloads_a_transaction_stored(client: MessagingClient, tms_env: dict[str, str]) -> None:
    """A row that points at payloads stored with store() (a transactional publish of stored payloads)."""
    from tms_hbase.tx import write_pointer_now

    client.create_topic(T)
    pointer = write_pointer_now()
    client.store(T, [b"kept-1", b"kept-2"], pointer)
    client.publish(T, [], tx_write_pointer=pointer)
    rows = json_lines(ok(tms_env, "topic", "tail", str(T), "--json").stdout)
    assert [(r["payload"], r["tx_write_pointer"]) for r in rows] == [("kept-1", pointer), ("kept-2", pointer)]
