"""Scheduled delivery on shared subscriptions (docs/shared.md, "Scheduled delivery"), on the real HBase: a
scheduled message is never delivered before its time on HBase's clock (also by a consumer process whose
host clock runs an hour ahead), is delivered once after it even when it waited longer than the ack timeout,
survives consumers killed and stopped while they hold it, is found by new processes after the floor passed
it, leaves key order, is never delivered when its transaction rolled back, is counted once in the totals
however its counter is killed; bad times are refused."""

from __future__ import annotations

import base64
import json
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tms_hbase import (
    Delivery,
    InvalidArgument,
    MessagingClient,
    Record,
    TopicId,
    deliver_after,
    deliver_at,
)
from tms_hbase.consume.subscriptions import row_key
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.rest import codec as rest
from tms_hbase.shared import schedule
from tms_hbase.shared.state import CLAIM_COLUMN, Keys
from tms_hbase.shared.store import SharedStore
from tms_hbase.tx.client import TransactionClient

from ..gateway_server import GatewayProcess, module_gateway
from ..shared_workers import events, land_faults, start
from ..tx_server import TxServer, free_port
from ..verify.key_order import check
from .test_gateway import assert_error

T = TopicId("sched", "jobs")
WAIT = 120.0  # seconds a condition may take on a loaded machine
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")

TMS_ADMIN = str(Path(sys.executable).with_name("tms-admin"))

gateway = module_gateway("workers = 2\n")


def hbase_now(client: MessagingClient) -> int:
    """HBase's clock now, exactly: the timestamp HBase gives a cell written now (an upper bound of HBase's
    time at any moment before the call)."""
    table = client.installation.table("subscriptions")
    table.put(b"\xfftest-clock-probe", {CLAIM_COLUMN: b"x"})
    return table.get_versions(b"\xfftest-clock-probe", CLAIM_COLUMN, 1)[0][1]


def receive_until(
    client: MessagingClient, consumer, done: Callable[[list[tuple[Delivery, int]]], bool], ack: bool = True
) -> list[tuple[Delivery, int]]:
    """Deliveries, each with HBase's time just after its receive returned (so a delivery before its time shows
    as a time before it), until ``done`` of them."""
    got: list[tuple[Delivery, int]] = []
    deadline = time.monotonic() + WAIT
    while not done(got):
        assert time.monotonic() < deadline, f"timed out with {[d.payload for d, _ in got]}"
        batch = consumer.receive(10, 0.5)
        after = hbase_now(client)
        got += [(d, after) for d in batch]
        if ack and batch:
            consumer.ack(*batch)
    return got


def never_early(got: list[tuple[Delivery, int]]) -> None:
    for d, after in got:
        due = d.deliver_at_ms
        assert due is None or after >= due, f"{d.payload!r} delivered {due - after} ms before its time"


def payloads(got: list[tuple[Delivery, int]]) -> list[bytes]:
    return [d.payload for d, _ in got]


def keys_of(client: MessagingClient, name: str) -> Keys:
    meta = client.get_topic(T)
    store = SharedStore(client.installation.table("subscriptions"))
    key = row_key(T, meta.generation, name)
    found = store.settings(key)
    assert found is not None
    return Keys(key, found[1].incarnation)


def test_scheduled_messages_go_out_at_their_time_once_even_past_the_ack_timeout(client: MessagingClient) -> None:
    client.create_topic(T)
    # each delivery is acknowledged within the ack timeout (3 s: a receive, a read of HBase's clock and the ack,
    # at load 30), and each scheduled message waits twice that or more
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=3.0, claim_size=4)
    now = hbase_now(client)
    client.publish(
        T,
        [
            Record(b"at", headers=[deliver_at(now + 8000)]),
            b"plain",
            Record(b"after", key=b"k", headers=[("x", b"1"), deliver_after(6.0)]),
            b"plain2",
        ],
    )
    # exclusive readers see every message at its position, its time visible
    fetched = list(client.fetch(T))
    assert [m.payload for m in fetched] == [b"at", b"plain", b"after", b"plain2"]
    assert fetched[0].deliver_at_ms == now + 8000
    assert fetched[2].deliver_at_ms == fetched[2].publish_time + 6000
    assert fetched[1].deliver_at_ms is None
    with client.shared_consumer(T, "work", poll_interval_seconds=0.1) as consumer:
        first = receive_until(client, consumer, lambda got: len(got) >= 2)
        assert sorted(payloads(first)) == [b"plain", b"plain2"], "a scheduled message went out before its time"
        states = {p.id: p.state for p in client.pending(T, "work")}
        assert sorted(states.values()) == ["scheduled", "scheduled"]
        numbers = client.get_subscription(T, "work").shared
        assert numbers is not None
        assert (numbers.scheduled, numbers.next_scheduled_ms) == (2, fetched[2].deliver_at_ms)
        got = first + receive_until(client, consumer, lambda got: len(got) >= 2)
        # more: nothing comes twice although each waited longer than the ack timeout
        got += receive_until(client, consumer, lambda _: hbase_now(client) > now + 11000)
    never_early(got)
    assert sorted(payloads(got)) == [b"after", b"at", b"plain", b"plain2"]
    assert all(d.deliveries == 1 for d, _ in got)
    stats = client.get_subscription(T, "work").shared
    assert stats is not None and (stats.acknowledged, stats.due, stats.in_flight) == (4, 0, 0)


def one_far_ahead(client: MessagingClient, monkeypatch: pytest.MonkeyPatch, plain: int) -> int:
    """Topic T with subscription "work" (claims of 4) holding b"later", due 40 s ahead, then ``plain`` messages
    in rows of their own (ranges are read to their end as the next ones come); this process parks what is due
    over 1 s ahead (not 60 s). Its due time (HBase's clock, ms). The ack timeout (6 s) and the 40 s leave room
    for a receive, a read of HBase's clock and an ack, and for the floor to pass it, at load 30."""
    monkeypatch.setattr(schedule, "PARK_MS", 1000)
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=6.0, claim_size=4)
    due = hbase_now(client) + 40_000
    client.publish(T, [Record(b"later", headers=[deliver_at(due)])])
    for i in range(plain):
        client.publish(T, [str(i).encode()])
    return due


@pytest.mark.slow
def test_a_message_due_far_ahead_lets_the_floor_pass_and_a_new_process_delivers_it(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    due = one_far_ahead(client, monkeypatch, 30)
    keys = keys_of(client, "work")
    table = client.installation.table("subscriptions")
    with client.shared_consumer(T, "work", poll_interval_seconds=0.1, reap_interval=0.2) as consumer:
        got = receive_until(client, consumer, lambda got: len(got) >= 30)
        assert b"later" not in payloads(got)
        # the floor passes it: its schedule row is written, the acknowledged claims before the last range go,
        # its claim stays
        deadline = time.monotonic() + WAIT
        while not table.scan(prefix=keys.schedule) or len(table.scan(prefix=keys.claims)) > 4 + 1:
            assert time.monotonic() < deadline, f"{len(table.scan(prefix=keys.claims))} claims left"
            assert consumer.receive(1, 0.3) == []
        rows = table.scan(prefix=keys.schedule)
        assert [keys.due_and_id(k)[0] for k, _ in rows] == [due]
        later = keys.claim(keys.due_and_id(rows[0][0])[1])
        numbers = client.get_subscription(T, "work").shared
        assert numbers is not None and (numbers.scheduled, numbers.next_scheduled_ms, numbers.due) == (1, due, 0)
        assert table.get_cell(later, CLAIM_COLUMN) is not None
        # still listed in play, below the floor now
        assert [(p.id, p.state, p.deadline) for p in client.pending(T, "work")] == [
            (keys.due_and_id(rows[0][0])[1], "scheduled", due)
        ]
        assert hbase_now(client) < due, "the machine was too slow for this test to see the row before it was due"
    # another process delivers it at its time, from the row
    out = tmp_path / "worker.txt"
    worker = start(T, tms_env, out, "--idle", "60")  # (its message is due up to 40 s after it starts)
    deadline = time.monotonic() + WAIT
    while not any(f[0] == "acked" for _, f in events([out])):
        assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.1)
    worker.send_signal(signal.SIGTERM)
    worker.wait(60)
    got_lines = [f for _, f in events([out]) if f[0] == "got"]
    assert [f[1] for f in got_lines] == ["later"]
    assert int(got_lines[0][4]) >= due  # (HBase's clock as the worker read it after receive: a lower bound)
    deadline = time.monotonic() + WAIT
    while table.scan(prefix=keys.schedule) or table.get_cell(later, CLAIM_COLUMN):  # settled: its row and claim go
        assert time.monotonic() < deadline
        with client.shared_consumer(T, "work", reap_interval=0.1) as consumer:
            assert consumer.receive(1, 0.3) == []
    stats = client.get_subscription(T, "work").shared
    assert stats is not None and stats.acknowledged == 31


@pytest.mark.slow
def test_consumers_killed_stopped_or_with_a_clock_an_hour_ahead_deliver_on_time_and_lose_nothing(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path
) -> None:
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=2.0, claim_size=2, max_deliveries=100)
    now = hbase_now(client)
    rng = random.Random(45)
    due = {str(i): now + 4000 + rng.randrange(6000) for i in range(40)}
    client.publish(T, [Record(p.encode(), headers=[deliver_at(t)]) for p, t in due.items()])
    ahead = {
        **tms_env,
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME": "+1h",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    files = [tmp_path / f"w{i}.txt" for i in range(8)]
    workers = {i: start(T, ahead if i == 0 else tms_env, files[i], "--delay", "0.2", "--idle", "8") for i in range(3)}

    def spawn() -> tuple[int, object]:
        i = len([f for f in files if f.exists()])
        return i, start(T, tms_env, files[i], "--delay", "0.2", "--idle", "8")

    def acked() -> set[str]:
        return {f[1] for _, f in events(files) if f[0] == "acked"}

    land_faults(workers, files, spawn, rng, (2.5, 3.5), lambda: acked() >= set(due))  # type: ignore[arg-type]

    def settled() -> int:  # (an ack under way when its process was killed may have landed without its note)
        numbers = client.get_subscription(T, "work").shared
        return 0 if numbers is None else numbers.acknowledged

    deadline = time.monotonic() + WAIT
    while settled() < len(due):
        missing = set(due) - acked()
        notes = [(i, f) for i, f in events(files) if len(f) > 2 and f[1] in missing]
        assert time.monotonic() < deadline, f"{settled()} acknowledged; without an 'acked' note: {notes}"
        time.sleep(0.2)
    for w in workers.values():
        w.wait(WAIT)
    assert check(events(files), {}, due, [], due) == {}  # none lost, none acknowledged twice, none early
    got = [(i, f) for i, f in events(files) if f[0] == "got"]
    assert any(i == 0 for i, _ in got), "the consumer whose clock runs ahead delivered nothing"


def test_a_scheduled_message_leaves_key_order(client: MessagingClient) -> None:
    client.create_topic(T)
    # no redelivery here: an ack timeout that holds from a receive to its ack at load 30
    client.create_subscription(T, "work", shared=True, ordering="key", ack_timeout_seconds=30.0, claim_size=4)
    now = hbase_now(client)
    client.publish(
        T,
        [
            Record(b"k1", key=b"k"),
            # due well after the other three are received at load 30 (the last wait is for it: a moderate one)
            Record(b"k2-scheduled", key=b"k", headers=[deliver_at(now + 15_000)]),
            Record(b"k3", key=b"k"),
            Record(b"k4", key=b"k"),
        ],
    )
    with client.shared_consumer(T, "work", poll_interval_seconds=0.1) as consumer:
        got = receive_until(client, consumer, lambda got: len(got) >= 3)
        assert payloads(got) == [b"k1", b"k3", b"k4"], "the key's later messages wait for no scheduled one"
        got += receive_until(client, consumer, lambda got: len(got) >= 1)
    never_early(got)
    assert payloads(got)[-1] == b"k2-scheduled"


@pytest.fixture
def tx_server(tms_env: dict[str, str]) -> Iterator[TxServer]:
    server = TxServer(tms_env, free_port()).start()
    yield server
    server.stop()


def test_a_scheduled_message_of_a_rolled_back_transaction_is_never_delivered(
    hbase_address: str, prefix: str, client: MessagingClient, tx_server: TxServer
) -> None:
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=1.0)
    with (
        TransactionClient(tx_server.address) as tx,
        MessagingClient(hbase_address, prefix, tx_server=tx_server.address) as reader,
    ):
        due = hbase_now(client) + 2000
        rolled = tx.start_short()
        rolled_back = [Record(b"rolled", headers=[deliver_at(due)])]
        result = client.publish(T, rolled_back, tx_write_pointer=rolled.write_pointer)
        kept = tx.start_short()
        client.publish(T, [Record(b"kept", headers=[deliver_at(due)])], tx_write_pointer=kept.write_pointer)
        client.rollback(T, result)
        tx.abort(rolled)
        tx.can_commit(kept, [])
        tx.commit(kept)
        with reader.shared_consumer(T, "work", poll_interval_seconds=0.1) as consumer:
            got = receive_until(client, consumer, lambda got: len(got) >= 1)
            got += receive_until(client, consumer, lambda _: hbase_now(client) > due + 3000)
    never_early(got)
    assert payloads(got) == [b"kept"]


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ([("tms-deliver-at", b"-5")], "not a time in ms"),
        ([("tms-deliver-at", b"soon")], "not a time in ms"),
        ([("tms-deliver-after", b"")], "not a time in ms"),
        ([("tms-deliver-after", b"1.5")], "not a time in ms"),
        ([("tms-deliver-at", b"1"), ("tms-deliver-after", b"1")], "give one"),
        ([("tms-deliver-at", b"1"), ("tms-deliver-at", b"2")], "give one"),
    ],
)
def test_bad_delivery_times_are_refused_and_nothing_is_written(
    client: MessagingClient, headers: list[tuple[str, bytes]], reason: str
) -> None:
    client.create_topic(T)
    with pytest.raises(InvalidArgument, match=reason):
        client.publish(T, [b"fine", Record(b"bad", headers=headers)])
    assert list(client.fetch(T)) == []


def test_the_gateway_and_its_client_schedule_messages(
    gateway: GatewayProcess, direct: MessagingClient, http: httpx.Client
) -> None:
    topic = TopicId(f"s{uuid.uuid4().hex[:10]}", "jobs")
    direct.create_topic(topic)
    direct.create_subscription(topic, "work", shared=True, ack_timeout_seconds=5.0)
    path = rest.topic_path(topic)

    def body(value: bytes) -> dict:
        return {"messages": [{"payload": "eA==", "headers": [["tms-deliver-at", base64.b64encode(value).decode()]]}]}

    assert_error(http.post(f"{path}/publish", json=body(b"-1")), 400, "InvalidArgument")
    assert list(direct.fetch(topic)) == []
    due = hbase_now(direct) + 3000
    assert http.post(f"{path}/publish", json=body(str(due).encode())).is_success
    with GatewayClient(gateway.url, timeout_seconds=60) as client:
        client.publish(topic, [Record(b"y", headers=[deliver_after(2.0)])])
        with client.shared_consumer(topic, "work") as consumer:
            got = receive_until(direct, consumer, lambda got: len(got) >= 2)
    assert all(d.deliver_at_ms is not None for d, _ in got), "the gateway's deliveries carry their time"
    never_early(got)
    assert sorted(payloads(got)) == [b"x", b"y"]


def test_the_cli_schedules_shows_and_refuses(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True)

    def admin(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run([TMS_ADMIN, *args], input=stdin, env=tms_env, capture_output=True, text=True, timeout=120)

    bad = admin("topic", "publish", str(T), "-H", "tms-deliver-at=-1", stdin="x\n")
    assert bad.returncode != 0 and len(bad.stderr.splitlines()) == 1 and "tms-deliver-at" in bad.stderr, bad.stderr
    assert list(client.fetch(T)) == []
    due = hbase_now(client) + 3_600_000
    assert admin("topic", "publish", str(T), "-H", f"tms-deliver-at={due}", stdin="x\n").returncode == 0
    taken = admin("sub", "consume", str(T), "work", "--count", "10", "--wait", "1", "--ack", "--json")
    assert taken.returncode == 0 and json.loads(taken.stdout) == [], taken.stderr
    rows = json.loads(admin("sub", "pending", str(T), "work", "--json").stdout)
    assert [r["state"] for r in rows] == ["scheduled"]
    numbers = json.loads(admin("sub", "get", str(T), "work", "--json").stdout)["shared"]
    assert (numbers["scheduled"], numbers["next_scheduled_ms"], numbers["due"]) == (1, due, 0)
    assert "1 scheduled" in admin("sub", "get", str(T), "work").stdout


@pytest.mark.slow
@pytest.mark.parametrize("step", ["schedule-acked", "schedule-counted", "schedule-deleted"])
def test_a_consumer_killed_while_it_counts_a_settled_scheduled_message_loses_no_count(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    due = one_far_ahead(client, monkeypatch, 20)
    keys = keys_of(client, "work")
    table = client.installation.table("subscriptions")
    with client.shared_consumer(T, "work", poll_interval_seconds=0.1, reap_interval=0.2) as consumer:
        receive_until(client, consumer, lambda got: len(got) >= 20)
        deadline = time.monotonic() + WAIT
        while not table.scan(prefix=keys.schedule):  # the floor passed it: its schedule row is written
            assert time.monotonic() < deadline, "the floor never passed the scheduled message"
            assert consumer.receive(1, 0.3) == []
    assert hbase_now(client) < due, "the machine was too slow for this test to park the message before it was due"
    later = keys.claim(keys.due_and_id(table.scan(prefix=keys.schedule)[0][0])[1])

    # a process delivers it at its time, acknowledges it, and kills itself at the step of counting it
    files = [tmp_path / "killed"]
    killed = start(T, tms_env, files[0], "--die-at", step, "--idle", "60")
    _, err = killed.communicate(timeout=WAIT + 60)
    assert killed.returncode == -signal.SIGKILL, err
    seen = events(files)
    assert [f[1] for _, f in seen if f[0] == "acking"] == ["later"]
    assert any(f[:2] == ["dying", step] for _, f in seen), "the fault did not land at its step"

    assert acknowledged(client) == 21, "the numbers right after the kill"

    # new processes consume on until the row and the claim are gone and the clearing mark names no row
    store = SharedStore(table)
    deadline = time.monotonic() + WAIT
    while (
        table.scan(prefix=keys.schedule)
        or table.get_cell(later, CLAIM_COLUMN) is not None
        or store.floor(keys).cleared.scheduled
    ):
        assert time.monotonic() < deadline, "the settled scheduled message's rows stayed"
        files.append(tmp_path / f"after{len(files)}")
        proc = start(T, tms_env, files[-1], "--idle", "2")
        _, err = proc.communicate(timeout=WAIT)
        assert proc.returncode == 0, err
    assert acknowledged(client) == 21


def acknowledged(client: MessagingClient) -> int:
    stats = client.get_subscription(T, "work").shared
    assert stats is not None
    return stats.acknowledged


def test_a_parked_message_is_no_subscription_to_the_listings(client: MessagingClient) -> None:
    """Once the floor passes a message due an hour ahead, its schedule row (under the subscription's key, its cell
    in the column of a subscription's) is written: list_subscriptions, topic_stats and the list of every
    subscription still list the one subscription. They read it as a corrupt subscription (CorruptData) and a
    name that does not decode (UnicodeDecodeError), so the console's screens of the topic failed."""
    client.create_topic(T, {"ordering": "chain"})
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=600, claim_size=1)
    client.publish(T, [Record(b"later", headers=[deliver_at(client.hbase_clock.now_ms() + 3_600_000)])])
    client.publish(T, [b"now"] * 4)
    keys = keys_of(client, "work")
    table = client.installation.table("subscriptions")
    with client.shared_consumer(T, "work", max_wait_seconds=0) as consumer:
        assert payloads(receive_until(client, consumer, lambda got: len(got) >= 4)) == [b"now"] * 4
        deadline = time.monotonic() + WAIT
        while not table.scan(prefix=keys.schedule):  # the floor passes it: its row is written
            assert time.monotonic() < deadline, "no schedule row"
            assert consumer.receive(1, 0.3) == []
    assert [s.name for s in client.list_subscriptions(T)] == ["work"]
    assert [name for name, _mark, _lag in client.topic_stats(T).subscriptions] == ["work"]
    meta = client.get_topic(T)
    assert [s for s in client.admin.subscription_names() if s[0] == T] == [(T, meta.generation, "work")]
