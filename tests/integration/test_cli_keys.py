"""`tms-admin topic publish -K: -H name=value` and `topic tail` with keys and headers, as real processes; a line
piped into publish is sent while the input stays open (no waiting for 100 lines or the end of input)."""

from __future__ import annotations

import json
import subprocess
import time

from tms_hbase import MessagingClient, Record, TopicId
from tms_hbase.tx.client import TransactionClient

from ..tx_server import TxServer, free_port
from .test_cli import TMS_ADMIN, ok, tms_admin

T = TopicId("ns", "orders")


def test_publish_with_a_key_delimiter_and_headers_then_tail_shows_them(
    installed_env: dict[str, str], client: MessagingClient
) -> None:
    client.create_topic(T, {"ordering": "chain"})
    lines = "order-7:paid\nno key here\n:empty key\n\xe9t\xe9:caf\xe9\n"
    done = subprocess.run(
        [TMS_ADMIN, "topic", "publish", str(T), "-K:", "-H", "source=shop", "-H", "trace=00-1", "--json"],
        input=lines.encode(),
        env=installed_env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["published"] == 4
    headers = (("source", b"shop"), ("trace", b"00-1"))
    got = [(m.key, m.payload, m.headers) for m in client.fetch(T)]
    assert got == [
        (b"order-7", b"paid", headers),
        (None, b"no key here", headers),
        (b"", b"empty key", headers),
        ("\xe9t\xe9".encode(), "caf\xe9".encode(), headers),
    ]
    shown = [json.loads(line) for line in ok(installed_env, "topic", "tail", str(T), "--json").stdout.splitlines()]
    assert [(s["key"], s["payload"]) for s in shown] == [
        ("order-7", "paid"),
        (None, "no key here"),
        ("", "empty key"),
        ("\xe9t\xe9", "caf\xe9"),
    ]
    assert shown[0]["headers"] == [
        {"name": "source", "value": "shop", "value_hex": b"shop".hex()},
        {"name": "trace", "value": "00-1", "value_hex": b"00-1".hex()},
    ]
    text = ok(installed_env, "topic", "tail", str(T)).stdout.splitlines()
    assert "key=order-7  source=shop  trace=00-1  paid" in text[0]
    assert "key=" not in text[1] and "source=shop  trace=00-1  no key here" in text[1]
    bad = tms_admin(installed_env, "topic", "publish", str(T), "-H", "novalue")
    assert bad.returncode != 0 and "NAME=VALUE" in bad.stderr and len(bad.stderr.splitlines()) == 1


def test_a_piped_line_is_published_while_the_input_stays_open(
    installed_env: dict[str, str], client: MessagingClient
) -> None:
    client.create_topic(T)
    publisher = subprocess.Popen(
        [TMS_ADMIN, "topic", "publish", str(T), "-K", "="],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=installed_env,
    )
    assert publisher.stdin is not None
    try:
        publisher.stdin.write(b"k=first\n")
        publisher.stdin.flush()
        deadline = time.monotonic() + 60
        while not list(client.fetch(T)):
            assert publisher.poll() is None, publisher.stderr.read() if publisher.stderr else ""
            assert time.monotonic() < deadline, "the line was not published while the input stayed open"
            time.sleep(0.1)
        assert [(m.key, m.payload) for m in client.fetch(T)] == [(b"k", b"first")]
        publisher.stdin.write(b"second\n")
    finally:
        publisher.stdin.close()
    assert publisher.wait(timeout=120) == 0
    assert [(m.key, m.payload) for m in client.fetch(T)] == [(b"k", b"first"), (None, b"second")]


def test_tail_shows_binary_keys_and_headers_byte_for_byte_and_marks_transaction_states(
    installed_env: dict[str, str], client: MessagingClient
) -> None:
    """Keys and headers of committed, rolled-back and in-progress messages (inline rows, and a long transaction's
    stored payloads), with a real transaction server: --json gives their exact bytes (hex), and both formats say
    which messages a committed-only reader does not receive (yet)."""
    server = TxServer(installed_env, free_port()).start()
    try:
        client.create_topic(T)
        binary = bytes(range(256))
        with TransactionClient(server.address) as tx:
            long = tx.start_long()
            client.store(T, [Record(b"stored", key=binary, headers=[("h", b"\xff"), ("h", b"")])], long.write_pointer)
            client.publish(T, [], tx_write_pointer=long.write_pointer)
            tx.can_commit(long, [])
            tx.commit(long)
            rolled = tx.start_short()
            handle = client.publish(T, [Record(b"undone", key=b"\x00k", headers=[("x", b"1")])], rolled.write_pointer)
            client.rollback(T, handle)
            tx.abort(rolled)
            running = tx.start_short(timeout_seconds=600)
            client.publish(T, [Record(b"pending", key=b"p\n", headers=[("t", binary)])], running.write_pointer)
            shown = ok(installed_env, "topic", "tail", str(T), "--json", "--tx-server", server.address).stdout
            rows = [json.loads(line) for line in shown.splitlines()]
            got = [
                (
                    r["payload"],
                    r["tx_state"],
                    bytes.fromhex(r["key_hex"]),
                    [(h["name"], bytes.fromhex(h["value_hex"])) for h in r["headers"]],
                )
                for r in rows
            ]
            assert got == [
                ("stored", "committed", binary, [("h", b"\xff"), ("h", b"")]),
                ("undone", "rolled back", b"\x00k", [("x", b"1")]),
                ("pending", "in progress", b"p\n", [("t", binary)]),
            ]
            text = ok(installed_env, "topic", "tail", str(T), "--tx-server", server.address).stdout.splitlines()
            assert (
                f"tx {long.write_pointer} committed" in text[0] and f"key=hex:{binary.hex()}  h=hex:ff  h=  " in text[0]
            )
            assert f"tx {rolled.write_pointer} rolled back" in text[1] and "key=hex:006b  x=1  undone" in text[1]
            assert f"tx {running.write_pointer} in progress" in text[2] and "key=hex:700a  t=hex:" in text[2]
            tx.abort(running)
    finally:
        server.stop()


def test_sub_consume_shows_keys_and_headers_byte_for_byte(
    installed_env: dict[str, str], client: MessagingClient
) -> None:
    client.create_topic(T)  # set up through the library: these commands are not what the test proves
    client.create_subscription(T, "work", shared=True)
    binary = bytes(range(256))
    client.publish(T, [Record(b"paid", key=b"order-7", headers=[("h", b"1"), ("h", binary)]), b"plain"])
    taken = ok(installed_env, "sub", "consume", str(T), "work", "--count", "2", "--json").stdout
    got = [(r["payload"], r["key"], r["key_hex"], r["headers"]) for r in json.loads(taken)]
    assert got == [
        (
            "paid",
            "order-7",
            b"order-7".hex(),
            [{"name": "h", "value": "1", "value_hex": "31"}, {"name": "h", "value": None, "value_hex": binary.hex()}],
        ),
        ("plain", None, None, []),
    ]
    lines = ok(installed_env, "sub", "consume", str(T), "work", "--count", "2").stdout.splitlines()
    assert lines[0].split("  ")[1:] == ["#1", "key=order-7", "h=1", f"h=hex:{binary.hex()}", "paid"]
    assert lines[1].split("  ")[1:] == ["#1", "plain"]
