"""Sequencer generations (docs/ordering.md) over the memory storage port: the layouts, offsets as keys,
lost answers, the window, holes waited on and filled, and one increment for many threads' publishes.
The same protocol runs against the real HBase in tests/integration/test_sequencer.py."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from tms_hbase.errors import HBaseError, HBaseUnavailable, InvalidArgument, PublishOutcomeUnknown
from tms_hbase.fetch.reader import MessageReader
from tms_hbase.installation.metadata import MetadataCache, MetadataStore
from tms_hbase.installation.settings import InstallationStore, WriterSettings
from tms_hbase.model.clock import now_ms
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.retry import Retry
from tms_hbase.model.rows import (
    MESSAGE_COLUMN,
    SEQUENCE_COLUMN,
    BatchRow,
    counter_key,
    generation_prefix,
    message_key,
    peek,
    skip_marker,
)
from tms_hbase.model.topic import TopicId, TopicMetadata
from tms_hbase.ordering import reservations as reservations_module
from tms_hbase.ordering import sequencer, sequencer_appends
from tms_hbase.ordering.reservations import (
    BLOCK_SECONDS,
    IDLE_SECONDS,
    MAX_BLOCK_OFFSETS,
    Block,
    Reservations,
    Ticket,
)
from tms_hbase.publish.writer import MessageWriter
from tms_hbase.storage.connection import Operation

from ..memory_storage import LOSE_ANSWER, MemoryInstallation
from ..waiting import wait_for

# also through the asyncio bridge, in debug mode (tests/unit/conftest.py)
pytestmark = pytest.mark.usefixtures("runner")

T = TopicId("ns", "t")
FAST = Retry(attempts=3, backoff_seconds=0)
CACHE = 0.2  # tail-cache seconds for the reader: W = 0.1 s, H = 0.2 s


class World:
    def __init__(self) -> None:
        self.inst = MemoryInstallation()
        self.store = MetadataStore(self.inst.metadata)
        self.store.create(T, {"ttl": "3600", "ordering": "sequencer"})
        self.topics = MetadataCache(self.store, max_age=60)
        self.reader = MessageReader(self.inst.messages, self.inst.payloads, self.topics, lambda: CACHE)

    def writer(self) -> MessageWriter:
        settings = WriterSettings(InstallationStore(self.inst.metadata))
        return MessageWriter(self.inst.messages, self.inst.payloads, self.topics, settings, retry=FAST)

    def fetch(self, **kwargs) -> list[bytes]:
        return [m.payload for m in self.reader.fetch(T, **kwargs)]

    def rows(self) -> dict[int, BatchRow]:
        prefix = generation_prefix(T, 1)
        return {
            int.from_bytes(k[-8:], "big"): BatchRow.decode(v[MESSAGE_COLUMN])
            for k, v in self.inst.messages.scan()
            if k.startswith(prefix) and len(k) == len(prefix) + 8
        }


def test_layouts_counter_row_sorts_before_position_one_and_skip_markers_carry_a_span() -> None:
    assert counter_key(T, 1) < message_key(T, 1, 0) < message_key(T, 1, 1)
    marker = peek(skip_marker(1234, 7))
    assert marker.skip and marker.span == 7 and marker.publish_time == 1234 and not marker.has_payloads
    assert marker.next_position(10) == 17
    row = BatchRow(5, b"w" * 16, 3, (b"a", b"b"), span=2)
    assert BatchRow.decode(row.encode()) == row and peek(row.encode()).next_position(4) == 6
    assert peek(BatchRow(5, b"w" * 16, 3, (b"a",)).encode()).next_position(4) == 5  # a chain row: one position


def test_the_ordering_is_fixed_for_a_generation_and_checked() -> None:
    w = World()
    with pytest.raises(InvalidArgument, match="fixed"):
        w.store.update(T, {"ordering": "chain"})
    assert w.store.update(T, {"ttl": "60"}).sequencer  # an update without it keeps it
    with pytest.raises(InvalidArgument, match="ordering"):
        w.store.create(TopicId("ns", "bad"), {"ordering": "lanes"})
    created = w.store.create(TopicId("ns", "new"))
    assert created.sequencer and created.properties["ordering"] == "sequencer"  # the default, stored
    assert not w.store.create(TopicId("ns", "chain"), {"ordering": "chain"}).sequencer
    old = TopicMetadata(TopicId("ns", "old"), {"generation": "1", "ttl": "60"})  # created before the default
    assert not old.sequencer and old.ordering == "chain"  # absent: a chain


def test_rows_are_keyed_by_their_first_message_offset_and_the_counter_is_the_end_offset() -> None:
    w = World()
    writer = w.writer()
    writer.publish(T, [b"a", b"b", b"c"])
    writer.publish(T, [b"d"])
    writer.publish(T, [b"e", b"f"])
    writer.close()  # a busy writer's unused block is released as one skip marker over its remainder
    rows = w.rows()
    keys = sorted(rows)
    assert [p + rows[p].span for p in keys[:-1]] == keys[1:]  # dense: each row starts where the last ended
    assert keys[-1] + rows[keys[-1]].span - 1 == sequencer.end_offset(w.inst.messages, T, 1)
    batches = [p for p in keys if not rows[p].skip]
    assert batches[:2] == [1, 4] and [rows[p].span for p in batches] == [3, 1, 2]
    assert w.fetch() == [b"a", b"b", b"c", b"d", b"e", b"f"]
    ids = [MessageId.decode(m.id) for m in w.reader.fetch(T)]
    third = batches[2]
    assert [(i.position, i.index) for i in ids] == [(1, 0), (1, 1), (1, 2), (4, 0), (third, 0), (third, 1)]
    after = list(w.reader.fetch(T, start_message=bytes(ids[2]), inclusive=False))
    assert [m.payload for m in after] == [b"d", b"e", b"f"]
    assert w.reader.tail(T, 1) == max(w.rows())  # the counter row is never the tail


def test_a_landed_put_whose_answer_was_lost_is_recognised_not_stored_twice() -> None:
    w = World()
    w.inst.messages.inject("compare_and_set", lambda *_: LOSE_ANSWER)
    w.writer().publish(T, [b"once"])
    assert w.fetch() == [b"once"] and len(w.rows()) == 1


def test_answers_lost_past_the_retry_policy_leave_a_resume_that_publishes_exactly_once() -> None:
    for last_one_landed in (False, True):
        w = World()
        writer = w.writer()

        def down(*_: object) -> None:
            raise HBaseUnavailable("link cut before the put reached HBase")

        w.inst.messages.inject("compare_and_set", down, times=2)
        w.inst.messages.inject("compare_and_set", (lambda *_: LOSE_ANSWER) if last_one_landed else down)
        with pytest.raises(PublishOutcomeUnknown) as lost:
            writer.publish(T, [b"x", b"y"])
        settling = now_ms()
        writer.publish(T, [b"x", b"y"], resume=lost.value.resume)
        # the offset the lost attempt aimed at is filled with a marker dated when it was filled, not 0: a time
        # seek's binary search takes a row dated before T as proof that everything before it is, too
        settled = [row for row in w.rows().values() if row.skip and row.writer_id == writer.writer_id]
        assert all(row.publish_time >= settling for row in settled) and len(settled) == (not last_one_landed)
        w.writer().publish(T, [b"z"])
        for _ in range(2):  # the first attempt's second offset (if it was not written) is a hole to fill
            time.sleep(CACHE)
            got = w.fetch()
        assert got == [b"x", b"y", b"z"], last_one_landed


def test_a_lost_increment_leaves_a_hole_that_readers_fill_and_the_writer_reserves_again() -> None:
    w = World()
    w.inst.messages.inject("increment", lambda *_: LOSE_ANSWER)
    w.writer().publish(T, [b"a"])
    assert sorted(w.rows()) == [2]
    assert w.fetch() == []  # the hole at 1 is below a row: not passed
    time.sleep(CACHE)
    assert w.fetch() == [b"a"] and w.rows()[1].skip and w.reader.sequencer.holes_filled == 1


def test_a_reader_does_not_pass_a_hole_before_h_and_fills_it_after() -> None:
    w = World()
    slow = sequencer.reserve(w.inst.messages, T, 1, 2)  # a writer that reserved two offsets, then died
    w.writer().publish(T, [b"after"])
    assert w.fetch() == []
    began = time.monotonic()
    got = wait_for(w.fetch, "the reader to fill the hole after H", 60, interval=0.02)
    assert got == [b"after"] and time.monotonic() - began >= CACHE * 0.9
    rows = w.rows()
    assert rows[slow].skip and rows[slow + 1].skip and rows[slow].span == 1  # one offset at a time


def test_a_reader_fills_a_dead_block_with_one_call_per_offset() -> None:
    w = World()
    dead = sequencer.reserve(w.inst.messages, T, 1, 200)  # a writer reserved a block of 200, then was killed
    w.writer().publish(T, [b"after"])
    assert w.fetch() == []  # the block is a hole below a row: not passed before H
    time.sleep(CACHE)
    before = w.inst.messages.calls
    assert w.fetch() == [b"after"]
    calls = w.inst.messages.calls - before
    rows = w.rows()
    assert all(rows[p].skip and rows[p].span == 1 for p in range(dead, dead + 200))  # each offset if-absent
    assert calls <= 200 + 10, calls  # one if-absent put per offset, not a scan, a get and a read as well


def test_a_run_of_holes_is_filled_around_a_slow_writers_batch_that_landed_in_it() -> None:
    w = World()
    writer = w.writer()
    writer.publish(T, [b"before"])
    dead = sequencer.reserve(w.inst.messages, T, 1, 5)  # offsets reserved by a writer that is slow, then killed
    writer.publish(T, [b"after"])
    assert w.fetch() == [b"before"]  # the hole holds the reader
    row = BatchRow(now_ms(), b"s" * 16, 1, (b"slow", b"batch"), span=2)
    assert w.inst.messages.put_if_absent(message_key(T, 1, dead + 2), MESSAGE_COLUMN, row.encode())  # lands late
    deadline = time.monotonic() + 10
    while (got := w.fetch()) != [b"before", b"slow", b"batch", b"after"]:
        assert time.monotonic() < deadline, got
        time.sleep(0.02)
    rows = w.rows()
    assert [p for p in range(dead, dead + 5) if p in rows and rows[p].skip] == [dead, dead + 1, dead + 4]
    writer.close()


def test_a_slow_writer_whose_offset_was_filled_reserves_again_and_a_late_one_fills_its_own() -> None:
    w = World()
    writer, reader_fill = w.writer(), {}

    def filled_first(key: bytes, column: bytes, expected: object, value: bytes) -> None:
        if not peek(value).skip and not reader_fill:  # a reader fills the writer's offset first
            reader_fill["at"] = key
            w.inst.messages.compare_and_set(key, column, None, skip_marker(0, 1))

    w.inst.messages.inject("compare_and_set", filled_first)
    writer.publish(T, [b"a"])
    assert sorted(w.rows()) == [1, 2] and w.rows()[1].skip and w.fetch() == [b"a"]

    real = writer.settings.tail_cache_seconds
    writer.settings.tail_cache_seconds = lambda: 0.0  # W = 0: every reservation is already too late
    with pytest.raises(HBaseUnavailable):
        writer.publish(T, [b"b"])  # never put, nothing stored (and never two copies)
    writer.settings.tail_cache_seconds = real
    assert all(row.skip for position, row in w.rows().items() if position > 2)


def test_writes_too_late_for_w_are_retried_while_the_operation_has_time_then_time_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A race lost against W is this process being too slow (starved under load), not HBase failing: the
    publish reserves again while its operation's deadline allows, past the retry policy's 3 attempts, and
    stores the batch once, after the earlier ones; once the deadline has passed it fails with a clear
    timed-out error, nothing stored (at load 20 the asyncio client failed after 3 lost races)."""
    w = World()
    writer = w.writer()  # retry: 3 attempts
    writer.publish(T, [b"before"])
    limit = sequencer.window(writer.settings.tail_cache_seconds())
    skew, starved = [0.0], [0]
    clock = SimpleNamespace(monotonic=lambda: time.monotonic() + skew[0])  # the writer's, moved on when it starves
    monkeypatch.setattr(sequencer_appends, "time", clock)
    monkeypatch.setattr(reservations_module, "time", clock)
    reservations = writer.sequencer.reservations
    take = reservations.take

    def starving(topic: TopicId, generation: int, ticket: Ticket) -> None:
        take(topic, generation, ticket)
        if starved[0]:
            starved[0] -= 1
            skew[0] += limit + 0.01  # the process starves between reserving and writing: too late for W

    monkeypatch.setattr(reservations, "take", starving)
    starved[0] = 5
    with Operation(3600, None):
        writer.publish(T, [b"late"])
    assert starved[0] == 0 and w.fetch() == [b"before", b"late"]
    starved[0] = 10**6
    with pytest.raises(HBaseUnavailable) as failed, Operation(10 * limit, None):
        writer.publish(T, [b"never"])
    assert failed.value.timed_out and "too slow" in str(failed.value)
    starved[0] = 0
    writer.publish(T, [b"after"])
    writer.close()
    assert w.fetch() == [b"before", b"late", b"after"]
    _dense(w)


@pytest.mark.threads_only
def test_threads_of_one_writer_share_increments_and_every_publish_lands_once() -> None:
    w = World()
    writer = w.writer()
    calls = {"increments": 0}
    original = w.inst.messages.increment

    def counting(key: bytes, column: bytes, amount: int = 1) -> int:
        calls["increments"] += 1
        time.sleep(0.002)  # an increment takes a round trip: others queue meanwhile
        return original(key, column, amount)

    w.inst.messages.increment = counting  # type: ignore[method-assign]

    def publish(n: int) -> None:
        for i in range(25):
            writer.publish(T, [b"%d-%d" % (n, i), b"x"])

    threads = [threading.Thread(target=publish, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    deadline = time.monotonic() + 10
    while len(got := w.fetch()) < 400 and time.monotonic() < deadline:  # until the last spare is released
        time.sleep(0.01)
    assert len(got) == 400 and len(set(got) - {b"x"}) == 200
    assert calls["increments"] < 200
    assert sequencer.end_offset(w.inst.messages, T, 1) >= 400
    assert w.inst.messages.get_cell(counter_key(T, 1), SEQUENCE_COLUMN) is not None


def test_a_time_seek_starts_no_later_than_asked_within_d() -> None:
    w = World()
    writer = w.writer()
    for i in range(20):
        writer.publish(T, [b"%d" % i])
        time.sleep(0.002)
    times = [m.publish_time for m in w.reader.fetch(T)]
    t = times[10]
    got = list(w.reader.fetch(T, start_time=t))
    assert [m.publish_time for m in got][-10:] == times[10:]  # nothing at or after t is missed
    assert all(m.publish_time >= t - w.reader.sequencer.disorder_ms() for m in got)


def test_a_range_read_cut_inside_a_span_starts_after_it_and_waits_on_a_hole_below_its_end() -> None:
    w = World()  # a fresh writer for each publish: no spare reserved ahead
    w.writer().publish(T, [b"a", b"b", b"c"])
    w.writer().publish(T, [b"d"])
    assert [m.payload for m in w.reader.fetch_range(T, MessageId(1, 2, 0))] == [b"d"]  # 1..3 is one row
    hole = sequencer.reserve(w.inst.messages, T, 1, 1)
    w.writer().publish(T, [b"e"])
    began = time.monotonic()
    got = [m.payload for m in w.reader.fetch_range(T, MessageId(1, 4, 0), MessageId(1, hole + 2, 0))]
    assert got == [b"d", b"e"] and time.monotonic() - began >= CACHE * 0.9  # it waited, then filled
    assert w.rows()[hole].skip


def _skips(w: World) -> list[tuple[int, int, bytes]]:
    """The skip markers of the topic: (offset, span, who wrote it)."""
    return [(p, row.span, row.writer_id) for p, row in sorted(w.rows().items()) if row.skip]


def _dense(w: World) -> None:
    """Every offset handed out holds exactly one row (batch or skip marker): no hole, no overlap."""
    rows = w.rows()
    keys = sorted(rows)
    assert keys[0] == 1 and [p + rows[p].span for p in keys[:-1]] == keys[1:]
    assert keys[-1] + rows[keys[-1]].span - 1 == sequencer.end_offset(w.inst.messages, T, 1)


def _busy_block(res: Reservations) -> list[Ticket]:
    """Two publishes back to back: the second reserves a block ahead (its rate is far above 1/BLOCK_SECONDS)."""
    tickets = []
    for _ in range(2):
        tickets.append(Ticket(1))
        res.take(T, 1, tickets[-1])
        res.published(tickets[-1])
    return tickets


def test_a_busy_writer_carves_its_publishes_off_one_block_and_gives_the_rest_back_on_close() -> None:
    w = World()
    writer = w.writer()
    calls = {"increments": 0}
    original = w.inst.messages.increment

    def counting(key: bytes, column: bytes, amount: int = 1) -> int:
        calls["increments"] += 1
        return original(key, column, amount)

    w.inst.messages.increment = counting  # type: ignore[method-assign]
    for i in range(50):
        writer.publish(T, [b"%d" % i, b"x"])
    writer.close()
    # one increment per block, not per publish
    assert writer.sequencer.reservations.carved > 0 and calls["increments"] < 10
    _dense(w)
    rows = w.rows()
    last = max(rows)
    assert not rows[last].skip and sequencer.end_offset(w.inst.messages, T, 1) == last + 1  # the rest went back
    assert writer.sequencer.reservations.given_back >= 1 and len(w.fetch()) == 100


def test_a_block_another_writer_reserved_after_is_filled_with_one_marker_that_the_skip_index_counts() -> None:
    w = World()
    writer = w.writer()
    for i in range(10):
        writer.publish(T, [b"%d" % i])
    other = sequencer.reserve(w.inst.messages, T, 1, 1)  # another writer, after the block
    w.inst.messages.put_if_absent(message_key(T, 1, other), MESSAGE_COLUMN, skip_marker(0, 1, b"o" * 16))
    writer.close()
    (marker,) = [s for s in _skips(w) if s[2] == writer.writer_id]
    assert marker == (11, other - 11, writer.writer_id)  # the rest of the block: ONE marker, exact span
    assert sequencer.skipped(w.inst.messages, T, 1, 1, other) == other - 11
    assert sequencer.skipped(w.inst.messages, T, 1, 12, other + 1) == 0  # a range that starts inside it


def test_a_released_block_is_in_the_skip_index_before_its_marker_lands() -> None:
    """Counts take the offsets of a skip marker the index does not hold for messages: a stats call between
    a released block's marker and its index cell counted 150 offsets as messages with exact=True."""
    w = World()
    writer = w.writer()
    for i in range(10):
        writer.publish(T, [b"%d" % i])
    other = sequencer.reserve(w.inst.messages, T, 1, 1)  # another writer, after the block: no give-back
    indexed_when_put: dict[int, set[int]] = {}

    def look(key: bytes, column: bytes, expected: bytes | None, value: bytes) -> None:
        if column == MESSAGE_COLUMN and peek(value).skip:
            indexed_when_put[int.from_bytes(key[-8:], "big")] = sequencer.index_of(w.inst.messages, T, 1)

    w.inst.messages.inject("compare_and_set", look, times=10)
    writer.close()
    assert indexed_when_put == {11: {11}}
    assert sequencer.skipped(w.inst.messages, T, 1, 1, other) == other - 11


def test_the_rest_of_a_block_is_given_back_once_the_writer_is_idle() -> None:
    w = World()
    writer = w.writer()
    for i in range(10):
        writer.publish(T, [b"%d" % i])
    assert sequencer.end_offset(w.inst.messages, T, 1) > 10  # a block was reserved ahead
    deadline = time.monotonic() + 10  # no close: the idle timer gives it back
    while sequencer.end_offset(w.inst.messages, T, 1) != 10:
        assert time.monotonic() < deadline, "the block was not given back"
        time.sleep(0.005)
    assert _skips(w) == []
    _dense(w)
    assert w.fetch() == [b"%d" % i for i in range(10)]
    writer.close()


def test_a_block_too_old_to_carve_is_released_and_a_fresh_one_reserved() -> None:
    w = World()
    res = Reservations(w.inst.messages, b"w" * 16, lambda: 0.4)  # W = 0.4 s: a block is carved for 0.2 s
    first, second = _busy_block(res)
    blocked = sequencer.end_offset(w.inst.messages, T, 1)
    assert blocked > second.first  # offsets reserved ahead
    stalled = Ticket(1)
    res.take(T, 1, stalled)  # carved; its publish does not end, so the writer is not idle
    assert stalled.first == second.first + 1
    time.sleep(0.25)  # the block is now older than W/2
    late = Ticket(1)
    res.take(T, 1, late)
    # the rest went back to the counter first, so the fresh increment hands the same offsets out again
    assert late.first == stalled.first + 1 and late.started > first.started and res.given_back == 1
    assert _skips(w) == []
    res.close()


def test_a_paused_lone_writer_gives_back_its_block_and_the_block_ahead_together_once_the_block_is_too_old() -> None:
    """The block ahead is younger than the block, so it is not too old yet when the block is: a lone writer
    in a pause gives both back at once (released alone, the older one would become a skip marker, since the
    block ahead sits after it on the counter)."""
    w = World()
    res = Reservations(w.inst.messages, b"w" * 16, lambda: 0.4)  # W = 0.4 s: a block is carved for 0.2 s
    _busy_block(res)
    queue = res._queues[(T, 1)]
    assert queue.lone and queue.block is not None and queue.ahead is None
    now = time.monotonic()
    ahead = sequencer.reserve(w.inst.messages, T, 1, 8)  # as the keeper reserves it, after the block
    with queue.lock:
        queue.ahead = Block(ahead, 8, now_ms(), now, now + 0.2)
        queue.block = replace(queue.block, until=now - 0.001)  # the block is too old to carve, the ahead not
    res._release_idle()
    assert queue.block is None and queue.ahead is None
    assert sequencer.end_offset(w.inst.messages, T, 1) == 2 and _skips(w) == []  # both went back
    res.close()


def test_a_round_larger_than_the_rest_of_the_block_releases_it_and_takes_an_increment() -> None:
    w = World()
    res = Reservations(w.inst.messages, b"w" * 16, lambda: 10.0)
    _, second = _busy_block(res)
    blocked = sequencer.end_offset(w.inst.messages, T, 1)
    big = Ticket(blocked + 5)
    res.take(T, 1, big)
    assert big.first == second.first + 1  # the rest of the block went back, then one increment
    assert _skips(w) == [] and res.given_back == 1
    res.published(big)
    res.close()
    end = sequencer.end_offset(w.inst.messages, T, 1)
    assert end >= big.first + big.span - 1  # whatever the big round reserved ahead is released too
    assert _skips(w) == []


def test_a_writer_slower_than_the_block_budget_reserves_no_block_while_another_writer_publishes() -> None:
    w = World()
    taken = sequencer.reserve(w.inst.messages, T, 1, 1)  # someone reserved first: neither writer starts alone
    sequencer.fill(w.inst.messages, T, 1, taken, 1, now_ms())
    writers = [w.writer(), w.writer()]
    original = w.inst.messages.compare_and_set

    def slow_put(*args: object) -> bool:
        time.sleep(BLOCK_SECONDS * 2)  # busy, but a block would last more than BLOCK_SECONDS
        return original(*args)  # type: ignore[arg-type]

    w.inst.messages.compare_and_set = slow_put  # type: ignore[method-assign]
    for i in range(5):
        for writer in writers:  # each one's increments are interleaved with the other's: not alone
            writer.publish(T, [b"%d" % i])
    for writer in writers:
        writer.close()
    assert [writer.sequencer.reservations.carved for writer in writers] == [0, 0]
    assert _skips(w) == [(1, 1, bytes(16))] and len(w.fetch()) == 10
    assert sequencer.end_offset(w.inst.messages, T, 1) == 11


def test_a_lone_writer_keeps_its_block_through_pauses_and_a_writer_that_joins_is_read_after_it() -> None:
    """A writer alone on a generation that publishes one message now and then carves them off a block
    (no increment on the way), in order; a writer that joins is read once that block is too old."""
    w = World()
    writer = w.writer()
    increments = []
    original = w.inst.messages.increment

    def counting(key: bytes, column: bytes, amount: int = 1) -> int:
        increments.append(amount)
        return original(key, column, amount)

    w.inst.messages.increment = counting  # type: ignore[method-assign]
    for i in range(20):
        writer.publish(T, [b"%d" % i])
        time.sleep(IDLE_SECONDS * 2)  # a pause that makes a writer idle unless it is alone
    # mostly carved, not an increment each: a stall past a block's age under load costs one more increment
    assert writer.sequencer.reservations.carved >= 5 and len(increments) <= 15, increments
    expected = [b"%d" % i for i in range(20)]
    assert w.fetch() == expected
    other = w.writer()
    other.publish(T, [b"joined"])
    deadline = time.monotonic() + 60  # the lone writer's block is given up once older than W/2 (at any load)
    while w.fetch() != [*expected, b"joined"]:
        assert time.monotonic() < deadline, w.fetch()
        time.sleep(0.005)
    writer.publish(T, [b"after"])  # its next increment is not contiguous: no longer alone
    assert not writer.sequencer.reservations._queues[(T, 1)].lone
    for closing in (writer, other):
        closing.close()
    _dense(w)
    assert w.fetch() == [*expected, b"joined", b"after"]


def test_close_does_not_raise_when_hbase_refuses_the_release_of_a_block() -> None:
    w = World()
    writer = w.writer()
    for i in range(5):
        writer.publish(T, [b"%d" % i])

    def refused(*args: object) -> bool:
        raise HBaseError("table gone")

    w.inst.messages.put_if_absent = refused  # type: ignore[method-assign]
    writer.close()  # the remainder stays a hole (readers fill it after H), close ends normally
    assert len(w.fetch()) == 5


def test_a_block_holds_at_most_max_block_offsets() -> None:
    w = World()
    amounts: list[int] = []
    original = w.inst.messages.increment

    def recording(key: bytes, column: bytes, amount: int = 1) -> int:
        amounts.append(amount)
        return original(key, column, amount)

    w.inst.messages.increment = recording  # type: ignore[method-assign]
    res = Reservations(w.inst.messages, b"w" * 16, lambda: 10.0)
    span = MAX_BLOCK_OFFSETS // 3
    for _ in range(3):  # busy rounds of a large span, at a rate that would ask for MAX_ROUNDS
        ticket = Ticket(span)
        res.take(T, 1, ticket)
        res.published(ticket)
    assert res.carved == 1  # the third round came off the second one's block
    res.close()
    assert amounts[:2] == [span, 3 * span]  # the lone first round, then one block (the next one may follow)
    assert max(amounts) <= MAX_BLOCK_OFFSETS


@pytest.mark.threads_only
def test_a_busy_writer_reserves_its_next_block_in_the_keeper_while_it_publishes() -> None:
    """A lone busy writer's publishes wait for their conditional put only: once half of a block is carved,
    the keeper thread reserves the next one, and the publishes carve it after the first, in offset order."""
    w = World()
    writer = w.writer()
    threads: list[str] = []
    original = w.inst.messages.increment

    def recording(key: bytes, column: bytes, amount: int = 1) -> int:
        threads.append(threading.current_thread().name)
        return original(key, column, amount)

    w.inst.messages.increment = recording  # type: ignore[method-assign]
    for i in range(200):
        writer.publish(T, [b"%d" % i] * 100)  # 100 offsets a publish: at most 10 rounds a block
    writer.close()
    ahead = threads.count("tms-block-keeper")
    assert ahead >= 10 and len(threads) - ahead <= 3, threads  # the first round and block; then ahead only
    assert writer.sequencer.reservations.ahead == ahead
    _dense(w)
    rows = w.rows()
    batches = [p for p in sorted(rows) if not rows[p].skip]
    assert batches == [1 + 100 * i for i in range(200)]  # no offset skipped between blocks: one order, no gaps
    assert len(w.fetch()) == 200 * 100


def test_a_publish_carved_off_a_block_is_dated_when_it_is_carved_not_when_the_block_was_reserved() -> None:
    """A message published at or after T has a publish time >= T, so ``fetch(start_time=T)`` finds it."""
    w = World()
    res = Reservations(w.inst.messages, b"w" * 16, lambda: 10.0)  # W = 0.5 s: a block is carved for 0.25 s
    _, second = _busy_block(res)
    stalled = Ticket(1)
    res.take(T, 1, stalled)  # carved; its publish does not end, so the writer is not idle
    time.sleep(0.05)  # the block ages
    before = now_ms()
    carved = Ticket(1)
    res.take(T, 1, carved)
    assert carved.first == stalled.first + 1 and carved.started == second.started  # off the block, no increment
    assert carved.publish_time >= before > second.publish_time
    res.close()


def test_the_sweeper_prunes_the_skip_index_below_the_low_water_mark_and_a_counter_row_with_it_is_sound() -> None:
    from tms_hbase.model.integrity import is_counter_row

    w = World()
    messages = w.inst.messages
    for position in (3, 9, 20):
        sequencer.index_skips(messages, T, 1, {position: 2})
    assert sequencer.skipped(messages, T, 1, 1, 100) == 6
    assert is_counter_row(counter_key(T, 1), messages.get(counter_key(T, 1)))  # not a corrupt row
    assert sequencer.prune_skips(messages, T, 1, 10) == 2
    assert sequencer.skipped(messages, T, 1, 1, 100) == 2


def test_close_releases_every_block_even_when_one_release_meets_a_corrupt_row() -> None:
    from tms_hbase.ordering.reservations import Block

    w = World()
    messages, other = w.inst.messages, TopicId("ns", "other")
    res = Reservations(messages, b"w" * 16, lambda: 10.0)
    blocks = {}
    for topic in (T, other):  # a block of each topic held by the writer (no keeper runs: close releases them)
        first = sequencer.reserve(messages, topic, 1, 5)
        blocks[topic] = Block(first, 5, now_ms(), time.monotonic(), time.monotonic() + 60)
        res._queue(topic, 1).block = blocks[topic]
    sequencer.reserve(messages, T, 1, 1)  # somebody reserved after T's block: it cannot be given back
    messages.put(message_key(T, 1, blocks[T].first), {MESSAGE_COLUMN: b"\x07garbage"})  # its release meets this
    res.close()  # does not raise
    assert sequencer.end_offset(messages, other, 1) == 0  # the other block was still given back


def test_the_frontier_keeps_the_newest_date_and_the_disorder_of_the_batches_below_it() -> None:
    start = sequencer.Frontier()
    assert (start.offset, start.newest, start.disorder, start.stored) == (1, -1, 0, None)
    moved = start.passing([100, 90, 120, 95, 130], 6)
    # 90 comes after 100 (10 ms back), 95 after 120 (25 ms back): t(p) <= t(q) + 25 for every p < q
    assert (moved.offset, moved.newest, moved.disorder) == (6, 130, 25)
    further = moved.passing([110, 140], 9)  # measured against the newest date below the old frontier too
    assert (further.offset, further.newest, further.disorder) == (9, 140, 25)
    assert moved.passing([100], 7).disorder == 30


@pytest.mark.threads_only
def test_a_block_ahead_reserved_before_a_fresh_increment_is_never_carved_after_it() -> None:
    """A writer's publishes, each taken once the one before it was acknowledged, get rising offsets, so a fetch
    returns them in that order. Under load the keeper's increment for the block ahead returned but the keeper
    was starved before it put the block ahead; the lead, finding its block used up or too old, reserved for
    itself (higher offsets); the keeper then put its lower block ahead, and a later publish was carved off
    it, BELOW one acknowledged before it (test_gateway_http's pipelined p3 stored before p2)."""
    w = World()
    window = [10.0]  # W, read when it is needed: W/2 = 5 s, so no block ages unless told
    res = Reservations(w.inst.messages, b"w" * 16, lambda: window[0])
    in_flight, fresh = threading.Event(), threading.Event()
    original = w.inst.messages.increment

    def increment(key: bytes, column: bytes, amount: int = 1) -> int:
        last = original(key, column, amount)
        if threading.current_thread().name == "tms-block-keeper" and not in_flight.is_set():
            in_flight.set()  # the block ahead is reserved; the keeper is starved before it puts it ahead
            assert fresh.wait(60)
        elif in_flight.is_set():
            fresh.set()  # the lead's own increment, after the keeper's
        return last

    w.inst.messages.increment = increment  # type: ignore[method-assign]
    tickets = _busy_block(res)
    queue = res._queues[(T, 1)]
    while not queue.reserving_ahead:  # carve until half of the block is gone: the keeper reserves ahead
        tickets.append(Ticket(1))
        res.take(T, 1, tickets[-1])
        res.published(tickets[-1])
    assert in_flight.wait(60)
    window[0] = 0.05  # the lead waits for the block ahead at most W: the starved keeper makes it give up
    with queue.lock:  # and the rest of the block, if any, went too old to carve while the process starved
        if queue.block is not None:
            queue.block = replace(queue.block, until=time.monotonic() - 0.001)
    held = Ticket(1)
    tickets.append(held)
    res.take(T, 1, held)  # its publish does not end yet: the writer is busy, nothing is released as idle
    assert fresh.is_set()
    wait_for(lambda: not queue.reserving_ahead, "the keeper put its block ahead", 60)
    for _ in range(2 * MAX_BLOCK_OFFSETS // 8):  # past the lead's own block, into the keeper's if it is carved
        tickets.append(Ticket(1))
        res.take(T, 1, tickets[-1])
        res.published(tickets[-1])
    res.published(held)
    res.close()
    firsts = [t.first for t in tickets]
    assert [(a, b) for a, b in itertools.pairwise(firsts) if b <= a] == []  # rising in the order they were taken
