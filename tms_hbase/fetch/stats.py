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
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tms_hbase.fetch.reader import MessageReader
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
from tms_hbase.publish import byte_totals, sequencer
from tms_hbase.publish.stored import stored_sizes
from tms_hbase.storage.hbase import Table

WINDOWS = (60, 300, 900)
"""Seconds of the publish-rate windows topic_stats reports (like a load average: 1, 5 and 15 minutes)."""


@dataclass(frozen=True)
class _Row:
    """A batch row as stats read it: position, header and the cell (decoded only where sizes matter)."""

    position: int
    head: RowHeader
    value: bytes


class TopicStatistics:
    """Computes lag and topic statistics from the message and payload tables."""

    def __init__(self, messages: Table, payloads: Table, reader: MessageReader) -> None:
        self.messages = messages
        self.payloads = payloads
        self.reader = reader

    # -- lag ------------------------------------------------------------------------------------

    def lag(self, topic: TopicId, generation: int, ttl: int, mark: bytes | None, now: int | None = None) -> Lag:
        """The lag of a subscription whose (resolved) mark is ``mark``: about four reads."""
        now = self.reader.hbase_now() if now is None else now
        tail = self._tail(topic, generation)
        if tail is None:
            return Lag(0, 0.0)
        return self._lag(topic, generation, now - ttl * 1000, mark, tail, now)

    def _lag(self, topic: TopicId, generation: int, floor: int, mark: bytes | None, tail: _Row, now: int) -> Lag:
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
        messages = max(0, total.messages - consumed[0] - self._skipped(topic, generation, first, tail))
        if messages == 0:
            return Lag(0, 0.0)
        return Lag(messages, max(0.0, (now - first.head.publish_time) / 1000))

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
        by_mark: dict[bytes | None, Lag] = {}
        for _, mark in subscriptions:
            if mark not in by_mark:
                by_mark[mark] = Lag(0, 0.0) if tail is None else self._lag(topic, generation, floor, mark, tail, now)
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
            rates=rates,
            exact=exact and all(lag.exact for _, _, lag in lags),
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
