"""The publish and fetch protocol (docs/ordering.md) over the memory storage port: the append race with
lost answers, gap rescans, seeks over swept gaps and rollback. The same behaviours run against the real
HBase in tests/integration (test_messaging, test_crash, test_topic_concurrency)."""

from __future__ import annotations

import pytest

from tms_hbase.errors import HBaseUnavailable, InvalidArgument, PublishOutcomeUnknown
from tms_hbase.fetch.reader import MessageReader
from tms_hbase.installation.metadata import MetadataCache, MetadataStore
from tms_hbase.installation.settings import InstallationStore, WriterSettings
from tms_hbase.model.retry import Retry
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, message_key, peek
from tms_hbase.model.topic import TopicId
from tms_hbase.publish.writer import MessageWriter
from tms_hbase.runtime import green
from tms_hbase.tx import NO_TX_IN_PROGRESS, Transaction, write_pointer_now

from ..memory_storage import LOSE_ANSWER, MemoryInstallation

# also through the asyncio bridge, in debug mode (tests/unit/conftest.py)
pytestmark = pytest.mark.usefixtures("runner")

T = TopicId("ns", "t")
FAST = Retry(attempts=3, backoff_seconds=0)


class World:
    """One memory installation with a topic, writers and a reader on it."""

    def __init__(self) -> None:
        self.inst = MemoryInstallation()
        store = MetadataStore(self.inst.metadata)
        store.create(T, {"ttl": "3600", "ordering": "chain"})  # the chain's append protocol
        self.topics = MetadataCache(store, max_age=60)
        self.reader = MessageReader(self.inst.messages, self.inst.payloads, self.topics)

    def writer(self) -> MessageWriter:
        settings = WriterSettings(InstallationStore(self.inst.metadata))
        return MessageWriter(self.inst.messages, self.inst.payloads, self.topics, settings, retry=FAST)

    def fetch(self, **kwargs) -> list[bytes]:
        return [m.payload for m in self.reader.fetch(T, **kwargs)]

    def rows(self) -> list[BatchRow]:
        return [BatchRow.decode(v[MESSAGE_COLUMN]) for _, v in self.inst.messages.scan()]


def test_each_scenario_runs_on_a_thread_and_through_the_asyncio_bridge(runner: str) -> None:
    assert green.bridged() == (runner == "bridge")
    assert type(green.lock()).__name__ == ("GreenLock" if runner == "bridge" else "lock")


def down(*_: object) -> None:
    raise HBaseUnavailable("link cut before the put reached HBase")


def test_a_landed_append_whose_answer_was_lost_is_recognised_not_stored_twice() -> None:
    w = World()
    writer = w.writer()
    w.inst.messages.inject("compare_and_set", lambda *_: LOSE_ANSWER)
    writer.publish(T, [b"once"])
    assert w.fetch() == [b"once"] and len(w.rows()) == 1


def test_a_lost_append_whose_position_another_writer_took_moves_on() -> None:
    w = World()
    mine, other = w.writer(), w.writer()
    mine.publish(T, [b"a"])

    def other_takes_it(*_: object) -> None:
        other.publish(T, [b"b"])  # lands at position 2 while our put is lost on the way
        raise HBaseUnavailable("link cut")

    w.inst.messages.inject("compare_and_set", other_takes_it)
    mine.publish(T, [b"c"])
    assert w.fetch() == [b"a", b"b", b"c"]
    times = [r.publish_time for r in w.rows()]
    assert times == sorted(times)


def test_answers_lost_past_the_retry_policy_leave_a_resume_that_publishes_exactly_once() -> None:
    for last_one_landed in (False, True):
        w = World()
        writer = w.writer()
        w.inst.messages.inject("compare_and_set", down, times=2)
        w.inst.messages.inject("compare_and_set", (lambda *_: LOSE_ANSWER) if last_one_landed else down)
        with pytest.raises(PublishOutcomeUnknown) as lost:
            writer.publish(T, [b"x", b"y"])
        assert len(w.rows()) == (1 if last_one_landed else 0)
        writer.publish(T, [b"x", b"y"], resume=lost.value.resume)
        assert w.fetch() == [b"x", b"y"], last_one_landed


def test_the_loser_of_a_race_walks_forward_and_never_goes_back_in_time() -> None:
    w = World()
    first, second = w.writer(), w.writer()
    first.publish(T, [b"1"])
    second.publish(T, [b"2"])  # reads the tail: position 2
    first.publish(T, [b"3"])  # its remembered tail says 1: loses at 2, goes on to 3
    first.publish(T, [b"4"])
    assert w.fetch() == [b"1", b"2", b"3", b"4"]
    times = [r.publish_time for r in w.rows()]
    assert times == sorted(times)


def test_rows_a_scan_raced_past_are_read_again_not_skipped() -> None:
    w = World()
    writer = w.writer()
    for i in range(5):
        writer.publish(T, [b"m%d" % i])
    w.inst.messages.hide_once(message_key(T, 1, 3))  # a region-crossing scan that missed row 3
    assert w.fetch() == [b"m0", b"m1", b"m2", b"m3", b"m4"]


def test_swept_rows_in_the_middle_are_stepped_over() -> None:
    w = World()
    writer = w.writer()
    for i in range(6):
        writer.publish(T, [b"m%d" % i])
    for position in (2, 3, 4):
        w.inst.messages.delete_row(message_key(T, 1, position))
    assert w.fetch() == [b"m0", b"m4", b"m5"]
    assert w.fetch(limit=2) == [b"m0", b"m4"]


def test_time_seek_steps_over_swept_gaps_in_log_reads() -> None:
    w = World()
    for position in range(1, 1025):  # publish times 1000, 1010, ... (a row every 10 ms)
        row = BatchRow(1000 + 10 * position, b"w" * 16, position, (b"p%d" % position,))
        w.inst.messages.put(message_key(T, 1, position), {MESSAGE_COLUMN: row.encode()})
    for position in range(300, 700):  # swept
        w.inst.messages.delete_row(message_key(T, 1, position))
    before = w.inst.messages.calls
    assert w.reader.seek(T, 1, 1000 + 10 * 500) == 700  # inside the gap: the first row after it
    assert w.inst.messages.calls - before <= 2 * 11 + 3
    assert w.reader.seek(T, 1, 1000 + 10 * 200) == 200
    assert w.reader.seek(T, 1, 1000 + 10 * 299 + 1) == 700
    assert w.reader.seek(T, 1, 0) == 1 and w.reader.seek(T, 1, 10**12) == 1025


def test_rollback_hides_the_batch_from_transactions_and_is_idempotent() -> None:
    w = World()
    writer = w.writer()
    base = write_pointer_now()
    writer.publish(T, [b"before"])
    detail = writer.publish(T, [b"doomed"], tx_write_pointer=base + 50).result.rollback
    writer.publish(T, [b"after"])
    reader_tx = Transaction(base + 100, base + 101, [], [], NO_TX_IN_PROGRESS)
    assert w.fetch(transaction=reader_tx) == [b"before", b"doomed", b"after"]
    writer.rollback(T, detail)
    writer.rollback(T, detail)  # a retry finds it rolled back already
    assert w.fetch(transaction=reader_tx) == [b"before", b"after"]
    assert w.fetch() == [b"before", b"doomed", b"after"]  # non-transactional reads see every row


def test_rollback_racing_the_sweeper_settles_on_the_rolled_back_row() -> None:
    w = World()
    writer = w.writer()
    wp = write_pointer_now()
    detail = writer.publish(T, [b"x"], tx_write_pointer=wp).result.rollback
    key = message_key(T, 1, detail.start_position)

    def sweeper_marks_it_invalid_first(*_: object) -> None:
        value = w.inst.messages.get_cell(key, MESSAGE_COLUMN)
        w.inst.messages.put(
            key, {MESSAGE_COLUMN: value.replace(wp.to_bytes(8, "big"), (-wp).to_bytes(8, "big", signed=True))}
        )

    w.inst.messages.inject("compare_and_set", sweeper_marks_it_invalid_first)
    writer.rollback(T, detail)
    assert peek(w.inst.messages.get_cell(key, MESSAGE_COLUMN)).tx_pointer == -wp


def test_rollback_of_a_swept_row_does_nothing_and_a_foreign_handle_is_refused() -> None:
    w = World()
    writer = w.writer()
    wp = write_pointer_now()
    detail = writer.publish(T, [b"x"], tx_write_pointer=wp).result.rollback
    other = writer.publish(T, [b"y"], tx_write_pointer=wp + 1).result.rollback
    forged = type(other)(other.topic, wp + 2, other.generation, other.start_position, other.end_position)
    with pytest.raises(InvalidArgument, match="does not match"):
        writer.rollback(T, forged)
    w.inst.messages.delete_row(message_key(T, 1, detail.start_position))
    writer.rollback(T, detail)
    assert w.fetch() == [b"y"]


def test_a_transaction_stops_at_a_batch_it_cannot_see_yet() -> None:
    w = World()
    writer = w.writer()
    base = write_pointer_now()
    writer.publish(T, [b"plain"])
    writer.publish(T, [b"committed"], tx_write_pointer=base + 10)
    writer.publish(T, [b"in progress"], tx_write_pointer=base + 20)
    writer.publish(T, [b"later"])
    reader_tx = Transaction(base + 30, base + 31, [], [base + 20], base + 20)
    assert w.fetch(transaction=reader_tx) == [b"plain", b"committed"]  # stops, keeps the order
