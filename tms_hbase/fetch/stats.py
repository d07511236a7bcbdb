"""Lag and topic statistics from a handful of row reads, never a scan of the topic.

Every batch row carries the running totals of its generation (messages and bytes through that row;
:mod:`.rows`), so the size of any range of a topic is a subtraction of two rows' totals:

* **messages in a topic** = totals(tail) − totals before the first readable row (the tail is one
  reverse scan of one row; the first readable row is a time seek to now − TTL, O(log n) reads,
  usually a single get because the sweeper keeps the head of a topic near that time);
* **lag of a subscription** = totals(tail) − what its mark has consumed (the mark's row and the next
  row: two reads), and its age in seconds = now − publish time of the first row not fully consumed;
* **publish rate over a window** = messages since a time seek to now − window, divided by the window.

In a sequencer generation (docs/ordering.md) the totals come from the row keys instead: a row's key is
its first message offset, so the offsets through it are ``key − 1 + span``; the offsets that skip markers
hold in the range are subtracted (the skip index: one more read, :func:`.sequencer.skipped`), and
offsets reserved beyond the tail row are not counted, so counts and lag are messages. Offsets still count
while they are a hole below the tail row: a publish in flight, or a killed writer's reservation until a
reader fills it (H after the row above it was stored). Bytes there are exact, from the generation's bytes
checkpoints (:mod:`..publish.byte_totals`): the first readable row's own (what it holds now, as its
messages count), then the checkpoint at or below the row after it and the newest one, each plus the
rows from it (fewer than a checkpoint's spacing at the head; at the tail, that plus the rows published
since the last stats call or sweeper pass). Only a generation swept before checkpoints existed, until its
next sweep, has its bytes estimated from the tail row's mean message size (``bytes_exact`` False, no
error bound). A pointer row published with nothing stored under its pointer
still takes one offset there, so it counts as one message.
Its time seeks here are the cheap lower bound (``seek(exact=False)``): a publish rate there may count
messages up to D (1.5 W + the tail-cache time) older than its window, never fewer than are in it.

Rows written before totals existed have none; where one is needed the numbers are estimates and say
so (``exact`` is False). A pointer row (payloads stored under a transaction) counts the payloads stored
under its write pointer and their bytes, as its writer did (:mod:`..publish.stored`; docs/consumers.md).

The numbers are what a committed-only subscription receives: the messages of the rows it skips (rolled
back, of an invalid transaction) are subtracted, and those it is held at (a transaction in progress) are
reported apart (``Lag.held``, ``TopicStats.uncommitted``); :meth:`TopicStatistics._undelivered` finds those
rows without a scan.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from tms_hbase.fetch import slices
from tms_hbase.fetch.reader import MessageReader
from tms_hbase.isolation.committed import NOTHING_COMMITTED
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.record import counted_sizes
from tms_hbase.model.rows import (
    F_POINTER,
    MESSAGE_COLUMN,
    BatchRow,
    RowHeader,
    Totals,
    generation_prefix,
    message_key,
    peek,
    position_of,
)
from tms_hbase.model.stats import Lag, TopicStats
from tms_hbase.model.subscription import END
from tms_hbase.model.topic import TopicId
from tms_hbase.model.transaction import Transaction
from tms_hbase.ordering import sequencer
from tms_hbase.publish import byte_totals, rolled_back
from tms_hbase.publish.stored import stored_sizes
from tms_hbase.storage.hbase import Table
from tms_hbase.tx.pointers import MAX_LIFETIME_SECONDS, MAX_TX_PER_MS

WINDOWS = (60, 300, 900)
"""Seconds of the publish-rate windows topic_stats reports (like a load average: 1, 5 and 15 minutes)."""


@dataclass(frozen=True)
class _Row:
    """A batch row as stats read it: position, header and the cell (decoded only where sizes matter)."""

    position: int
    head: RowHeader
    value: bytes


@dataclass(frozen=True)
class _Undelivered:
    """The rows of a range a committed-only reader does not deliver now, by position: ``skipped`` (rolled
    back, or of an invalid transaction) and ``held`` (of a transaction in progress); ``exact`` is False when
    the transaction state could not be read (transactional rows are then counted as committed)."""

    skipped: dict[int, _Row] = field(default_factory=dict)
    held: dict[int, _Row] = field(default_factory=dict)
    exact: bool = True


class TopicStatistics:
    """Computes lag and topic statistics from the message and payload tables; ``tx_view`` reads the
    transaction state committed-only readers judge rows by (:meth:`CommittedReads.view`)."""

    def __init__(
        self,
        messages: Table,
        payloads: Table,
        reader: MessageReader,
        tx_view: Callable[[], Transaction],
    ) -> None:
        self.messages = messages
        self.payloads = payloads
        self.reader = reader
        self.tx_view = tx_view

    # -- lag ------------------------------------------------------------------------------------

    def lag(self, topic: TopicId, generation: int, ttl: int, mark: bytes | None, now: int | None = None) -> Lag:
        """The lag of a subscription whose (resolved) mark is ``mark``: about four reads, and those that
        find the rows a committed-only reader does not deliver now (:meth:`_undelivered`)."""
        now = self.reader.hbase_now() if now is None else now
        tail = self._tail(topic, generation)
        if tail is None:
            return Lag(0, 0.0)
        return self._lag(topic, generation, now - ttl * 1000, mark, tail, now)

    def _lag(
        self,
        topic: TopicId,
        generation: int,
        floor: int,
        mark: bytes | None,
        tail: _Row,
        now: int,
        undelivered: _Undelivered | None = None,
    ) -> Lag:
        consumed, first = self._consumed(topic, generation, mark)
        if first is not None and first.head.publish_time < floor:
            # expired rows ahead of the mark are not readable any more: count from the first readable one
            first = self._first_readable(topic, generation, floor)
            consumed = None if first is None else self._before(topic, generation, first)
        if first is None:
            return Lag(0, 0.0)
        total = tail.head.totals
        if total is None or consumed is None:  # rows without totals: estimate from positions
            estimate = (tail.position - first.position + 1) * max(1, tail.head.payload_count)
            return Lag(estimate, max(0.0, (now - first.head.publish_time) / 1000), False)
        if undelivered is None:
            undelivered = self._undelivered(topic, generation, first.position, tail)
        after = first.position - 1 if mark is None else MessageId.decode(mark).position
        index = END if mark is None else MessageId.decode(mark).index
        left = {
            p: self._left(topic, generation, r, after, index)
            for p, r in undelivered.skipped.items()
            if p >= first.position
        }
        held = min((p for p in undelivered.held if p >= first.position), default=None)
        raw = total.messages - consumed[0] - self._skipped(topic, generation, first, tail)
        if held is None:
            messages, held_back = raw - sum(left.values()), 0
        else:
            row = undelivered.held[held]
            before = self._before(topic, generation, row)
            if before is None:  # (rows without totals)
                return Lag(raw, max(0.0, (now - first.head.publish_time) / 1000), False)
            from_held = min(raw, total.messages - before[0] - self._skipped(topic, generation, row, tail))
            messages = raw - from_held - sum(n for p, n in left.items() if p < held)
            held_back = from_held - sum(n for p, n in left.items() if p >= held)
        messages, held_back = max(0, messages), max(0, held_back)
        oldest = self._first_delivered(topic, generation, first, undelivered.skipped)
        if messages + held_back == 0 or oldest is None:
            return Lag(0, 0.0, undelivered.exact)
        return Lag(messages, max(0.0, (now - oldest.head.publish_time) / 1000), undelivered.exact, held_back)

    def _left(self, topic: TopicId, generation: int, row: _Row, after: int, index: int) -> int:
        """The messages of ``row`` past a mark at (``after``, ``index``): all of them, or those with a
        greater index in the mark's own row."""
        own = self._own(topic, generation, row)
        if row.position != after:
            return len(own)
        return 0 if index == END else len(own) - bisect.bisect_right(own, (index, math.inf))

    def _first_delivered(self, topic: TopicId, generation: int, first: _Row, skipped: dict[int, _Row]) -> _Row | None:
        """The first row from ``first`` on that a committed-only reader does not skip (the age of a lag)."""
        row: _Row | None = first
        while row is not None and row.position in skipped:
            row = self._at_or_after(topic, generation, row.head.next_position(row.position))
        return row

    # -- what committed-only readers do not deliver now ------------------------------------------

    def _undelivered(self, topic: TopicId, generation: int, low: int, tail: _Row) -> _Undelivered:
        """The rows from position ``low`` through ``tail`` that a committed-only reader skips or is held at,
        without scanning the topic: the rollback index (:mod:`..publish.rolled_back`, each row checked), and,
        only for the transactions the state shows in progress or invalid, the transactional rows of the
        times they can have written at (filtered in HBase): from a little before a write pointer's start
        (its time: :mod:`..tx.pointers`) to now for one in progress, to its max lifetime after for an
        invalid one. The state is read after ``tail`` was, so every transaction that wrote up to the tail
        had started by then: it is committed (visible), invalid or in progress in that state."""
        found = _Undelivered()
        for position in rolled_back.positions(self.messages, topic, generation, low, tail.position):
            row = self._get(topic, generation, position)
            if row is not None and row.head.tx_pointer is not None and row.head.tx_pointer < 0:
                found.skipped[position] = row
        view = self.tx_view()
        if view is NOTHING_COMMITTED:  # the state is unknown: every transactional row counts as committed
            return replace(found, exact=False)
        # the clock-skew bound, twice, and D: how much earlier than its write pointer's time a row may be dated
        margin = int(2 * self.reader.tail_cache_seconds() * 1000) + self.reader.sequencer.disorder_ms()
        lifetime = MAX_LIFETIME_SECONDS * 1000
        windows = [(p // MAX_TX_PER_MS - margin, math.inf) for p in view.in_progress] + [
            (p // MAX_TX_PER_MS - margin, p // MAX_TX_PER_MS + lifetime + margin) for p in view.invalids
        ]
        for since, until in _merged(windows):
            if since > tail.head.publish_time:
                break
            start = max(low, self.reader.seek(topic, generation, int(since), exact=False))
            for batch in slices.batches(self.reader, topic, generation, start, tail.position, transactional_only=True):
                pointer = batch.tx_write_pointer
                if batch.publish_time > until:
                    break
                if pointer is None or batch.position in found.skipped:
                    continue
                if pointer < 0 or view.is_invalid(pointer):
                    kind = found.skipped
                elif not view.is_visible(pointer):
                    kind = found.held
                else:
                    continue
                row = self._get(topic, generation, batch.position)
                if row is not None:
                    kind[batch.position] = row
        return found

    def _undelivered_sizes(self, topic: TopicId, generation: int, rows: dict[int, _Row]) -> tuple[int, int]:
        """(messages, bytes) the rows hold now."""
        sizes = [size for row in rows.values() for _, size in self._own(topic, generation, row)]
        return len(sizes), sum(sizes)

    def _consumed(
        self, topic: TopicId, generation: int, mark: bytes | None
    ) -> tuple[tuple[int, int] | None, _Row | None]:
        """((messages, bytes) consumed through ``mark`` or None if unknown, the first row not fully
        consumed or None if there is none)."""
        position = 0 if mark is None else MessageId.decode(mark).position
        if mark is not None:
            index = MessageId.decode(mark).index
            row = self._get(topic, generation, position)
            if row is not None and index != END:
                own = self._own(topic, generation, row)
                sizes = [size for _, size in own]
                done = bisect.bisect_right(own, (index, math.inf))  # the messages with an index up to the mark's
                if done < len(sizes):  # partly consumed: this row is the first with messages to consume
                    before = self._before(topic, generation, row, sizes)
                    return (None if before is None else (before[0] + done, before[1] + sum(sizes[:done]))), row
        following = self._at_or_after(topic, generation, position + 1)
        if following is None:
            return None, None
        return self._before(topic, generation, following), following

    # -- topic statistics -----------------------------------------------------------------------

    def topic_stats(
        self,
        topic: TopicId,
        generation: int,
        ttl: int,
        subscriptions: Sequence[tuple[str, bytes | None]] = (),
        windows: Sequence[int] = WINDOWS,
    ) -> TopicStats:
        """Size, ends, publish rates and the subscriptions' lag of one topic generation: a tail read, a
        time seek per window and for the head, and about three reads per distinct mark (subscriptions at the
        same mark, such as those caught up, share one lag: it depends on the mark only)."""
        now = self.reader.hbase_now()
        floor = now - ttl * 1000
        tail = self._tail(topic, generation)
        first = None if tail is None else self._first_readable(topic, generation, floor)
        undelivered = (
            _Undelivered()
            if tail is None or first is None
            else self._undelivered(topic, generation, first.position, tail)
        )
        by_mark: dict[bytes | None, Lag] = {}
        for _, mark in subscriptions:
            if mark not in by_mark:
                by_mark[mark] = (
                    Lag(0, 0.0) if tail is None else self._lag(topic, generation, floor, mark, tail, now, undelivered)
                )
        lags = [(name, mark, by_mark[mark]) for name, mark in subscriptions]
        stats = TopicStats(topic, generation, ttl, None, None, None, None, 0, 0, dict.fromkeys(windows, 0.0), lags)
        if tail is None:
            return stats
        total = tail.head.totals
        stats = replace(
            stats,
            last_position=tail.position,
            last_publish_time=tail.head.publish_time,
            published=None if total is None else total.messages,
        )
        if first is None:
            return stats
        first_sizes = [size for _, size in self._own(topic, generation, first)]  # what it holds now
        before = self._before(topic, generation, first, first_sizes)
        if total is None or before is None:
            estimate = (tail.position - first.position + 1) * max(1, tail.head.payload_count)
            counts, exact, bytes_exact = (estimate, 0), False, False
        elif tail.head.span is not None:  # a sequencer generation: offsets less skipped ones, bytes checkpointed
            messages = total.messages - before[0] - self._skipped(topic, generation, first, tail)
            # the first row as it is now, like its messages (one the sweeper stripped holds none), and those after
            after = first.head.next_position(first.position)
            end = tail.head.next_position(tail.position)
            counted = byte_totals.bytes_between(self.messages, self.payloads, topic, generation, after, end)
            if counted is None:  # swept before bytes checkpoints existed, not since: the tail row's mean size
                sizes = [size for _, size in self._own(topic, generation, tail)]
                counts, exact, bytes_exact = (messages, messages * sum(sizes) // max(1, len(sizes))), True, False
            else:
                counts, exact, bytes_exact = (messages, sum(first_sizes) + counted), True, True
        else:
            counts, exact, bytes_exact = (total.messages - before[0], total.bytes - before[1]), True, True
        skipped = self._undelivered_sizes(topic, generation, undelivered.skipped)
        held = self._undelivered_sizes(topic, generation, undelivered.held)
        counts = (max(0, counts[0] - skipped[0] - held[0]), max(0, counts[1] - skipped[1] - held[1]))
        rates = {}
        for window in windows:
            since = self._first_readable(topic, generation, max(floor, now - window * 1000))
            before_window = None if since is None else self._before(topic, generation, since)
            recent = (
                0
                if since is None or total is None or before_window is None
                else total.messages - before_window[0] - self._skipped(topic, generation, since, tail)
            )
            rates[window] = recent / window
        return replace(
            stats,
            first_position=first.position,
            first_publish_time=first.head.publish_time,
            messages=counts[0],
            bytes=counts[1],
            uncommitted=held[0],
            rates=rates,
            exact=exact and undelivered.exact and all(lag.exact for _, _, lag in lags),
            bytes_exact=bytes_exact,
        )

    def _skipped(self, topic: TopicId, generation: int, first: _Row, tail: _Row) -> int:
        """Offsets held by skip markers from ``first`` through ``tail`` (a sequencer generation's offsets
        count them: see the module doc); 0 in a chain generation."""
        if tail.head.span is None or tail.head.totals is None:
            return 0
        return sequencer.skipped(self.messages, topic, generation, first.position, tail.head.totals.messages + 1)

    # -- rows -----------------------------------------------------------------------------------

    def _tail(self, topic: TopicId, generation: int) -> _Row | None:
        found = self.messages.last_row(generation_prefix(topic, generation), [MESSAGE_COLUMN])
        return None if found is None else _row(*found)

    def _get(self, topic: TopicId, generation: int, position: int) -> _Row | None:
        value = self.messages.get_cell(message_key(topic, generation, position), MESSAGE_COLUMN)
        return None if value is None else _stats_row(position, value)

    def _at_or_after(self, topic: TopicId, generation: int, position: int) -> _Row | None:
        """The first row at ``position`` or after (one scan of one row: swept rows are stepped over)."""
        rows = self.messages.scan(
            message_key(topic, generation, max(1, position)),
            generation_prefix(topic, generation) + b"\xff" * 8,
            limit=1,
            columns=[MESSAGE_COLUMN],
        )
        return _row(*rows[0]) if rows else None

    def _first_readable(self, topic: TopicId, generation: int, since: int) -> _Row | None:
        """The first row published at ``since`` or later (a time seek: O(log n) reads; in a sequencer
        generation its lower bound, which may lie up to D earlier: see the module doc)."""
        return self._at_or_after(topic, generation, self.reader.seek(topic, generation, since, exact=False))

    def _before(
        self, topic: TopicId, generation: int, row: _Row, sizes: list[int] | None = None
    ) -> tuple[int, int] | None:
        """(messages, bytes) of the generation before ``row``; None for a row without totals."""
        totals = row.head.totals
        if totals is None:
            return None
        sizes = [size for _, size in self._own(topic, generation, row)] if sizes is None else sizes
        return totals.messages - len(sizes), totals.bytes - sum(sizes)

    def _own(self, topic: TopicId, generation: int, row: _Row) -> list[tuple[int, int]]:
        """(index in message ids, size) of the row's own messages: its payloads' (indexes from 0), or for a
        pointer row those of the payloads stored under its pointer (indexes are their sequences; what its
        writer counted: :mod:`..publish.stored`)."""
        head = row.head
        if head.tx_pointer is None or head.payload_count or not head.flags & F_POINTER:
            decoded = BatchRow.decode(row.value)
            return list(enumerate(counted_sizes(decoded.payloads, decoded.extras)))
        return stored_sizes(self.payloads, topic, generation, abs(head.tx_pointer))


def _merged(windows: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Time windows (from, until), overlapping ones merged, in order."""
    merged: list[tuple[float, float]] = []
    for since, until in sorted(windows):
        if merged and since <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], until))
        else:
            merged.append((since, until))
    return merged


def _row(key: bytes, cells: dict[bytes, bytes]) -> _Row:
    return _stats_row(position_of(key), cells[MESSAGE_COLUMN])


def _stats_row(position: int, value: bytes) -> _Row:
    """A row with its totals: stored (chain rows), or its offsets (sequencer rows: messages through it
    are its key − 1 + its span; no byte totals, see the module doc). A skip marker holds no messages:
    through it are the offsets before it, so a writer's released block at the tail (or one a reader
    filled) never counts as messages, and one below a consumer's next row counts as passed."""
    head = peek(value)
    if head.span is not None:
        head = replace(head, totals=Totals(position - 1 + (0 if head.skip else head.span), 0))
    return _Row(position, head, value)
