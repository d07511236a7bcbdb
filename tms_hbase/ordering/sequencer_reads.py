"""Reading a sequencer generation (docs/ordering.md): a row's key is its first offset and the next row starts at
key + span. A missing offset below a row that exists (after one re-scan) is a reservation not written
yet: the reader returns what comes before it and does not pass it; once it has seen it for H
(``sequencer.hole_wait``), it fills it with a skip marker (if-absent, one offset at a time) or, if the
writer was first, reads the batch; the rest of a run of holes below the same row is then due and is
filled offset after offset without scanning again (one call per offset). A gap below the generation's
low-water mark is swept (the sweeper deletes sequencer rows only as a prefix, raising the mark first).
Skip markers hold no messages and are never returned. A time seek for T is exact, like Kafka's
offsetsForTimes: the first row in order holding messages dated >= T, found from the lower bound T − D
(D = 1.5 W + the clock-skew bound: publish time is non-decreasing only up to D there) with a filter that
HBase applies, and, while a hole below that row could still receive a batch, by reading up to it. Below the
generation's frontier every offset holds a row: a seek finds its row there with a narrow search and
one filtered scan, and a read that began at the frontier moves it up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tms_hbase.errors import CorruptData
from tms_hbase.installation.hbase_clock import HBaseClock
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.rows import (
    MAX_POSITION,
    MESSAGE_COLUMN,
    BatchRow,
    RowHeader,
    decode_row,
    generation_prefix,
    message_key,
    past_last,
    peek_row,
    position_of,
)
from tms_hbase.model.topic import TopicId
from tms_hbase.ordering import sequencer
from tms_hbase.ordering.lookup import CHUNK_ROWS, RowLookup, dated_at_or_after
from tms_hbase.ordering.pivots import Pivots
from tms_hbase.runtime import green
from tms_hbase.storage.hbase import Table

NEAR_FRACTION = 8  # a sequencer seek's search stops once its two rows are dated within D / this (see below)
FINAL_FRACTION = 64  # ... or within D / this below the frontier, where rows are final and often in order


def _head(key: bytes, value: bytes | None, tolerant: bool) -> RowHeader | None:
    """The row's header; None for a cell that does not decode if ``tolerant``, else CorruptData."""
    try:
        return peek_row(key, value)
    except CorruptData:
        if tolerant:
            return None
        raise


@dataclass(frozen=True)
class _Sighting:
    """A hole a reader waits on: when it first saw it (monotonic), and when HBase stored the row above it
    (HBase's clock, ms; None: unknown)."""

    seen: float
    above_stored: int | None


class SequencerReads:
    """Seeks and scans of sequencer generations for one reader, and the holes it waits on and fills.

    ``tail_cache_seconds``: the installation's tail-cache time C, re-read (W, H and D follow from it);
    ``hbase_now``: the reader's clock (HBase's if ``hbase_clock`` is given, then a hole is due H after
    HBase stored the row above it, whoever first saw it; else H after this reader first saw it).
    """

    def __init__(
        self,
        messages: Table,
        lookup: RowLookup,
        tail_cache_seconds: Callable[[], float],
        hbase_now: Callable[[], int],
        hbase_clock: HBaseClock | None,
    ) -> None:
        self.messages = messages
        self.lookup = lookup
        self.tail_cache_seconds = tail_cache_seconds
        self.hbase_now = hbase_now
        self.hbase_clock = hbase_clock
        self._holes: dict[tuple[TopicId, int, int], _Sighting] = {}  # each hole waited on
        self._holes_lock = green.no_wait_lock()
        self.holes_filled = 0  # skip markers this reader put into holes
        self.longest_hole_wait = 0.0  # seconds, first sighting to passing, of the longest hole met

    def hole_wait(self) -> float:
        """H: how long a hole below a row that exists is waited on before it is filled."""
        return sequencer.hole_wait(self.tail_cache_seconds())

    def disorder_ms(self) -> int:
        """D of sequencer generations (``sequencer.disorder``), in ms."""
        return int(sequencer.disorder(self.tail_cache_seconds()) * 1000)

    def seek(self, topic: TopicId, generation: int, time_ms: int, *, exact: bool = True) -> int:
        """The first position, in order, of a row holding messages dated >= ``time_ms`` (the next position
        past the last row if none), see :meth:`_seek`: rows after the answer may be dated up to D earlier
        (Kafka's offsetsForTimes semantics; docs/ordering.md). With ``exact=False`` the answer is the
        search's lower bound only: no row dated >= ``time_ms`` lies before it, rows up to D older may lie
        after it (for estimates, and for reads that skip what is too old anyway)."""
        if not exact:
            prefix = generation_prefix(topic, generation)
            return self._lower_bound(prefix, time_ms - self.disorder_ms(), first=True)
        return self._seek(topic, generation, time_ms)

    def _seek(self, topic: TopicId, generation: int, time_ms: int) -> int:
        """The exact seek of a sequencer generation (docs/ordering.md, "Time seek"):

        0. unless every row is settled (the last row is a batch older than :func:`sequencer.settled`), the
           generation's frontier (:func:`sequencer.frontier`): below it every offset holds a row, final. If
           a batch below it is dated >= ``time_ms``, the first such is the answer: a search below
           the frontier with its own (measured) disorder instead of D, and one filtered scan;
        1. ``low`` = the offset after the last row dated before ``time_ms`` − D
           (:meth:`_lower_bound`), at least the frontier: a row before it, written or not yet, is
           dated before ``time_ms``;
        2. the first row from ``low`` on that holds messages dated >= ``time_ms``: one scan of one row
           that HBase filters (:func:`.dated_at_or_after`), so the rows in between never leave it;
        3. a hole below that row (or below the last row, if none matched) may still receive a batch
           dated >= ``time_ms`` until :func:`sequencer.settled` after the row's time (a skip marker's
           time bounds nothing). Before that, the rows from ``low`` up to it are read in order, waiting
           on (and filling) holes as a range read does, and the first one dated >= ``time_ms`` is the
           answer; a read that began at the frontier moves it up to where it stopped, with the dates it
           read, so the next seek into those rows, in any process, reads none."""
        prefix = generation_prefix(topic, generation)
        disorder = self.disorder_ms()
        settle_ms = sequencer.settled(self.tail_cache_seconds()) * 1000
        newest = self.messages.last_row(prefix)
        if newest is None:
            return 1
        last = position_of(newest[0]), peek_row(newest[0], newest[1].get(MESSAGE_COLUMN))
        closed = sequencer.Frontier()  # below it rows are final: no batch can land there any more
        if last[1].skip or self.hbase_now() <= last[1].publish_time + settle_ms:  # (else every row is settled)
            closed = sequencer.frontier(self.messages, topic, generation)
        if closed.newest >= time_ms:  # a batch below the frontier is dated >= time_ms: the first one is the answer
            narrow = max(closed.disorder, disorder // FINAL_FRACTION)
            low = self._lower_bound(prefix, time_ms - closed.disorder, near_ms=narrow, top=closed)
            answer = self.lookup.first_dated(prefix, low, closed.offset, time_ms)
            if answer < closed.offset:
                return answer  # (else that batch was swept: every batch left below the frontier is dated before)
        low = self._lower_bound(prefix, time_ms - disorder, near_ms=disorder // NEAR_FRACTION, top=last)
        low = max(low, closed.offset)  # every batch below the frontier is dated before time_ms
        if last[0] < low:
            return low  # no row from ``low`` on: no hole either
        found = self.messages.scan(
            message_key(topic, generation, low),
            past_last(prefix),
            limit=1,
            columns=[MESSAGE_COLUMN],
            filter=dated_at_or_after(time_ms),
        )
        if found:
            key, cells = found[0]
            position, header = position_of(key), peek_row(key, cells.get(MESSAGE_COLUMN))
            answer, below = position, position - 1
        else:  # the last row as it is now (rows may have come since the search read it)
            position, header = self.lookup.last(prefix)
            answer, below = header.next_position(position), position
        # a skip marker's time is not its writer's clock reading (a fill carries an older row's), so only a
        # batch's time bounds the holes below it
        settled = header.publish_time + settle_ms
        if below < low or (not header.skip and self.hbase_now() > settled):
            return answer  # every hole below it is filled or can only be filled with a skip marker
        reached, landed, dates = low, None, []
        for at, key, cell in self.cells(topic, generation, low, CHUNK_ROWS, below):
            head = peek_row(key, cell)  # the dates only: the payloads are not decoded
            reached = head.next_position(at)  # every offset from ``low`` through this row holds a row now
            if not head.skip:
                dates.append(head.publish_time)
            if at > below:
                break
            if not head.skip and head.publish_time >= time_ms:  # a batch that was a hole when HBase filtered
                landed = at
                break
        if low == closed.offset and reached > low:  # read in order from the frontier: move it up to here
            sequencer.raise_frontier(self.messages, topic, generation, closed, closed.passing(dates, reached))
        return answer if landed is None else landed

    def _lower_bound(
        self,
        prefix: bytes,
        time_ms: int,
        *,
        near_ms: int = 0,
        first: bool = False,
        top: tuple[int, RowHeader] | sequencer.Frontier | None = None,
    ) -> int:
        """``low``: the offset just after a batch dated before ``time_ms`` (1 if none), so no row before it is
        dated >= ``time_ms`` + D.

        A search over offsets between the first row (:meth:`.RowLookup.first`) and ``top`` (:class:`.Pivots`: where the
        dates read put ``time_ms``, else the middle). Each probe reads the row at or before its offset (one
        reverse scan of one row): the row holding that offset, since rows follow each other. Only a batch's
        date bounds the rows before it (a skip marker carries an older row's, or 0), so a marker only narrows
        the search from above. The search ends when no row lies between the two it holds, or when they are
        dated at most ``near_ms`` apart: the rows between them are then few next to the D of rows an exact
        seek reads anyway, so a probe would cost more than it saves. Each probe aims ``near_ms`` / 2 past
        ``time_ms`` (more while probes land on one side), on the side not moved last, so that two good
        guesses end it. With ``first`` the first row
        is looked at before anything else (a read from the start of the TTL mostly ends there); a topic
        written within D of ``time_ms`` ends at it. ``top``: the row to search at and below, already read
        (else the last row is read), or a frontier to search below (its newest date bounds the rows there).
        Calls: the last row unless given, the first row unless this reader knows it, then one per probe: a
        few on rows written at a steady rate, at most :data:`GUESS_MISSES` + 1 more than one per halving of
        the offsets between."""
        head = self.lookup.first(prefix) if first else None
        if first and (head is None or head[1].publish_time >= time_ms):
            return 1
        if top is None:
            last = self.messages.last_row(prefix)
            if last is None:
                return 1
            top = position_of(last[0]), peek_row(last[0], last[1].get(MESSAGE_COLUMN))
        above: tuple[int, int] | None  # the lowest batch known at or above ``bound`` (offset, date)
        if isinstance(top, sequencer.Frontier):
            bound, above = top.offset, (top.offset, top.newest)  # (the search stays below its offset)
        elif top[1].publish_time < time_ms and not top[1].skip:
            return top[1].next_position(top[0])
        else:
            bound = top[0]  # a row dated >= time_ms, or a marker
            above = None if top[1].skip else (top[0], top[1].publish_time)
        head = head or self.lookup.first(prefix)
        if head is None or head[0] >= bound or (head[1].skip and not first) or head[1].publish_time >= time_ms:
            return 1  # no row below ``bound``, or the first bounds nothing below ``time_ms``
        lo = None if head[1].skip else head  # the last batch known to be dated < time_ms (None: none yet)
        start = 1 if lo is None else lo[1].next_position(lo[0])  # no row in [lo's end, start)
        pivots = Pivots(lean_ms=near_ms // 2)
        while start < bound and (lo is None or above is None or above[1] - lo[1].publish_time > near_ms):
            below = None if lo is None else (lo[0], lo[1].publish_time)
            mid = pivots.next(start, bound - 1, below, above, time_ms)
            found = self.lookup.row_at_or_before(prefix, mid, start)
            raised = found is None or (found[1].publish_time < time_ms and not found[1].skip)
            if found is None:
                start = mid + 1  # no row in [start, mid]
            elif raised:
                lo = found
                start = max(found[1].next_position(found[0]), mid + 1)
            else:
                bound = found[0]
                if not found[1].skip:
                    above = (found[0], found[1].publish_time)
            pivots.narrowed(start, bound - 1, raised_low=raised)
        return 1 if lo is None else lo[1].next_position(lo[0])

    def rows(
        self, topic: TopicId, generation: int, start: int, first: int, last: int | None, views: bool
    ) -> Iterator[tuple[int, BatchRow]]:
        """The batch rows of a sequencer generation from offset ``start`` in order, skip markers left
        out, up to the tail or a hole not yet due to fill (see module doc). A gap is a hole unless it lies
        below the generation's low-water mark (swept). ``start`` may lie inside a row's span (a range cut by
        offsets): that row belongs before it, so reading begins after the span. With ``last`` (a range
        read, which must reach its end) a hole not due yet is waited on instead of ending the read. The
        holes it fills are recorded in the skip index once per run of them (and when it stops early)."""
        for position, key, value in self.cells(topic, generation, start, first, last):
            row = decode_row(key, value, views=views)
            if not row.skip:
                yield position, row

    def cells(
        self,
        topic: TopicId,
        generation: int,
        start: int,
        first: int = CHUNK_ROWS,
        last: int | None = None,
        *,
        tolerant: bool = False,
    ) -> Iterator[tuple[int, bytes, bytes | None]]:
        """The rows of a sequencer generation as :meth:`rows` passes them, skip markers
        included, as (position, key, cell): what the inspector shows. ``tolerant``: a cell that does not
        decode is passed as a row of span 1 instead of raising CorruptData (the inspector reports it)."""
        filled: dict[int, int] = {}
        try:
            yield from self._walk(topic, generation, start, first, last, filled, tolerant)
        finally:
            if filled:
                sequencer.index_skips(self.messages, topic, generation, filled)

    def _walk(
        self,
        topic: TopicId,
        generation: int,
        start: int,
        first: int,
        last: int | None,
        filled: dict[int, int],
        tolerant: bool,
    ) -> Iterator[tuple[int, bytes, bytes | None]]:
        """:meth:`cells`, the holes this reader fills noted in ``filled`` (offset: span)."""
        prefix = generation_prefix(topic, generation)
        end = past_last(prefix)
        expected, size, previous_time, first_look = start, first, 0, True
        while expected <= (MAX_POSITION if last is None else last):
            chunk = self.lookup.scan(message_key(topic, generation, expected), end, size)
            for key, value in chunk:
                position = position_of(key)
                if position < expected:
                    continue
                detour = position > expected
                if detour and first_look:  # inside the span of the row below the start?
                    first_look = False
                    below = self.messages.scan(message_key(topic, generation, expected), prefix, limit=1, reverse=True)
                    if below:
                        under, cells = below[0]
                        after = peek_row(under, cells.get(MESSAGE_COLUMN)).next_position(position_of(under))
                        if after > expected:
                            expected = after
                            break
                first_look = False
                filling = False  # a hole below ``above`` was filled (or found written) at ``expected``
                if detour:
                    swept = sequencer.low_water(self.messages, topic, generation)
                    if swept > expected:  # the sweeper deleted below this: jump (and look again)
                        expected = swept
                        break
                    above = position
                    again = self.lookup.scan(message_key(topic, generation, expected), key, 1)  # a region race?
                    if again:
                        key, value = again[0]
                        position = position_of(key)
                    if position > expected:
                        found = self._hole(topic, generation, expected, above, previous_time, filled)
                        if found is None and last is not None:
                            green.sleep(0.02)
                            break  # look again from the same offset
                        if found is None:
                            return  # not due yet: this poll ends before the hole
                        key, value = found
                        position, filling = expected, True
                while True:
                    if self._holes:
                        self._passed((topic, generation, position))
                    head = _head(key, value, tolerant)
                    yield position, key, value
                    if head is not None:
                        previous_time = head.publish_time
                    expected = position + (1 if head is None else head.span or 1)
                    if not (filling and expected < above and (last is None or expected <= last)):
                        break
                    # the offsets up to the row above are due at once (see _hole): fill them one after
                    # the other, one if-absent put each, without scanning again in between
                    found = self._hole(topic, generation, expected, above, previous_time, filled)
                    if found is None:
                        break
                    (key, value), position = found, expected
                if detour:
                    break  # scan again from the new expected offset
            else:
                if len(chunk) < size:
                    return  # the tail as it was when this poll read it
                size = CHUNK_ROWS

    def _hole(
        self, topic: TopicId, generation: int, offset: int, above: int, previous_time: int, filled: dict[int, int]
    ) -> tuple[bytes, bytes] | None:
        """The row (key, cell) now at ``offset``, a hole below the row at ``above``: None while it is not
        due, else a skip marker this reader put there or the batch that was first. A hole is due H after
        HBase stored the row above it (by HBase's clock, so a reader in a new process passes it as soon
        as one that has watched it), or H after this reader first saw it, whichever comes first. The
        offsets after it up to ``above`` are due at once (their writers reserved before the row above)."""
        where, now = (topic, generation, offset), time.monotonic()
        with self._holes_lock:
            sighting = self._holes.get(where)
        if sighting is None:
            sighting = _Sighting(now, self._stored_at(topic, generation, above))
            with self._holes_lock:
                sighting = self._holes.setdefault(where, sighting)
        wait = self.hole_wait()
        if now - sighting.seen < wait and not (
            sighting.above_stored is not None and self.hbase_now() >= sighting.above_stored + wait * 1000
        ):
            return None
        found, value = sequencer.fill_cell(self.messages, topic, generation, offset, 1, previous_time, index=False)
        key = message_key(topic, generation, offset)
        following = found.next_position(offset)
        if following < above:
            with self._holes_lock:
                self._holes.setdefault((topic, generation, following), _Sighting(sighting.seen, 0))
        if found.skip and found.writer_id == bytes(16):  # a reader's marker (this one's, or the same bytes)
            filled[offset] = 1
            if len(filled) >= CHUNK_ROWS:
                sequencer.index_skips(self.messages, topic, generation, filled)
                filled.clear()
            CLIENT_METRICS.holes_filled.inc()
            with self._holes_lock:
                self.holes_filled += 1
        return key, value

    def _stored_at(self, topic: TopicId, generation: int, position: int) -> int | None:
        """When HBase stored the row at ``position`` (its cell's timestamp, HBase's clock), or None if this
        reader has no HBase clock to compare it with."""
        if self.hbase_clock is None:
            return None
        found = self.messages.get_versions(message_key(topic, generation, position), MESSAGE_COLUMN, 1)
        return found[0][1] if found else None

    def _passed(self, where: tuple[TopicId, int, int]) -> None:
        """A hole waited on is passed (its row came, or was filled): record how long it held readers."""
        with self._holes_lock:
            sighting = self._holes.pop(where, None)
            if sighting is None:
                return
            waited = time.monotonic() - sighting.seen
            self.longest_hole_wait = max(self.longest_hole_wait, waited)
        CLIENT_METRICS.hole_wait.observe(waited)
