"""Many consumer processes on one shared subscription with a backlog drain it without stalling: the
acknowledgements never stop for long while messages are left. A message claimed but not delivered, or a
range of positions left held, is found again only when its deadline passes, so such a fault shows as
every consumer idle for about an ack timeout (a minute here) with work left; the bound below is well
under that and well over what a loaded machine takes between two acknowledgements of eight consumers."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.test_shared_crash import T, check_deliveries
from tests.shared_workers import events, start
from tms_hbase import MessagingClient

CONSUMERS = 8
ROWS, ROW = 30, 100  # the backlog: batch rows of 100 messages, as a publisher of batches writes them
ACK_TIMEOUT = 3600.0  # a consumer that waited on a claim's ack timeout would stall for an hour
STALL = 300.0  # seconds without any acknowledgement while messages are left: a stall, even at load 10


@pytest.mark.slow
def test_many_consumer_processes_drain_a_backlog_without_a_stall(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path
) -> None:
    client.create_topic(T)
    total = ROWS * ROW
    for row in range(ROWS):
        client.publish(T, [str(row * ROW + i).encode() for i in range(ROW)])
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=ACK_TIMEOUT, claim_size=128)
    files = [tmp_path / f"w{i}" for i in range(CONSUMERS)]
    # --idle far past the drain: a consumer that found nothing for a while is still there when work shows up
    procs = [start(T, tms_env, f, "--batch", "32", "--idle", "600") for f in files]
    try:
        ready = time.monotonic() + 120
        while sum(1 for _, f in events(files) if f[0] == "ready") < CONSUMERS:
            assert all(p.poll() is None for p in procs), "a consumer process ended before it was ready"
            assert time.monotonic() < ready, "the consumer processes did not start within 120 s"
            time.sleep(0.1)
        acked, stalled_at = 0, time.monotonic() + STALL
        while acked < total:
            now_acked = sum(1 for _, f in events(files) if f[0] == "acked")
            if now_acked > acked:
                acked, stalled_at = now_acked, time.monotonic() + STALL
            assert all(p.poll() is None for p in procs), "a consumer process ended with messages left"
            assert time.monotonic() < stalled_at, (
                f"no message acknowledged for {STALL:.0f} s with {total - acked} of {total} left: a stall"
            )
            time.sleep(0.2)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()

    seen = events(files)
    deliveries = check_deliveries(seen)
    acks = [f[1] for _, f in seen if f[0] == "acked"]
    assert sorted(acks, key=int) == [str(n) for n in range(total)], "each message acknowledged exactly once"
    assert all(got[0][0] == 1 for got in deliveries.values())
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None
    assert (numbers.acknowledged, numbers.waiting, numbers.in_flight) == (total, 0, 0)


def test_claims_left_behind_by_a_consumer_that_lost_its_range_are_delivered_at_once(
    client: MessagingClient, hbase_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Consumer A takes the range, then stalls before claiming (its fetch is slow) until the range's
    deadline has passed; it writes its claims, and before it records its progress B takes the range over,
    passes A's claims as someone else's and records a progress past them. A's recording then fails: A
    delivers nothing, and what it claimed must go to another consumer now, as a first delivery, not an
    ack timeout later as an expired second one."""
    ack_timeout = 10.0  # B acknowledges within it after A's receive ends and a scan of the pending, at load 30
    client.create_topic(T)
    client.publish(T, [str(i).encode() for i in range(50)])
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=ack_timeout, claim_size=128)
    with (
        MessagingClient(hbase_address, prefix=client.installation.prefix, create_tables=False) as other,
        other.shared_consumer(T, "work") as a,
        client.shared_consumer(T, "work") as b,
    ):
        taken_by_b: list = []
        real_fetch, real_create = a._reader.fetch, a._store.create_claims

        def slow_fetch(*args: object, **kwargs: object) -> object:
            passed = client.hbase_clock.now_ms() + int(ack_timeout * 1000) + 200
            deadline = time.monotonic() + 60
            while client.hbase_clock.now_ms() < passed:  # A's hold on the range runs out
                assert time.monotonic() < deadline
                time.sleep(0.05)
            return real_fetch(*args, **kwargs)

        def create_then_b_takes_over(*args: object, **kwargs: object) -> object:
            written = real_create(*args, **kwargs)
            taken_by_b.extend(b.receive(100, 10.0))  # B takes the range whose deadline passed
            return written

        monkeypatch.setattr(a._reader, "fetch", slow_fetch)
        monkeypatch.setattr(a._store, "create_claims", create_then_b_takes_over)
        assert a.receive(32, 0.1) == [], "A lost its range: it delivers nothing it claimed"
        monkeypatch.undo()
        assert [d.payload for d in taken_by_b] == [str(i).encode() for i in range(32, 50)]
        assert not any(p.owner == a.owner for p in client.pending(T, "work")), "A gave its claims back"
        b.ack(*taken_by_b)
        left = b.receive(100, 10.0)
        assert [d.payload for d in left] == [str(i).encode() for i in range(32)]
        assert {d.deliveries for d in left} == {1}, "given back uncounted, not run out and delivered again"
        b.ack(*left)
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None
    assert (numbers.acknowledged, numbers.in_flight, numbers.redelivered) == (50, 0, 0)
