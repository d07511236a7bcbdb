"""A consumer keeps the range it reads while the counter has ranges left for the others (so consumers do
not take turns on one range): it gives the range back when it closes, loses it to another consumer once
its short hold runs out (stopped, killed, or no longer called), and then delivers nothing it claimed in it."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.integration.test_shared_crash import T, check_deliveries
from tests.shared_workers import events, start
from tests.waiting import wait_for
from tms_hbase import MessagingClient
from tms_hbase.shared import consumer as consumer_module

TOTAL, CLAIM = 20, 5  # one message per publish (one position each): four ranges of five


def fill(client: MessagingClient, ack_timeout: float) -> None:
    client.create_topic(T)
    for n in range(TOTAL):
        client.publish(T, [str(n).encode()])
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=ack_timeout, claim_size=CLAIM)


def drain(consumer: object, seconds: float) -> list:
    """Receive and acknowledge until a receive finds nothing for ``seconds``."""
    got_all = []
    while got := consumer.receive(10, seconds):  # type: ignore[attr-defined]
        consumer.ack(*got)  # type: ignore[attr-defined]
        got_all += got
    return got_all


def test_a_kept_range_goes_to_the_others_at_once_when_its_consumer_closes(
    client: MessagingClient, hbase_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumer_module, "KEEP_SECONDS", 3600.0)  # kept for an hour unless given back
    fill(client, ack_timeout=3600.0)
    with MessagingClient(hbase_address, prefix=client.installation.prefix, create_tables=False) as other:
        a = other.shared_consumer(T, "work")
        first = a.receive(2, 10.0)
        assert [d.payload for d in first] == [b"0", b"1"]
        a.ack(*first)
        with client.shared_consumer(T, "work", poll_interval_seconds=0.1) as b:
            # A keeps range 1 (three more messages), so B reads the other three ranges
            assert sorted(int(d.payload) for d in drain(b, 1.0)) == list(range(5, TOTAL))
            a.close()  # gives range 1 back: B goes on with it now, not when A's hold of an hour runs out
            rest = drain(b, 5.0)
            assert [d.payload for d in rest] == [b"2", b"3", b"4"]
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None
    assert (numbers.acknowledged, numbers.in_flight, numbers.redelivered) == (TOTAL, 0, 0)


def test_a_range_kept_by_a_consumer_that_went_away_goes_to_the_others_within_its_hold(
    client: MessagingClient, hbase_address: str
) -> None:
    """A consumer that stops calling without closing (a gateway session no longer called, a hung one)
    holds the rest of its range for KEEP_SECONDS, not for its ack timeout (an hour here: B's drain, which ends
    after KEEP_SECONDS + 5 s without a message, would end without them)."""
    fill(client, ack_timeout=3600.0)
    with MessagingClient(hbase_address, prefix=client.installation.prefix, create_tables=False) as other:
        a = other.shared_consumer(T, "work")
        first = a.receive(2, 10.0)
        assert [d.payload for d in first] == [b"0", b"1"]
        a.ack(*first)  # and A is never called again
        with client.shared_consumer(T, "work", poll_interval_seconds=0.1) as b:
            got = sorted(int(d.payload) for d in drain(b, consumer_module.KEEP_SECONDS + 5.0))
            assert got == list(range(2, TOTAL)), "the rest of A's range waited for its ack timeout"
        a.close()
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None
    assert (numbers.acknowledged, numbers.in_flight, numbers.redelivered) == (TOTAL, 0, 0)


def test_a_consumer_whose_kept_range_was_taken_over_delivers_nothing_it_claimed_in_it(
    client: MessagingClient, hbase_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A keeps range 1 after its first read and reads on in it without taking it again; that read stalls
    past A's hold, B takes the range over and delivers its messages. A's recording of its progress then
    fails: A delivers nothing, and gives what it claimed back at once."""
    ack_timeout = 3.0
    fill(client, ack_timeout)
    with (
        MessagingClient(hbase_address, prefix=client.installation.prefix, create_tables=False) as other,
        other.shared_consumer(T, "work") as a,
        client.shared_consumer(T, "work") as b,
    ):
        first = a.receive(2, 10.0)
        assert [d.payload for d in first] == [b"0", b"1"]
        a.ack(*first)
        taken_by_b: list = []  # of range 1
        by_b: list = []
        real_fetch, real_create = a._reader.fetch, a._store.create_claims

        def slow_fetch(*args: object, **kwargs: object) -> object:
            passed = client.hbase_clock.now_ms() + int(ack_timeout * 1000) + 200
            deadline = time.monotonic() + 30
            while client.hbase_clock.now_ms() < passed:  # A's hold on its range runs out
                assert time.monotonic() < deadline
                time.sleep(0.05)
            return real_fetch(*args, **kwargs)

        def create_then_b_takes_over(*args: object, **kwargs: object) -> object:
            written = real_create(*args, **kwargs)  # A's claims of messages 2 and 3
            while not taken_by_b:  # B takes range 1 (A's hold ran out), passes A's claims, delivers message 4
                got = b.receive(10, 10.0)
                assert got, "B found nothing"
                taken_by_b.extend(d for d in got if int(d.payload) < CLAIM)
                by_b.extend(got)
                b.ack(*got)
            return written

        monkeypatch.setattr(a, "_ahead", None)  # what A read ahead is dropped: its next read fetches (slowly)
        monkeypatch.setattr(a._reader, "fetch", slow_fetch)
        monkeypatch.setattr(a._store, "create_claims", create_then_b_takes_over)
        later = a.receive(2, 0.1)  # A lost range 1: nothing of it; it may go on with another range
        monkeypatch.undo()
        assert all(int(d.payload) >= CLAIM for d in later), "A delivered what it claimed in a range it lost"
        if later:
            a.ack(*later)
        assert [d.payload for d in taken_by_b] == [b"4"]
        assert not any(p.owner == a.owner for p in client.pending(T, "work")), "A gave its claims back"
        rest = drain(b, 2.0)
        assert {d.payload: d.deliveries for d in rest if int(d.payload) < CLAIM} == {b"2": 1, b"3": 1}
        assert sorted(int(d.payload) for d in rest + by_b + first + later) == list(range(TOTAL))
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None
    assert (numbers.acknowledged, numbers.in_flight, numbers.redelivered) == (TOTAL, 0, 0)


@pytest.mark.slow
def test_a_killed_consumers_kept_range_goes_to_a_consumer_in_a_new_process(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path
) -> None:
    fill(client, ack_timeout=3.0)
    files = [tmp_path / "a", tmp_path / "b"]
    a = start(T, tms_env, files[0], "--batch", "2", "--delay", "0.5", "--idle", "60")
    try:
        wait_for(
            lambda: sum(1 for _, f in events(files) if f[0] == "acked") >= 2,
            "A's first acknowledgements",
            timeout=300,  # a new process's start (interpreter, imports, connection) took over 30 s at load 40
        )
    finally:
        a.send_signal(signal.SIGKILL)
        a.communicate(timeout=30)
    b = start(T, tms_env, files[1], "--batch", "5", "--idle", "8")
    _, err = b.communicate(timeout=120)
    assert b.returncode == 0, err
    seen = events(files)
    check_deliveries(seen)
    acks = [f[1] for _, f in seen if f[0] == "acked"]
    assert len(acks) == len(set(acks)), "a message was acknowledged twice"
    maybe = {f[1] for i, f in seen if f[0] == "acking" and i == 0} - set(acks)  # A killed during an ack
    assert set(acks) | maybe == {str(n) for n in range(TOTAL)}, "a message was lost"
    assert client.lag(T, "work").messages == 0
    assert client.pending(T, "work") == []
