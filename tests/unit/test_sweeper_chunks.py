"""The sweeper's chunk, region, checkpoint and lease logic over the memory storage port (the same
behaviours run against the real HBase in tests/integration/test_sweeper*.py)."""

from __future__ import annotations

import uuid

import pytest

from tms_hbase.errors import HBaseUnavailable
from tms_hbase.installation.metadata import MetadataStore
from tms_hbase.installation.settings import InstallationStore
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, message_key
from tms_hbase.model.topic import TopicId
from tms_hbase.sweep.state import SweepState
from tms_hbase.txserver.state_store import StateStore
from tms_hbase_sweeper.sweep import Sweeper

from ..memory_storage import MemoryInstallation

NOW = 10**12  # a fixed clock: ms
T = TopicId("ns", "expiring")
U = TopicId("ns", "fresh")
WRITER = uuid.uuid4().bytes


def installation() -> MemoryInstallation:
    inst = MemoryInstallation(clock=lambda: NOW)
    metadata = MetadataStore(inst.metadata)
    metadata.create(T, {"ttl": "1", "ordering": "chain"})  # rows at dense positions, the chain's sweeper rules
    metadata.create(U, {"ttl": "3600", "ordering": "chain"})
    InstallationStore(inst.metadata).set_tail_cache(1, now=lambda: NOW)  # writers trust a tail 1 s: grace >= 4 s
    return inst


def publish(
    inst: MemoryInstallation, topic: TopicId, positions: range, publish_time: int, tx: int | None = None
) -> None:
    for p in positions:
        row = BatchRow(publish_time, WRITER, p, (b"payload %d" % p,), tx_pointer=tx)
        inst.messages.put(message_key(topic, 1, p), {MESSAGE_COLUMN: row.encode()})


def positions(inst: MemoryInstallation, topic: TopicId) -> list[int]:
    prefix = message_key(topic, 1, 0)[:-8]
    return [int.from_bytes(k[-8:], "big") for k in inst.messages.row_keys() if k.startswith(prefix)]


def sweeper(inst: MemoryInstallation, **options) -> Sweeper:
    refresh = {"metadata_refresh_seconds": 0, "snapshot_refresh_seconds": 0}
    return Sweeper(inst, grace_seconds=4, clock=lambda: NOW, **refresh, **options)


EXPIRED = NOW - 60_000  # a minute ago, with a TTL of 1 s and a grace of 4 s


def test_the_newest_row_is_kept_when_it_ends_a_chunk() -> None:
    inst = installation()
    publish(inst, T, range(1, 7), EXPIRED)  # chunks of 3: [1 2 3] [4 5 6] [U1 U2]
    publish(inst, U, range(1, 3), NOW)
    report = sweeper(inst, chunk_rows=3).sweep_once()
    assert positions(inst, T) == [6] and positions(inst, U) == [1, 2]
    assert (report.messages_dropped, report.messages_stripped) == (5, 1)
    stripped = BatchRow.decode(inst.messages.get_cell(message_key(T, 1, 6), MESSAGE_COLUMN))
    assert stripped.payloads == () and stripped.publish_time == EXPIRED  # the position stays taken


def test_the_last_row_of_a_region_is_not_taken_for_the_newest_when_the_next_region_goes_on() -> None:
    inst = installation()
    publish(inst, T, range(1, 6), EXPIRED)
    inst.messages.split_keys = [message_key(T, 1, 4)]  # region 1: T1..T3, region 2: T4, T5
    report = sweeper(inst, chunk_rows=10).sweep_once()
    assert positions(inst, T) == [5]
    assert report.regions_swept == 3  # two message regions and the payload table


def test_a_stopped_sweep_resumes_from_its_checkpoint() -> None:
    inst = installation()
    publish(inst, T, range(1, 10), EXPIRED)
    first = sweeper(inst, chunk_rows=3)
    scans = []

    def stop_on_second_scan(*_: object) -> None:
        scans.append(1)
        if len(scans) == 2:  # reading ahead for the second chunk: stop after the first
            first.stop()

    inst.messages.inject("scan", stop_on_second_scan, times=2)
    report = first.sweep_once()
    assert report.stopped and report.messages_dropped == 3
    (region,) = inst.messages.regions()
    record = SweepState(inst.txstate).record(region)
    assert record.checkpoint == message_key(T, 1, 3).hex() and record.completed is None
    assert positions(inst, T) == [4, 5, 6, 7, 8, 9]

    again = sweeper(inst, chunk_rows=3).sweep_once()
    assert again.regions_resumed == 1 and not again.stopped
    assert positions(inst, T) == [9]
    record = SweepState(inst.txstate).record(region)
    assert record.checkpoint is None and record.completed == NOW


def test_the_checkpoint_never_runs_ahead_of_the_deletes() -> None:
    inst = installation()
    publish(inst, T, range(1, 10), EXPIRED)
    calls = []

    def fail_second_delete(*_: object) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise HBaseUnavailable("down while deleting chunk 2")

    inst.messages.inject("delete_many", fail_second_delete, times=2)
    with pytest.raises(HBaseUnavailable):
        sweeper(inst, chunk_rows=3, owner="me").sweep_once()
    (region,) = inst.messages.regions()
    assert SweepState(inst.txstate).record(region).checkpoint == message_key(T, 1, 3).hex()
    assert positions(inst, T)[:3] == [4, 5, 6]  # chunk 2 is still there (chunk 3's deletes were under way)
    # the failed sweep still holds its lease: the same sweeper (the daemon's next round) takes it up again
    assert sweeper(inst, chunk_rows=3, owner="other").sweep_once().regions_skipped == 1
    assert sweeper(inst, chunk_rows=3, owner="me").sweep_once().regions_resumed == 1
    assert positions(inst, T) == [9]


def test_a_region_leased_by_another_sweeper_is_skipped() -> None:
    inst = installation()
    publish(inst, T, range(1, 4), EXPIRED)
    (region,) = inst.messages.regions()
    assert SweepState(inst.txstate).acquire(region, "other", 60, NOW) is not None
    report = sweeper(inst, owner="me").sweep_once()
    assert report.regions_skipped == 1 and positions(inst, T) == [1, 2, 3]


def test_a_lease_taken_before_a_split_covers_both_daughters() -> None:
    inst = installation()
    publish(inst, T, range(1, 7), EXPIRED)
    (parent,) = inst.messages.regions()
    state = SweepState(inst.txstate)
    assert state.acquire(parent, "other", 60, NOW) is not None  # "other" sweeps the parent's range to its end
    inst.messages.split_keys.append(message_key(T, 1, 4))
    lower, upper = inst.messages.regions()
    assert upper.start == message_key(T, 1, 4) and state.acquire(upper, "me", 60, NOW) is None
    report = sweeper(inst, owner="me").sweep_once()
    assert report.regions_skipped == 2 and positions(inst, T) == [1, 2, 3, 4, 5, 6]
    # a lease taken after the split covers its own daughter only, and an expired one nothing
    assert state.acquire(lower, "other", 60, NOW + 61_000) is not None
    assert state.acquire(upper, "me", 60, NOW + 61_000) is not None


def test_an_invalid_pointer_is_marked_unless_a_rollback_got_there_first() -> None:
    inst = installation()
    store = StateStore(inst.txstate)
    manager = store.recover()
    manager.initialize(NOW)
    doomed = manager.start_long(NOW)
    manager.invalidate(doomed.tx_id)
    store.append(manager.drain_edits())
    x = doomed.write_pointer
    publish(inst, U, range(1, 3), NOW, tx=x)

    def rollback_first(key: bytes, column: bytes, expected: bytes, value: bytes) -> None:
        inst.messages.put(key, {column: value[:-1] + b"!"})  # someone else rewrote the row meanwhile

    inst.messages.inject("compare_and_set", rollback_first)
    report = sweeper(inst).sweep_once()
    assert (report.invalid_transactions, report.messages_invalidated) == (1, 2)
    first, second = (inst.messages.get_cell(message_key(U, 1, p), MESSAGE_COLUMN) for p in (1, 2))
    assert first.endswith(b"!")  # the concurrent change won; the next sweep looks again
    assert BatchRow.decode(second).tx_pointer == -x
