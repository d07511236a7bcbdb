"""The sequencer of a sequencer generation (docs/ordering.md, "The sequencer protocol"): offsets are
handed out by an HBase atomic increment, a batch row is written at its first offset once
(checkAndPut-if-absent), and offsets nobody will write are filled with skip markers.

* :func:`window` is W, how long after reading its clock a writer may still send the put for what it
  reserved (min(0.5 s, C/2), C the installation's tail-cache time); later, it fills its own
  reservation with a skip marker and reserves again. :func:`hole_wait` is H = 2 W, how long a reader
  waits on a hole below a row it saw before filling it.
* :func:`reserve` takes ``span`` offsets with one increment and returns the first.
* :func:`fill` puts a skip marker if-absent; the answer is what the position holds afterwards
  (:func:`fill_cell`: with the cell, so a reader filling a run of holes needs no read per offset).
* :func:`low_water` / :func:`raise_low_water`: below it everything is swept (readers jump over).
* :func:`frontier` / :func:`raise_frontier`: below it every offset holds a row or is swept, so no batch can
  land there any more; with the newest date and the disorder of the batches below it, a time seek finds
  its row there with a narrow search and one filtered scan, without reading rows.
* :func:`give_back` returns a writer's unused offsets at the tail to the counter (nobody reserved after
  them), so a writer that stops leaves nothing behind; :func:`skipped` counts the offsets skip markers
  hold in a range, from the **skip index** (one cell per marker in the counter row, written by whoever
  put the marker), so that counts and lag are messages, not offsets.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tms_hbase.errors import HBaseError, HBaseUnavailable
from tms_hbase.model.rows import (
    FRONTIER_COLUMN,
    LOW_WATER_COLUMN,
    MESSAGE_COLUMN,
    SEQUENCE_COLUMN,
    SKIPPED_PREFIX,
    RowHeader,
    counter_key,
    message_key,
    peek_row,
    skip_marker,
    skipped_column,
)
from tms_hbase.model.topic import TopicId
from tms_hbase.storage.hbase import Table

log = logging.getLogger(__name__)

MAX_WINDOW_SECONDS = 0.5


def window(tail_cache_seconds: float) -> float:
    """W: seconds a writer may take from reading its clock (before reserving) to sending its put."""
    return min(MAX_WINDOW_SECONDS, tail_cache_seconds / 2)


def hole_wait(tail_cache_seconds: float) -> float:
    """H: seconds a reader waits on a hole below a row it saw before filling it (2 W)."""
    return 2 * window(tail_cache_seconds)


def disorder(tail_cache_seconds: float) -> float:
    """D: seconds publish time may fall back along the order, W + W/2 + E with the clock skew E taken as C
    (a carved publish is dated up to W/2 after its block's increment; docs/ordering.md)."""
    return 1.5 * window(tail_cache_seconds) + tail_cache_seconds


def settled(tail_cache_seconds: float) -> float:
    """Seconds after a row's publish time (read on any host's clock) past which no batch can land in a hole
    below that row any more: 2 W + P + E, with the writer pause P and the clock skew E taken as C
    (docs/ordering.md, "Time seek"). A time seek that found its row trusts it once this has passed."""
    return 2 * window(tail_cache_seconds) + 2 * tail_cache_seconds


def reserve(messages: Table, topic: TopicId, generation: int, span: int) -> int:
    """Reserve ``span`` offsets of the generation (one increment); returns the first of them.

    A lost answer (HBaseUnavailable) may have reserved them anyway: nobody writes there, and the
    offsets are filled as a hole by readers. The caller simply reserves again.
    """
    last = messages.increment(counter_key(topic, generation), SEQUENCE_COLUMN, span)
    return last - span + 1


def give_back(messages: Table, topic: TopicId, generation: int, first: int, span: int) -> bool:
    """Return offsets ``first``..``first + span - 1`` to the counter if they are the last it handed out
    (one compare-and-set of the counter: nobody reserved after them, so no row exists above them and
    nobody waits on them). True if they were given back; the next reservation then starts at ``first``.
    A lost answer raises HBaseUnavailable: the caller must then assume nothing (the offsets may have
    been handed out again), write nothing there, and leave them to readers as a hole."""
    last = first + span - 1
    return messages.compare_and_set(
        counter_key(topic, generation),
        SEQUENCE_COLUMN,
        last.to_bytes(8, "big", signed=True),
        (first - 1).to_bytes(8, "big", signed=True),
    )


def skipped(messages: Table, topic: TopicId, generation: int, low: int, high: int) -> int:
    """Offsets held by skip markers at positions ``low`` <= p < ``high`` (one read of the counter row, the
    skip index filtered to that range in HBase). A marker whose filler died before indexing it is not
    counted until the sweeper's next pass indexes it (its offsets count as messages until then)."""
    if high <= low:
        return 0
    key = counter_key(topic, generation)
    low_q, high_q = (skipped_column(p).split(b":", 1)[1].decode() for p in (low, high))
    rows = messages.scan(key, key + b"\x00", limit=1, filter=f"ColumnRangeFilter('{low_q}', true, '{high_q}', false)")
    cells = [(column, value) for _, row in rows for column, value in row.items()]
    return sum(int.from_bytes(value, "big") for column, value in cells if column.startswith(SKIPPED_PREFIX))


def indexed_positions(counter_row: Mapping[bytes, object]) -> set[int]:
    """The positions of the skip markers that a counter row's skip index holds (its columns)."""
    return {int(column[len(SKIPPED_PREFIX) :], 16) for column in counter_row if column.startswith(SKIPPED_PREFIX)}


def index_of(messages: Table, topic: TopicId, generation: int) -> set[int]:
    """The positions of the skip markers that the generation's skip index holds (one read of its counter row)."""
    key = counter_key(topic, generation)
    rows = messages.scan(key, key + b"\x00", limit=1)
    return set().union(*(indexed_positions(row) for _, row in rows))


def prune_skips(messages: Table, topic: TopicId, generation: int, below: int) -> int:
    """Drop the skip index's cells of markers below ``below`` (the low-water mark: nothing below it is
    counted any more), so the counter row does not grow with the generation's history. Returns how many."""
    key = counter_key(topic, generation)
    high_q = skipped_column(below).split(b":", 1)[1].decode()
    rows = messages.scan(key, key + b"\x00", limit=1, filter=f"ColumnRangeFilter('k', true, '{high_q}', false)")
    columns = [column for _, row in rows for column in row if column.startswith(SKIPPED_PREFIX)]
    if columns:
        messages.delete_cells(key, columns)
    return len(columns)


def index_skips(messages: Table, topic: TopicId, generation: int, spans: dict[int, int]) -> None:
    """Record skip markers (position: span) in the skip index, in one blind, idempotent put: their filler
    does so after putting them, the sweeper for any it finds missing. A failure is logged, not raised: the
    markers stand, and their offsets count as messages until the sweeper's next pass indexes them."""
    cells = {skipped_column(position): span.to_bytes(8, "big") for position, span in spans.items()}
    try:
        messages.put(counter_key(topic, generation), cells)
    except HBaseError as exc:
        log.warning(
            "could not index %d skip markers of %s (generation %d) from offset %d: counts and lag include their "
            "%d offsets until the sweeper's next pass indexes them: %s",
            len(spans),
            topic,
            generation,
            min(spans),
            sum(spans.values()),
            exc,
        )


def _index(messages: Table, topic: TopicId, generation: int, position: int, span: int, index: bool) -> None:
    if index:
        index_skips(messages, topic, generation, {position: span})


def release(
    messages: Table, topic: TopicId, generation: int, position: int, span: int, publish_time: int, filler: bytes
) -> RowHeader:
    """Fill a writer's own unused reserved offsets with one skip marker, recorded in the skip index
    *before* the marker is put: no batch lands in a writer's reservation but its own, so the index never
    holds a position that will hold messages, and no count in between takes the marker's offsets for
    messages (as it does while a marker put by :func:`fill` waits for its index cell). A reader that
    filled the first of them first keeps the position; the index then records that marker's span."""
    index_skips(messages, topic, generation, {position: span})
    found = fill_cell(messages, topic, generation, position, span, publish_time, filler, index=False)[0]
    if not found.skip:  # not expected in a writer's own reservation: never subtract a batch's messages
        messages.delete_cells(counter_key(topic, generation), [skipped_column(position)])
    elif found.span != span:
        index_skips(messages, topic, generation, {position: found.span or 1})
    return found


def end_offset(messages: Table, topic: TopicId, generation: int) -> int:
    """The last offset handed out in the generation (0: none): one get of its counter."""
    value = messages.get_cell(counter_key(topic, generation), SEQUENCE_COLUMN)
    return 0 if value is None else int.from_bytes(value, "big", signed=True)


def low_water(messages: Table, topic: TopicId, generation: int) -> int:
    """The first offset the sweeper has not swept below (0: nothing swept): one get of the counter row."""
    value = messages.get_cell(counter_key(topic, generation), LOW_WATER_COLUMN)
    return 0 if value is None else int.from_bytes(value, "big")


def raise_low_water(messages: Table, topic: TopicId, generation: int, offset: int) -> None:
    """Say that everything below ``offset`` is swept (the sweeper, before it deletes those rows). It only
    goes up: a concurrent lower value is replaced, never the other way round."""
    key = counter_key(topic, generation)
    while True:
        current = messages.get_cell(key, LOW_WATER_COLUMN)
        if current is not None and int.from_bytes(current, "big") >= offset:
            return
        if messages.compare_and_set(key, LOW_WATER_COLUMN, current, offset.to_bytes(8, "big")):
            return


_FRONTIER = struct.Struct(">Qqq")


@dataclass(frozen=True)
class Frontier:
    """What is known of a generation's final prefix (docs/ordering.md, "Time seek"): every offset below
    ``offset`` holds a row (a batch or a skip marker) or is swept, so no batch can land there any more;
    ``newest`` is the latest date of a batch below it (-1: none), and ``disorder`` (ms) bounds how far a
    batch below it is dated after a later one there: ``t(p) <= t(q) + disorder`` for batches p < q.
    ``stored``: the cell it was read from (None: none yet), for the compare-and-set that moves it up."""

    offset: int = 1
    newest: int = -1
    disorder: int = 0
    stored: bytes | None = None

    def passing(self, dates: Iterable[int], end: int) -> Frontier:
        """This frontier moved up to ``end`` by a reader that passed every offset from ``offset`` to ``end``
        in order and read the dates of the batches among them (in order)."""
        newest, disorder = self.newest, self.disorder
        for date in dates:
            disorder = max(disorder, newest - date)
            newest = max(newest, date)
        return Frontier(end, newest, disorder)


def frontier(messages: Table, topic: TopicId, generation: int) -> Frontier:
    """The generation's frontier, raised to its low-water mark (below which everything is swept): one get
    of its counter row."""
    found = messages.get(counter_key(topic, generation), [FRONTIER_COLUMN, LOW_WATER_COLUMN])
    stored = found.get(FRONTIER_COLUMN)
    offset, newest, disorder = (1, -1, 0) if stored is None else _FRONTIER.unpack(stored)
    known = Frontier(offset, newest, disorder, stored)
    swept = int.from_bytes(found.get(LOW_WATER_COLUMN, b""), "big")
    return known if swept <= known.offset else Frontier(swept, known.newest, known.disorder, stored)


def raise_frontier(messages: Table, topic: TopicId, generation: int, read: Frontier, new: Frontier) -> bool:
    """Replace the frontier ``read`` with ``new`` (``read.passing``), one compare-and-set of its cell: rows
    are write-once and only a swept prefix is deleted, so what it says stays true. False when another reader
    moved it meanwhile (it is then left as that reader set it)."""
    value = _FRONTIER.pack(new.offset, new.newest, new.disorder)
    return messages.compare_and_set(counter_key(topic, generation), FRONTIER_COLUMN, read.stored, value)


def read(messages: Table, topic: TopicId, generation: int, position: int) -> RowHeader | None:
    """The header of the row at ``position``, or None if it is empty."""
    found = read_cell(messages, topic, generation, position)
    return None if found is None else found[0]


def read_cell(messages: Table, topic: TopicId, generation: int, position: int) -> tuple[RowHeader, bytes] | None:
    """The header and the whole cell of the row at ``position``, or None if it is empty."""
    key = message_key(topic, generation, position)
    value = messages.get_cell(key, MESSAGE_COLUMN)
    return None if value is None else (peek_row(key, value), value)


def fill(
    messages: Table,
    topic: TopicId,
    generation: int,
    position: int,
    span: int,
    publish_time: int,
    filler: bytes = bytes(16),
    mark: int = 0,
) -> RowHeader:
    """Put a skip marker over ``span`` offsets at ``position`` if the position is empty, and return what
    the position holds afterwards: that marker, or the batch (or other marker) that was there first.
    A lost answer is resolved by reading the position."""
    return fill_cell(messages, topic, generation, position, span, publish_time, filler, mark)[0]


def fill_cell(
    messages: Table,
    topic: TopicId,
    generation: int,
    position: int,
    span: int,
    publish_time: int,
    filler: bytes = bytes(16),
    mark: int = 0,
    *,
    index: bool = True,
) -> tuple[RowHeader, bytes]:
    """:func:`fill`, returning the cell the position holds afterwards as well (a reader returns it):
    one call when the marker goes in, one more read when something was there first. A marker this call
    put is recorded in the skip index (one more put) unless ``index`` is False: then the caller records
    it (:func:`index_skips`), as a reader filling a run of holes does once for the run."""
    key = message_key(topic, generation, position)
    cell = skip_marker(publish_time, span, filler, mark)
    try:
        if messages.put_if_absent(key, MESSAGE_COLUMN, cell):
            _index(messages, topic, generation, position, span, index)
            return peek_row(key, cell), cell
    except HBaseUnavailable:
        pass  # the put may have landed: look
    while True:
        found = read_cell(messages, topic, generation, position)
        if found is not None:
            if found[1] == cell:  # ours landed (or an identical one: indexing it twice is harmless)
                _index(messages, topic, generation, position, span, index)
            return found
        if messages.put_if_absent(key, MESSAGE_COLUMN, cell):  # it had not landed: put it again
            _index(messages, topic, generation, position, span, index)
            return peek_row(key, cell), cell
