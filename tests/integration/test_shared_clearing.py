"""Clearing the ranges the floor passed (their claims counted into the totals, their rows deleted). A consumer
process killed while it clears them (after its raise of the floor, before their claims are counted; or after
the count, before their rows are deleted): new processes consuming on finish the clearing, so the acknowledged
total is exactly the messages acknowledged and no claim or range row stays behind below the floor. A
subscription from before the clearing mark (its counts in the counters, no mark) goes on the same way."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.consume.subscriptions import row_key
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.stats import SharedStats
from tms_hbase.shared.state import ACKED_COLUMN, CLEARED_COLUMN, FLOOR_COLUMN, Keys, decode_u64
from tms_hbase.shared.store import Floor, SharedStore, past
from tms_hbase.storage.hbase import KEYS_ONLY

from ..shared_workers import events, start

T = TopicId("queue", "clearing")
TOTAL = 120


def settled(client: MessagingClient) -> bool:
    found = numbers(client)
    return (found.waiting, found.in_flight, found.due) == (0, 0, 0)


@pytest.mark.parametrize("step", ["raised", "counted"])
def test_a_consumer_killed_while_clearing_loses_no_acknowledgement_and_leaves_no_rows(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path, step: str
) -> None:
    client.create_topic(T)
    for first in range(0, TOTAL, 10):  # a row of 10 messages a position: a range of 2 positions holds 20
        client.publish(T, [str(i).encode() for i in range(first, first + 10)])
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=2.0, claim_size=2)

    files = [tmp_path / "killed"]
    killed = start(T, tms_env, files[0], "--die-at", step, "--batch", "5")
    _, err = killed.communicate(timeout=300)
    assert killed.returncode == -signal.SIGKILL, err
    assert any(f[:2] == ["dying", step] for _, f in events(files)), "the fault did not land at its step"

    # new processes consume on: three at once (each finds the clearing cut short), then one at a time while
    # messages wait (under load one may end idle early)
    deadline = time.monotonic() + 600
    at_once = 3
    while not settled(client):
        assert time.monotonic() < deadline, "the messages were not all acknowledged after the kill"
        procs = []
        for _ in range(at_once):
            files.append(tmp_path / f"after{len(files)}")
            procs.append(start(T, tms_env, files[-1], "--idle", "6"))
        for proc in procs:
            _, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err
        at_once = 1

    seen = events(files)
    acks = [f[1] for _, f in seen if f[0] == "acked"]
    maybe = {f[1] for i, f in seen if f[0] == "acking" and i == 0} - set(acks)  # landed, unnoted, when killed
    assert len(acks) == len(set(acks)) and set(acks) | maybe == {str(n) for n in range(TOTAL)}
    acknowledged = numbers(client).acknowledged
    assert acknowledged == TOTAL, f"{acknowledged} acknowledged, of {TOTAL} messages acknowledged"

    store, keys = state(client)
    floor = decode_u64(store.table.get_cell(keys.floor, FLOOR_COLUMN))
    assert floor > 1, "the floor never moved"
    assert rows_below(client, floor) == (0, 0), f"(claim rows, range rows) left below the floor (range {floor})"
    assert store.table.scan(keys.claims, past(keys.claims), filter=KEYS_ONLY), "(those of the range at the tail stay)"


def test_a_subscription_from_before_the_clearing_mark_keeps_its_counts_and_clears_on(client: MessagingClient) -> None:
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=3.0, claim_size=2)
    store, keys = state(client)

    def consume(total: int, beyond: int) -> Floor:
        """Publish and acknowledge ``total`` messages (rows of 4), then reap until the floor passed range
        ``beyond`` and the ranges below it are cleared (the range at the tail, not read to its end, stays)."""
        for _ in range(total // 4):
            client.publish(T, [b"m"] * 4)
        with client.shared_consumer(T, "work", reap_interval=0.1) as consumer:
            done, until = 0, time.monotonic() + 120
            while done < total or not beyond < (floor := store.floor(keys)).cleared.deleted == floor.value:
                assert time.monotonic() < until, f"{done} acknowledged, floor row {store.floor(keys)}"
                got = consumer.receive(10, 0.2)
                consumer.ack(*got)
                done += len(got)
        return floor

    first = consume(40, beyond=1)
    assert 0 < first.cleared.acked < 40
    # as a subscription from before the mark has it: the counts of what its raises cleared in the counter
    store.table.increment(keys.counter, ACKED_COLUMN, first.cleared.acked)
    store.table.delete_cells(keys.floor, [CLEARED_COLUMN])
    assert store.floor(keys).mark is None and numbers(client).acknowledged == 40
    second = consume(40, beyond=first.value)
    assert numbers(client).acknowledged == 80
    assert second.cleared.deleted == second.value and second.cleared.acked > 0  # a mark from its first raise on
    assert rows_below(client, second.value) == (0, 0)


def numbers(client: MessagingClient) -> SharedStats:
    found = client.get_subscription(T, "work").shared
    assert found is not None
    return found


def state(client: MessagingClient) -> tuple[SharedStore, Keys]:
    """The store of the subscription "work" and its keys."""
    store = SharedStore(client.installation.table("subscriptions"))
    key = row_key(T, client.get_topic(T).generation, "work")
    found = store.settings(key)
    assert found is not None
    return store, Keys(key, found[1].incarnation)


def rows_below(client: MessagingClient, floor: int) -> tuple[int, int]:
    """How many claim rows and range rows are left below range ``floor``."""
    store, keys = state(client)
    found = store.settings(keys.subscription)
    assert found is not None
    below = bytes(MessageId(client.get_topic(T).generation, found[1].first_position(floor), 0))
    claims = store.table.scan(keys.claims, keys.claim(below), filter=KEYS_ONLY)
    ranges = store.table.scan(keys.ranges, keys.range(floor), filter=KEYS_ONLY)
    return len(claims), len(ranges)
