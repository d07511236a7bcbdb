"""Consuming: read a topic generation's batch rows in position order and turn them into messages.

* TTL is applied at read: expired rows are never returned, swept or not.
* Positions are dense, so a gap below a row that exists means either the sweeper removed those rows
  or the scan crossed a region boundary while a writer added them; the gap is scanned again, and
  what is still missing then was swept.
* With a transaction, a row is accepted (no pointer, or visible), skipped (rolled back or invalid),
  or stops the whole fetch (in progress or above the read pointer), so order is kept. A subscription's
  committed-only read applies the same rule with the installation's transaction state
  (``committed``: :class:`~tms_hbase.tx.committed.CommittedReads`).
* A pointer row expands to its payload-table rows in store order.

In a sequencer generation (docs/ordering.md) a row's key is its first offset and the next row starts at
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast

from tms_hbase.errors import CorruptData, InvalidArgument
from tms_hbase.installation.hbase_clock import HBaseClock
from tms_hbase.installation.metadata import MetadataCache
from tms_hbase.installation.settings import DEFAULT_TAIL_CACHE_SECONDS
from tms_hbase.model import checks, record
from tms_hbase.model.clock import now_ms
from tms_hbase.model.message import Message
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.message_id import encode as encode_id
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.record import NONE, Extra
from tms_hbase.model.rows import (
    EXTRA_COLUMN,
    F_COUNTS,
    F_EXPIRY,
    F_POINTER,
    F_SKIP,
    F_SPAN,
    F_TX,
    MAX_POSITION,
    MESSAGE_COLUMN,
    PAYLOAD_COLUMN,
    VERSION,
    BatchRow,
    RowHeader,
    RowSlice,
    decode_row,
    generation_prefix,
    message_count,
    message_key,
    next_position,
    past_last,
    payload_key,
    peek_row,
    pointer_prefix,
    position_of,
    sequence_of,
)
from tms_hbase.model.topic import TopicId
from tms_hbase.publish import sequencer
from tms_hbase.runtime import green
from tms_hbase.storage.hbase import KEYS_ONLY, Table
from tms_hbase.tx.committed import CommittedReads
from tms_hbase.tx.transaction import Transaction

CHUNK_ROWS = 64
CHAIN_SCAN_ROWS = 16  # a chain seek's search stops this close and lets HBase filter the rest
NEAR_FRACTION = 8  # a sequencer seek's search stops once its two rows are dated within D / this (see below)
FINAL_FRACTION = 64  # ... or within D / this below the frontier, where rows are final and often in order
GUESS_MISSES = 2  # a search stops guessing from the dates and halves once this many guesses failed to halve
PAYLOAD_CHUNK = 1000
_FLAGS = (F_TX, F_POINTER, F_EXPIRY, F_COUNTS, F_SKIP, F_SPAN)  # every flag a row may carry, one bit each
# An HBase filter that keeps the rows whose cell carries a transaction write pointer: the cell starts
# with the format version (1) and the flags byte, which has F_TX (1) set. Only the first two bytes are
# matched, both below 0x80, so the regex sees them unchanged whatever charset HBase decodes with.
_TX_FLAGS = "".join(f"\\x{flags:02x}" for flags in range(0x80) if flags & F_TX)
_TRANSACTIONAL_ROWS = f"ValueFilter(=, 'regexstring:^\\x{VERSION:02x}[{_TX_FLAGS}]')"


def _dated_at_or_after(time_ms: int) -> bytes:
    """An HBase filter keeping the rows that hold messages (no skip marker) dated at or after ``time_ms``.

    A cell starts with the version byte, the flags byte and the publish time (8 bytes big-endian; times
    are >= 0, so byte order is time order). HBase compares values as unsigned bytes, so for each flags
    value without F_SKIP the cells of that kind dated >= ``time_ms`` are one byte range [version flags
    time, version flags+1). The filter is bytes: a regex cannot do it (HBase decodes values as UTF-8, so
    bytes >= 0x80 are lost) and a str would be sent UTF-8 encoded. A quote inside a quoted value doubles.
    """

    def value(raw: bytes) -> bytes:
        return b"'binary:" + raw.replace(b"'", b"''") + b"'"

    kinds = [
        b"(ValueFilter(>=, "
        + value(bytes([VERSION, flags]) + time_ms.to_bytes(8, "big"))
        + b") AND ValueFilter(<, "
        + value(bytes([VERSION, flags + 1]))
        + b"))"
        for flags in range(2 * max(_FLAGS))
        if not flags & F_SKIP
    ]
    return b"(" + b" OR ".join(kinds) + b")"


@dataclass
class Cursor:
    """Where a fetch has read to (pass one to :meth:`MessageReader.fetch`): ``next_position``, where the
    row after the last row it passed starts (None: it passed none yet). A consumer that has delivered
    everything up to there can read exactly the next row with :meth:`MessageReader.row_at`."""

    next_position: int | None = None


@dataclass(frozen=True)
class PositionRange:
    """Batch-row positions ``first``..``last`` (inclusive) of one topic generation; empty when last < first."""

    generation: int
    first: int
    last: int

    def __len__(self) -> int:
        return max(0, self.last - self.first + 1)


@dataclass(frozen=True)
class BatchInfo:
    """What one batch row says about itself, its payloads unread.

    ``tx_write_pointer`` is None for a non-transactional row and negative once rolled back or marked
    invalid; ``messages`` is the number of inline payloads, or None for a pointer row (its messages
    are payload-table rows: see :meth:`MessageReader.stored_sequences`).
    """

    position: int
    publish_time: int
    tx_write_pointer: int | None
    messages: int | None


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


@dataclass(frozen=True)
class _Start:
    position: int
    index: int  # first message index wanted in the start row
    inclusive: bool


class _Pivots:
    """Where a time seek's search probes next: the offset where the dates of the two rows it holds put the
    target (an interpolation search: rows are written at a rate that changes slowly, so a topic of a million
    messages takes a few probes, not log2 of its rows), moved past it by a lean (``lean_offsets`` offsets
    and ``lean_ms`` of dates), below it at first and then on the side that did not move last, so that the
    search closes in from both sides; while probes keep landing on the same side the lean doubles. Once the
    dates misled it :data:`GUESS_MISSES` times (a probe after the first that failed to halve the offsets left:
    the first lands near one end when it lands near the target) it probes the middle, so a search never takes
    more than those probes and the first beyond a binary search's."""

    def __init__(self, lean_offsets: int = 0, lean_ms: int = 0) -> None:
        self.lean_offsets = lean_offsets
        self.lean_ms = lean_ms
        self.side = -1  # where the next probe aims: below the target (-1) or above it (1)
        self.reach = 1  # times the lean: doubles while probes land on the side they aimed away from
        self.misses = 0
        self.probes = 0
        self.left = 0  # the offsets left before the last probe

    def next(
        self, start: int, stop: int, low: tuple[int, int] | None, high: tuple[int, int] | None, time_ms: int
    ) -> int:
        """An offset in [``start``, ``stop``] to probe for ``time_ms``, given a row ``low`` below and ``high``
        above, each (offset, date), if both are known and dated apart."""
        self.left = stop - start
        if low is None or high is None or high[1] <= low[1] or self.misses >= GUESS_MISSES:
            return (start + stop) // 2
        lean = self.side * self.reach
        aim = time_ms + lean * self.lean_ms
        guess = low[0] + (high[0] - low[0]) * (aim - low[1]) // (high[1] - low[1]) + lean * self.lean_offsets
        return min(max(guess, start), stop)

    def narrowed(self, start: int, stop: int, *, raised_low: bool) -> None:
        """The probe left [``start``, ``stop``], having raised the low end (else lowered the high end): a probe
        after the first that did not halve the offsets is a miss; the next one aims past the target on the
        other side."""
        self.probes += 1
        if stop - start > self.left // 2 and self.probes > 1:
            self.misses += 1
        side = 1 if raised_low else -1
        self.reach = self.reach * 2 if side == self.side else 1
        self.side = side


class MessageReader:
    """Fetches messages in order from the ``messages`` and ``payloads`` tables; every fetch is a poll
    that ends at the topic's current tail (or, in a sequencer generation, at a hole not yet due to fill).

    ``tail_cache_seconds`` says the installation's tail-cache time C (re-read as it may change; during a
    change, the larger value): W, H and D of sequencer generations follow from it (docs/guarantees.md);
    without it C is the default 30 s. ``hbase_clock`` (HBase's clock, :mod:`.hbase_clock`) lets a hole be
    filled H after HBase stored the row above it, whoever first saw it; without it a hole is due H after
    this reader first saw it, and seeks judge settling by this host's clock.
    """

    def __init__(
        self,
        messages: Table,
        payloads: Table,
        topics: MetadataCache,
        tail_cache_seconds: Callable[[], float] | None = None,
        hbase_clock: HBaseClock | None = None,
    ) -> None:
        self.messages = messages
        self.payloads = payloads
        self.topics = topics
        self.tail_cache_seconds = tail_cache_seconds or (lambda: DEFAULT_TAIL_CACHE_SECONDS)
        self.hbase_clock = hbase_clock
        self._holes: dict[tuple[TopicId, int, int], _Sighting] = {}  # each hole waited on
        self._holes_lock = green.no_wait_lock()
        self._firsts: dict[bytes, tuple[int, RowHeader]] = {}  # a batch that was a generation's first row, by prefix
        self.holes_filled = 0  # skip markers this reader put into holes
        self.longest_hole_wait = 0.0  # seconds, first sighting to passing, of the longest hole met

    def hole_wait(self) -> float:
        """H: how long a hole below a row that exists is waited on before it is filled."""
        return sequencer.hole_wait(self.tail_cache_seconds())

    def disorder_ms(self) -> int:
        """D of sequencer generations (``sequencer.disorder``), in ms."""
        return int(sequencer.disorder(self.tail_cache_seconds()) * 1000)

    def _sequenced(self, topic: TopicId, generation: int) -> bool:
        meta = self.topics.get(topic)
        return meta.sequencer and meta.generation == generation

    def fetch(
        self,
        topic: TopicId,
        start_message: bytes | None = None,
        start_time: int | None = None,
        inclusive: bool = True,
        limit: int | None = None,
        transaction: Transaction | None = None,
        cursor: Cursor | None = None,
        committed: CommittedReads | None = None,
    ) -> Iterator[Message]:
        """Validate and place the start now (bad input raises here), then iterate lazily; ``cursor`` is kept
        at the row after the last one passed. ``committed``: judge transactional rows by the installation's
        transaction state instead of a transaction's (a subscription's committed-only read)."""
        checks.fetch_args(start_message, start_time, inclusive, limit, transaction)
        placed = self._placed(topic, start_message, start_time, inclusive)
        return self._iterate(*placed, limit, transaction or committed, cursor=cursor)

    def fetch_rows(
        self,
        topic: TopicId,
        start_message: bytes | None = None,
        inclusive: bool = True,
        transaction: Transaction | None = None,
        committed: CommittedReads | None = None,
    ) -> Iterator[RowSlice]:
        """The messages :meth:`fetch` gives, as the slices of the rows that hold them, in order: no message
        object and no payload copy each (inline payloads are memoryview slices of the row's cell); for a
        service that writes them out as they are (the gateway's consumer pages)."""
        checks.fetch_args(start_message, None, inclusive, None, transaction)
        topic, generation, start, floor, sequenced = self._placed(topic, start_message, None, inclusive)
        view = transaction or committed
        return self._slices(topic, generation, start, floor, None, view, sequenced=sequenced, views=True)

    def _placed(
        self, topic: TopicId, start_message: bytes | None, start_time: int | None, inclusive: bool
    ) -> tuple[TopicId, int, _Start, int, bool]:
        """Where a fetch starts: (topic, generation, start, the TTL's floor in ms, sequencer generation)."""
        meta = self.topics.get(topic)
        generation = meta.generation
        floor = self.hbase_now() - meta.ttl * 1000
        if start_message is not None:
            mid = MessageId.decode(start_message)
            if mid.generation > generation:
                raise InvalidArgument(f"message id is from generation {mid.generation}; {topic} is at {generation}")
            if mid.generation == generation:
                start = _Start(mid.position, mid.index, inclusive)
            else:  # from before the topic was re-created: the new generation is all new
                start = _Start(self.seek(topic, generation, floor, exact=False), 0, True)
        elif start_time is None or start_time + (0 if inclusive else 1) <= floor:
            start = _Start(self.seek(topic, generation, floor, exact=False), 0, True)
        else:
            start = _Start(self.seek(topic, generation, start_time + (0 if inclusive else 1)), 0, True)
        return topic, generation, start, floor, meta.sequencer

    def fetch_range(
        self, topic: TopicId, start: MessageId, end: MessageId | None = None, transaction: Transaction | None = None
    ) -> Iterator[Message]:
        """The messages with ``start`` <= id < ``end`` (to the tail if ``end`` is None), in order; both ids
        of the topic's current generation. With a transaction it stops where a fetch would."""
        checks.fetch_args(None, None, True, None, transaction)
        meta = self.topics.get(topic)
        for edge in (start, end):
            if edge is not None and edge.generation != meta.generation:
                raise InvalidArgument(
                    f"message id {bytes(edge).hex()} is from generation {edge.generation}; "
                    f"{topic} is at generation {meta.generation}"
                )
        if end is not None and end <= start:
            return iter(())
        last = None if end is None else (end.position if end.index > 0 else end.position - 1)
        stop = None if end is None else (end.position, end.index)
        floor = self.hbase_now() - meta.ttl * 1000
        start_at = _Start(start.position, start.index, True)
        return self._iterate(topic, meta.generation, start_at, floor, meta.sequencer, None, transaction, last, stop)

    def row_at(self, topic: TopicId, generation: int, position: int) -> tuple[list[Message], int] | None:
        """The messages of the batch row at exactly ``position`` (one get, no scan) and where the next row
        starts; None unless a plain batch is there: no row, a skip marker, a pointer or transactional row,
        an expired one, or another generation than the topic's (read those with :meth:`fetch`)."""
        if self.topics.get(topic).generation != generation:
            return None
        value = self.messages.get(message_key(topic, generation, position), [MESSAGE_COLUMN]).get(MESSAGE_COLUMN)
        return None if value is None else self.row_of(topic, generation, position, value)

    def row_of(self, topic: TopicId, generation: int, position: int, value: bytes) -> tuple[list[Message], int] | None:
        """What :meth:`row_at` gives for ``value``, the batch row cell stored at ``position`` (a doorbell ring
        carries it, authenticated: :mod:`~tms_hbase.consume.doorbell`), decoded as a read decodes it; None
        unless it holds a plain live batch of the topic's generation. CorruptData if it does not decode."""
        meta = self.topics.get(topic)
        if meta.generation != generation:
            return None
        row = decode_row(message_key(topic, generation, position), value)
        now = self.hbase_now()
        if row.skip or row.pointer or row.tx_pointer is not None or _expired(row, now - meta.ttl * 1000, now):
            return None
        part = RowSlice(generation, position, 0, row.publish_time, row.payloads, row.extras)
        return list(_messages(part)), next_position(position, row.span)

    # -- positions ----------------------------------------------------------------------------

    def seek(self, topic: TopicId, generation: int, time_ms: int, *, exact: bool = True) -> int:
        """The first position, in order, of a row holding messages dated >= ``time_ms`` (the next position
        past the last row if none). In a chain generation (times non-decreasing) a search over positions
        (:class:`_Pivots`) that steps over swept gaps: a few reads, at most O(log n). In a sequencer generation see
        :meth:`_sequencer_seek`: rows after the answer may be dated up to D earlier (Kafka's
        offsetsForTimes semantics; docs/ordering.md). With ``exact=False`` a sequencer generation answers
        with the search's lower bound only: no row dated >= ``time_ms`` lies before it, rows up to
        D older may lie after it (for estimates, and for reads that skip what is too old anyway)."""
        if self._sequenced(topic, generation):
            if not exact:
                prefix = generation_prefix(topic, generation)
                return self._sequencer_lower_bound(prefix, time_ms - self.disorder_ms(), first=True)
            return self._sequencer_seek(topic, generation, time_ms)
        prefix = generation_prefix(topic, generation)
        first = self._first(prefix)
        if first is None:
            return 1
        if first[1].publish_time >= time_ms:
            return first[0]
        last = self._last(prefix)
        if last[1].publish_time < time_ms:
            return last[0] + 1
        lo, hi, bound = first[0], last[0], last[0]  # time(lo) < t <= time(hi); no row in [bound, hi)
        below, above = (lo, first[1].publish_time), (hi, last[1].publish_time)
        pivots = _Pivots(lean_offsets=CHAIN_SCAN_ROWS // 2)
        while bound - lo > CHAIN_SCAN_ROWS:
            mid = pivots.next(lo + 1, bound - 1, below, above, time_ms)
            found = self._first_at_or_after(prefix, mid, bound)
            raised = found is not None and found[1].publish_time < time_ms
            if found is None:
                bound = mid  # nothing in [mid, bound)
            elif raised:
                lo = found[0]
                below = (lo, found[1].publish_time)
            else:
                hi = bound = found[0]
                above = (hi, found[1].publish_time)
            pivots.narrowed(lo + 1, bound - 1, raised_low=raised)
        # the last few rows: one scan of one row that HBase filters (times are non-decreasing, so the
        # first row it keeps is the answer)
        return self._first_dated(prefix, lo + 1, hi, time_ms)

    def _sequencer_seek(self, topic: TopicId, generation: int, time_ms: int) -> int:
        """The exact seek of a sequencer generation (docs/ordering.md, "Time seek"):

        0. unless every row is settled (the last row is a batch older than :func:`sequencer.settled`), the
           generation's frontier (:func:`sequencer.frontier`): below it every offset holds a row, final. If
           a batch below it is dated >= ``time_ms``, the first such is the answer: a search below
           the frontier with its own (measured) disorder instead of D, and one filtered scan;
        1. ``low`` = the offset after the last row dated before ``time_ms`` − D
           (:meth:`_sequencer_lower_bound`), at least the frontier: a row before it, written or not yet, is
           dated before ``time_ms``;
        2. the first row from ``low`` on that holds messages dated >= ``time_ms``: one scan of one row
           that HBase filters (:func:`_dated_at_or_after`), so the rows in between never leave it;
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
            low = self._sequencer_lower_bound(prefix, time_ms - closed.disorder, near_ms=narrow, top=closed)
            answer = self._first_dated(prefix, low, closed.offset, time_ms)
            if answer < closed.offset:
                return answer  # (else that batch was swept: every batch left below the frontier is dated before)
        low = self._sequencer_lower_bound(prefix, time_ms - disorder, near_ms=disorder // NEAR_FRACTION, top=last)
        low = max(low, closed.offset)  # every batch below the frontier is dated before time_ms
        if last[0] < low:
            return low  # no row from ``low`` on: no hole either
        found = self.messages.scan(
            message_key(topic, generation, low),
            past_last(prefix),
            limit=1,
            columns=[MESSAGE_COLUMN],
            filter=_dated_at_or_after(time_ms),
        )
        if found:
            key, cells = found[0]
            position, header = position_of(key), peek_row(key, cells.get(MESSAGE_COLUMN))
            answer, below = position, position - 1
        else:  # the last row as it is now (rows may have come since the search read it)
            position, header = self._last(prefix)
            answer, below = header.next_position(position), position
        # a skip marker's time is not its writer's clock reading (a fill carries an older row's), so only a
        # batch's time bounds the holes below it
        settled = header.publish_time + settle_ms
        if below < low or (not header.skip and self.hbase_now() > settled):
            return answer  # every hole below it is filled or can only be filled with a skip marker
        reached, landed, dates = low, None, []
        for at, key, cell in self.sequencer_cells(topic, generation, low, CHUNK_ROWS, below):
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

    def _sequencer_lower_bound(
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

        A search over offsets between the first row (:meth:`_first`) and ``top`` (:class:`_Pivots`: where the
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
        head = self._first(prefix) if first else None
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
        head = head or self._first(prefix)
        if head is None or head[0] >= bound or (head[1].skip and not first) or head[1].publish_time >= time_ms:
            return 1  # no row below ``bound``, or the first bounds nothing below ``time_ms``
        lo = None if head[1].skip else head  # the last batch known to be dated < time_ms (None: none yet)
        start = 1 if lo is None else lo[1].next_position(lo[0])  # no row in [lo's end, start)
        pivots = _Pivots(lean_ms=near_ms // 2)
        while start < bound and (lo is None or above is None or above[1] - lo[1].publish_time > near_ms):
            below = None if lo is None else (lo[0], lo[1].publish_time)
            mid = pivots.next(start, bound - 1, below, above, time_ms)
            found = self._row_at_or_before(prefix, mid, start)
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

    def positions(self, topic: TopicId, start_time: int | None = None, end_time: int | None = None) -> PositionRange:
        """The positions of the current generation from the first row not expired and published at or
        after ``start_time`` up to the last row before the first one published at or after ``end_time``
        (ms; None: unbounded; both found with :meth:`seek`). In a chain generation every row in the span
        is dated in [start_time, end_time); in a sequencer generation rows in it may be dated up to D
        outside (docs/ordering.md), as with Kafka's offsetsForTimes, and without a start time (or one
        before the TTL) the span starts at the seek's lower bound: reads skip expired rows anyway."""
        meta = self.topics.get(topic)
        generation = meta.generation
        floor = self.hbase_now() - meta.ttl * 1000
        if start_time is None or start_time <= floor:
            first = self.seek(topic, generation, floor, exact=False)
        else:
            first = self.seek(topic, generation, start_time)
        last = self.tail(topic, generation) if end_time is None else self.seek(topic, generation, end_time) - 1
        return PositionRange(generation, first, last)

    def tail(self, topic: TopicId, generation: int) -> int:
        """The last position of a generation (0 if it has no row): one reverse scan of one row."""
        last = self.messages.last_row(generation_prefix(topic, generation))
        return 0 if last is None else position_of(last[0])

    def batches(
        self, topic: TopicId, generation: int, first: int, last: int, *, transactional_only: bool = False
    ) -> Iterator[BatchInfo]:
        """The batch rows at positions ``first``..``last``, described without their payloads being
        decoded. ``transactional_only`` keeps only rows with a write pointer, filtered in HBase."""
        prefix = generation_prefix(topic, generation)
        stop = message_key(topic, generation, last + 1) if last < MAX_POSITION else past_last(prefix)
        start = first
        while start <= last:
            key = message_key(topic, generation, start)
            found = self.messages.scan(
                key, stop, limit=CHUNK_ROWS, filter=_TRANSACTIONAL_ROWS if transactional_only else None
            )
            rows = [(k, v.get(MESSAGE_COLUMN)) for k, v in found]
            for key, cell in rows:
                head = peek_row(key, cell)  # CorruptData naming the row if it does not decode
                count = message_count(cast(bytes, cell))  # peek_row raised CorruptData if there was no cell
                yield BatchInfo(position_of(key), head.publish_time, head.tx_pointer, count)
            if len(rows) < CHUNK_ROWS or position_of(rows[-1][0]) == MAX_POSITION:
                return
            start = position_of(rows[-1][0]) + 1

    def stored_sequences(
        self,
        topic: TopicId,
        generation: int,
        write_pointer: int,
        start: int = 0,
        stop: int | None = None,
        limit: int = PAYLOAD_CHUNK,
        *,
        reverse: bool = False,
    ) -> list[int]:
        """Sequences in [start, stop) of the payloads stored under a write pointer: the lowest ``limit`` of
        them in ascending order, or the highest in descending order with ``reverse``. Keys only."""
        prefix = pointer_prefix(topic, generation, write_pointer)
        low = payload_key(topic, generation, write_pointer, max(start, 1))  # sequence 0: the counter row's place
        high = past_last(prefix) if stop is None else payload_key(topic, generation, write_pointer, stop)
        if high <= low:
            return []
        below_low = prefix if start <= 1 else payload_key(topic, generation, write_pointer, start - 1)
        rows = self.payloads.scan(
            high if reverse else low,
            below_low if reverse else high,  # a reverse scan stops above its (exclusive) stop key
            limit=limit + 1 if reverse else limit,
            reverse=reverse,
            filter=KEYS_ONLY,
        )
        keys = [k for k, _ in rows]
        if reverse:  # a reverse scan starts at its (inclusive) start key: drop ``high`` itself
            keys = [k for k in keys if k < high][:limit]
        return [sequence_of(k) for k in keys]

    def _first_at_or_after(self, prefix: bytes, position: int, bound: int | None) -> tuple[int, RowHeader] | None:
        """The first row at ``position`` or after it (below ``bound``): a get, then a scan if swept."""
        key = prefix + position.to_bytes(8, "big")
        data = self.messages.get(key)
        if data:
            return position, peek_row(key, data.get(MESSAGE_COLUMN))
        return self._first_row(
            prefix, position, past_last(prefix) if bound is None else prefix + bound.to_bytes(8, "big")
        )

    def _first(self, prefix: bytes) -> tuple[int, RowHeader] | None:
        """The generation's first row (None: it has none), or a batch that was its first: this reader keeps the
        first batch it reads. Rows are written once and the sweeper deletes only a prefix, so a batch that was
        first still bounds the dates of every row before it and still lies at or before every row dated later
        (in a sequencer generation, within D: a hole below it that a batch lands in later is dated within D of
        it too), which is all a seek asks of it. The first time: one get of offset 1, then one scan if it is
        empty."""
        known = self._firsts.get(prefix)
        if known is None:
            known = self._first_at_or_after(prefix, 1, None)
            if known is not None and not known[1].skip:
                self._firsts[prefix] = known
        return known

    def _first_row(self, prefix: bytes, position: int, stop: bytes) -> tuple[int, RowHeader] | None:
        """The first row at ``position`` or after it, below row key ``stop``: one scan of one row."""
        rows = self._scan(prefix + position.to_bytes(8, "big"), stop, 1)
        return (position_of(rows[0][0]), peek_row(*rows[0])) if rows else None

    def _first_dated(self, prefix: bytes, start: int, last: int, time_ms: int) -> int:
        """The position of the first row in [``start``, ``last``] holding messages dated >= ``time_ms`` (``last``
        if none is before it): one scan of one row that HBase filters."""
        if start >= last:
            return last
        found = self.messages.scan(
            prefix + start.to_bytes(8, "big"),
            prefix + last.to_bytes(8, "big"),
            limit=1,
            columns=[MESSAGE_COLUMN],
            filter=_dated_at_or_after(time_ms),
        )
        return position_of(found[0][0]) if found else last

    def _row_at_or_before(self, prefix: bytes, position: int, floor: int) -> tuple[int, RowHeader] | None:
        """The last row at ``position`` or before it (not before ``floor``): one reverse scan of one row."""
        rows = self.messages.scan(
            prefix + position.to_bytes(8, "big"),
            prefix + (floor - 1).to_bytes(8, "big"),
            limit=1,
            columns=[MESSAGE_COLUMN],
            reverse=True,
        )
        return (position_of(rows[0][0]), peek_row(rows[0][0], rows[0][1].get(MESSAGE_COLUMN))) if rows else None

    def _last(self, prefix: bytes) -> tuple[int, RowHeader]:
        last = self.messages.last_row(prefix)
        assert last is not None, "called after a row of the generation was found"
        key, data = last
        return position_of(key), peek_row(key, data.get(MESSAGE_COLUMN))

    def _scan(self, start: bytes, stop: bytes, limit: int) -> list[tuple[bytes, bytes | None]]:
        """Rows as (key, their d:m cell or None)."""
        with CLIENT_METRICS.fetch_seconds.time():
            return [(k, v.get(MESSAGE_COLUMN)) for k, v in self.messages.scan(start, stop, limit=limit)]

    # -- rows to messages ---------------------------------------------------------------------

    def _rows(
        self, topic: TopicId, generation: int, start: int, first: int, views: bool = False
    ) -> Iterator[tuple[int, BatchRow]]:
        """Rows from ``start`` in position order, in chunks (the first of ``first`` rows: a fetch with a
        small limit reads no more); gaps are scanned again (see module doc). ``views``: payloads as views
        of the cells (:meth:`BatchRow.decode`)."""
        prefix = generation_prefix(topic, generation)
        end = past_last(prefix)
        expected = start
        size = first
        while expected <= MAX_POSITION:  # past the last position there is nothing to read
            chunk = self._scan(message_key(topic, generation, expected), end, size)
            for key, value in chunk:
                position = position_of(key)
                if position > expected:  # rows the scan may have raced past, or swept ones
                    yield from self._range(topic, generation, expected, key, views)
                yield position, decode_row(key, value, views=views)
                expected = position + 1
            if len(chunk) < size:
                return  # the tail as it was when this poll read it
            size = CHUNK_ROWS

    def _range(
        self, topic: TopicId, generation: int, start: int, stop: bytes, views: bool
    ) -> Iterator[tuple[int, BatchRow]]:
        """Every row from position ``start`` up to (not including) row key ``stop``."""
        while True:
            chunk = self._scan(message_key(topic, generation, start), stop, CHUNK_ROWS)
            for key, value in chunk:
                start = position_of(key) + 1
                yield start - 1, decode_row(key, value, views=views)
            if len(chunk) < CHUNK_ROWS:
                return

    def _sequencer_rows(
        self, topic: TopicId, generation: int, start: int, first: int, last: int | None, views: bool
    ) -> Iterator[tuple[int, BatchRow]]:
        """The batch rows of a sequencer generation from offset ``start`` in order, skip markers left
        out, up to the tail or a hole not yet due to fill (see module doc). A gap is a hole unless it lies
        below the generation's low-water mark (swept). ``start`` may lie inside a row's span (a range cut by
        offsets): that row belongs before it, so reading begins after the span. With ``last`` (a range
        read, which must reach its end) a hole not due yet is waited on instead of ending the read. The
        holes it fills are recorded in the skip index once per run of them (and when it stops early)."""
        for position, key, value in self.sequencer_cells(topic, generation, start, first, last):
            row = decode_row(key, value, views=views)
            if not row.skip:
                yield position, row

    def sequencer_cells(
        self,
        topic: TopicId,
        generation: int,
        start: int,
        first: int = CHUNK_ROWS,
        last: int | None = None,
        *,
        tolerant: bool = False,
    ) -> Iterator[tuple[int, bytes, bytes | None]]:
        """The rows of a sequencer generation as :meth:`_sequencer_rows` passes them, skip markers
        included, as (position, key, cell): what the inspector shows. ``tolerant``: a cell that does not
        decode is passed as a row of span 1 instead of raising CorruptData (the inspector reports it)."""
        filled: dict[int, int] = {}
        try:
            yield from self._sequencer_scan(topic, generation, start, first, last, filled, tolerant)
        finally:
            if filled:
                sequencer.index_skips(self.messages, topic, generation, filled)

    def _sequencer_scan(
        self,
        topic: TopicId,
        generation: int,
        start: int,
        first: int,
        last: int | None,
        filled: dict[int, int],
        tolerant: bool,
    ) -> Iterator[tuple[int, bytes, bytes | None]]:
        """:meth:`sequencer_cells`, the holes this reader fills noted in ``filled`` (offset: span)."""
        prefix = generation_prefix(topic, generation)
        end = past_last(prefix)
        expected, size, previous_time, first_look = start, first, 0, True
        while expected <= (MAX_POSITION if last is None else last):
            chunk = self._scan(message_key(topic, generation, expected), end, size)
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
                    again = self._scan(message_key(topic, generation, expected), key, 1)  # a region race?
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

    def hbase_now(self) -> int:
        """HBase's clock if this reader has it, else this host's (ms)."""
        return now_ms() if self.hbase_clock is None else self.hbase_clock.now_ms()

    def _passed(self, where: tuple[TopicId, int, int]) -> None:
        """A hole waited on is passed (its row came, or was filled): record how long it held readers."""
        with self._holes_lock:
            sighting = self._holes.pop(where, None)
            if sighting is None:
                return
            waited = time.monotonic() - sighting.seen
            self.longest_hole_wait = max(self.longest_hole_wait, waited)
        CLIENT_METRICS.hole_wait.observe(waited)

    def _iterate(
        self,
        topic: TopicId,
        generation: int,
        start: _Start,
        floor: int,
        sequenced: bool,
        limit: int | None,
        transaction: Transaction | CommittedReads | None,
        end: int | None = None,
        stop: tuple[int, int] | None = None,
        *,
        cursor: Cursor | None = None,
    ) -> Iterator[Message]:
        """Messages from ``start``, at most ``limit``: those of :meth:`_slices`."""
        remaining = limit
        slices = self._slices(
            topic, generation, start, floor, limit, transaction, end, stop, sequenced=sequenced, cursor=cursor
        )
        for part in slices:
            for message in _messages(part):
                yield message
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return

    def _slices(
        self,
        topic: TopicId,
        generation: int,
        start: _Start,
        floor: int,
        limit: int | None,
        transaction: Transaction | CommittedReads | None,
        end: int | None = None,
        stop: tuple[int, int] | None = None,
        *,
        sequenced: bool = False,
        views: bool = False,
        cursor: Cursor | None = None,
    ) -> Iterator[RowSlice]:
        """The messages from ``start`` as row slices; ``end`` is the last position to read, ``stop`` the
        (position, index) of the first message not to return and ``limit`` (the messages wanted, if known)
        bounds the first scan; ``views``: inline payloads as views of their cells. ``cursor`` moves past each
        row passed."""
        now = self.hbase_now()
        first_chunk = CHUNK_ROWS if limit is None else min(limit, CHUNK_ROWS)  # every row holds a message or more
        if end is not None:
            first_chunk = max(1, min(first_chunk, end - start.position + 1))
        if sequenced:  # a range read waits on a hole below its end instead of ending before it
            rows = self._sequencer_rows(topic, generation, start.position, first_chunk, end, views)
        else:
            rows = self._rows(topic, generation, start.position, first_chunk, views)
        for position, row in rows:
            if end is not None and position > end:
                return
            if _expired(row, floor, now):
                if cursor is not None:
                    cursor.next_position = next_position(position, row.span)
                continue
            pointer = row.tx_pointer
            if transaction is not None and pointer is not None:
                if pointer < 0 or transaction.is_invalid(pointer):
                    if cursor is not None:
                        cursor.next_position = next_position(position, row.span)
                    continue
                if not transaction.is_visible(pointer):
                    return  # in progress or not yet committed for this reader: keep the order
            first_index = 0
            if position == start.position:
                first_index = start.index if start.inclusive else start.index + 1
            end_index = stop[1] if stop is not None and position == stop[0] else None
            if row.pointer:
                if pointer is None:  # the payloads are stored under the write pointer the row lacks
                    raise CorruptData(
                        f"corrupt message row at position {position} of {topic} (generation {generation}): it "
                        "points at stored payloads but has no transaction write pointer",
                        topic=str(topic),
                        generation=generation,
                        position=position,
                    )
                yield from self._stored(topic, generation, abs(pointer), position, row, first_index, end_index)
            else:
                payloads = row.payloads[first_index:end_index]
                if payloads:
                    extras = None if row.extras is None else row.extras[first_index:end_index]
                    yield RowSlice(generation, position, first_index, row.publish_time, payloads, extras)
            if cursor is not None:
                cursor.next_position = next_position(position, row.span)

    def _stored(
        self,
        topic: TopicId,
        generation: int,
        pointer: int,
        position: int,
        row: BatchRow,
        first_index: int,
        end_index: int | None = None,
    ) -> Iterator[RowSlice]:
        """The payload-table rows of a pointer row, in store order, from sequence ``first_index`` up to
        (not including) ``end_index``: a slice for each run of consecutive sequences."""
        sequence = max(first_index, 1)
        if end_index is None:
            stop = past_last(pointer_prefix(topic, generation, pointer))
        elif end_index <= sequence:
            return  # (HBase would read a scan from a key to the same key as a get of that row)
        else:
            stop = payload_key(topic, generation, pointer, end_index)
        while True:
            start = payload_key(topic, generation, pointer, sequence)
            keys, (payloads, extras) = self.payloads.scan_columns(
                start, stop, (PAYLOAD_COLUMN, EXTRA_COLUMN), PAYLOAD_CHUNK
            )
            run: list[bytes] = []
            run_extras: list[Extra] = []
            first = sequence
            for key, payload, extra in zip(keys, payloads, extras, strict=True):
                seq = sequence_of(key)
                if payload is None:
                    raise _corrupt_stored(topic, generation, position, seq, f"it has no {PAYLOAD_COLUMN.decode()} cell")
                if seq != first + len(run):  # a gap in the sequences: the next slice starts at seq
                    if run:
                        yield _stored_slice(generation, position, first, row.publish_time, run, run_extras)
                    run, run_extras, first = [], [], seq
                run.append(payload)
                try:
                    run_extras.append(NONE if extra is None else record.decode_all(extra, 0, 1)[0][0])
                except CorruptData as exc:
                    raise _corrupt_stored(topic, generation, position, seq, str(exc)) from None
                sequence = seq + 1
            if run:
                yield _stored_slice(generation, position, first, row.publish_time, run, run_extras)
            if len(keys) < PAYLOAD_CHUNK:
                return


def _corrupt_stored(topic: TopicId, generation: int, position: int, sequence: int, reason: str) -> CorruptData:
    """A stored payload of a pointer row that does not read: which one, of which row, and why."""
    return CorruptData(
        f"corrupt stored payload {sequence} of the message row at position {position} of {topic} "
        f"(generation {generation}): {reason}",
        topic=str(topic),
        generation=generation,
        position=position,
    )


def _expired(row: BatchRow, floor: int, now: int) -> bool:
    """Past the topic's TTL (published before ``floor``) or its own expiry (at or before ``now``)."""
    return row.publish_time < floor or (row.expires_at is not None and row.expires_at <= now)


def _messages(part: RowSlice) -> Iterator[Message]:
    """The messages of a row slice read without views (its payloads are copies)."""
    generation, position, time_ms = part.generation, part.position, part.publish_time
    payloads = cast("Sequence[bytes]", part.payloads)
    if part.extras is None:
        for index, payload in enumerate(payloads, part.first):
            yield Message(encode_id(generation, position, index), payload, time_ms)
    else:
        for index, (payload, (key, headers)) in enumerate(zip(payloads, part.extras, strict=True), part.first):
            yield Message(encode_id(generation, position, index), payload, time_ms, key, headers)


def _stored_slice(
    generation: int, position: int, first: int, publish_time: int, payloads: list[bytes], extras: list[Extra]
) -> RowSlice:
    """A run of stored payloads as a slice (its extras None when none of them has a key or headers)."""
    has_extras = any(extra is not NONE for extra in extras)
    return RowSlice(generation, position, first, publish_time, payloads, extras if has_extras else None)
