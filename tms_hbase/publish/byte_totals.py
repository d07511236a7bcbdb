"""Exact byte totals of sequencer generations, from **bytes checkpoints** in the generation's counter row.

A sequencer row's key is its first offset, so message counts come from keys (:mod:`.sequencer`); bytes do
not, and a running total kept by writers would cost a call per publish. Instead the counter row holds:

* ``d:b<offset, 16 hex digits>`` = u64: the payload bytes of every message at offsets below ``offset`` since
  the generation began (swept ones included). Once every offset below ``offset`` holds a row that number is
  a fact (rows are written once, if absent; a hole left below can only get a skip marker, of no bytes), so
  whoever computes it writes it with a blind put, and two of them can only write the same value;
* ``d:b`` = offset u64 | bytes u64: the newest checkpoint (raised only, by compare-and-set), where a total
  of the tail starts from.

Then B(p), the bytes below offset p, is the checkpoint c <= p plus the bytes of the rows from c up to p:

* **stats** read B(first readable row) from the checkpoint at or below it, and B(past the tail row) from the
  newest one: one read of the counter row and two scans of whole rows (a row's bytes are in its cell).
  Reading from the newest checkpoint on, they write one wherever the rows read since the previous one,
  contiguous from it, reach CHECKPOINT_ROWS rows or CHECKPOINT_BYTES bytes. So checkpoints lie at most that
  far apart, and a stats call reads fewer rows than that at the head, and at the tail fewer than that plus
  the rows published since the last stats call or sweeper pass;
* **the sweeper**, before it raises the low-water mark to L and deletes the rows below it, writes B(L) (the
  rows from the checkpoint below L are still there: its earlier deletes stopped at a checkpoint), and
  drops the checkpoints below L with the skip index's. Once a pass, it moves the newest checkpoint up to
  the tail as stats do, which bounds the tail's rows by a pass's interval when nobody reads stats.

A row's bytes never change, so checkpoints written at different times agree: an inline row's payloads
(rolled back or not: a fetch without a transaction returns them); a skip marker none; a pointer row what was
stored under its pointer when it was published, which its writer keeps in the row's totals field (flag 8:
its own messages and bytes in a sequencer row), even once the sweeper deleted those payloads (its messages
count as published too); a row whose expired payloads the sweeper stripped, the bytes it had, which the
sweeper keeps there likewise. (A pointer row written before that field was kept counts what is stored
under its pointer now.) Offset 1 is a checkpoint of 0 bytes while nothing is swept. A
generation swept before checkpoints existed has none: its next sweep makes its low-water mark the origin
(0 bytes; differences are what counts), and until then its bytes are unknown (None).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from tms_hbase.model.record import counted_sizes
from tms_hbase.model.rows import (
    BYTES_PREFIX,
    F_POINTER,
    LOW_WATER_COLUMN,
    MAX_POSITION,
    MESSAGE_COLUMN,
    RowHeader,
    counter_key,
    decode_row,
    message_key,
    peek_row,
    position_of,
)
from tms_hbase.model.topic import TopicId
from tms_hbase.ordering import sequencer
from tms_hbase.publish.stored import stored_sizes
from tms_hbase.storage.hbase import Table

log = logging.getLogger(__name__)

CHECKPOINT_ROWS = 64  # a checkpoint at least every this many rows ...
CHECKPOINT_BYTES = 1 << 20  # ... or bytes of messages, whichever comes first
_PAGE = 256  # rows per scan while walking
_NEWEST = struct.Struct(">QQ")
_LOWEST = BYTES_PREFIX + b"0" * 16  # the smallest checkpoint column (d:b itself sorts before it)


@dataclass(frozen=True)
class Checkpoint:
    """``bytes``: the payload bytes of the generation's messages at offsets below ``offset``."""

    offset: int
    bytes: int


@dataclass(frozen=True)
class _Found:
    newest: Checkpoint | None  # the newest checkpoint (None: none yet)
    stored: bytes | None  # its cell as read, for the compare-and-set that raises it
    below: Checkpoint | None  # the greatest checkpoint at or below the offset asked for, from which rows remain
    low_water: int


def checkpoint_column(offset: int) -> bytes:
    """The counter row's cell of the bytes checkpoint at ``offset`` (hex digits sort as offsets do)."""
    return BYTES_PREFIX + f"{offset:016x}".encode()


def _qualifier(column: bytes) -> str:
    return column.split(b":", 1)[1].decode()


def _read(messages: Table, topic: TopicId, generation: int, at: int) -> _Found:
    """The newest checkpoint, the greatest one at or below ``at`` and the low-water mark: one read of the
    counter row, filtered in HBase to those cells (the checkpoints below ``at`` are few: the sweeper drops
    those below its low-water mark, and ``at`` is near it or the newest)."""
    key = counter_key(topic, generation)
    wanted = f"ColumnRangeFilter('b', true, '{_qualifier(checkpoint_column(at))}', true)"
    rows = messages.scan(key, key + b"\x00", limit=1, filter=f"{wanted} OR QualifierFilter(=, 'binary:l')")
    cells = rows[0][1] if rows else {}
    stored = cells.get(BYTES_PREFIX)
    newest = None if stored is None else Checkpoint(*_NEWEST.unpack(stored))
    swept = int.from_bytes(cells.get(LOW_WATER_COLUMN, b""), "big")
    known = [
        Checkpoint(int(column[len(BYTES_PREFIX) :], 16), int.from_bytes(value, "big"))
        for column, value in cells.items()
        if column.startswith(BYTES_PREFIX) and column != BYTES_PREFIX
    ]
    if swept <= 1:
        known.append(Checkpoint(1, 0))  # nothing swept: nothing below offset 1
    usable = [c for c in known if swept <= c.offset <= at]  # (below the low-water mark rows are gone)
    return _Found(newest, stored, max(usable, key=lambda c: c.offset, default=None), swept)


def row_bytes(payloads: Table, topic: TopicId, generation: int, key: bytes, cell: bytes) -> tuple[RowHeader, int]:
    """The header of a sequencer row and the bytes of its messages (payloads, and keys and headers as
    :func:`~tms_hbase.model.record.counted_sizes` counts them; see the module doc)."""
    head = peek_row(key, cell)
    if head.skip:
        return head, 0
    if head.totals is not None:  # a pointer row, or a row the sweeper stripped: what it held
        return head, head.totals.bytes
    if head.flags & F_POINTER and head.tx_pointer is not None:
        return head, sum(size for _, size in stored_sizes(payloads, topic, generation, abs(head.tx_pointer)))
    row = decode_row(key, cell, views=True)
    return head, sum(counted_sizes(row.payloads, row.extras))


def _rows(messages: Table, topic: TopicId, generation: int, low: int, high: int) -> Iterator[tuple[bytes, bytes]]:
    """(key, cell) of the rows at offsets ``low`` <= p < ``high``, in order, a page at a time."""
    stop = message_key(topic, generation, min(high, MAX_POSITION)) + (b"\x00" if high > MAX_POSITION else b"")
    while low < high:
        page = messages.scan(message_key(topic, generation, low), stop, limit=_PAGE, columns=[MESSAGE_COLUMN])
        for key, cells in page:
            yield key, cells[MESSAGE_COLUMN]
        if len(page) < _PAGE:
            return
        low = position_of(page[-1][0]) + 1


def _walk(
    messages: Table, payloads: Table, topic: TopicId, generation: int, start: Checkpoint, high: int
) -> tuple[int, list[Checkpoint]]:
    """B(``high``) from ``start``: its bytes plus those of the rows from it below ``high``; and the checkpoints
    to write where the rows read, contiguous from ``start``, reach the spacing (none past a hole)."""
    total, expected = start.bytes, start.offset
    rows = size = 0
    marks: list[Checkpoint] = []
    for key, cell in _rows(messages, topic, generation, start.offset, high):
        head, own = row_bytes(payloads, topic, generation, key, cell)
        total += own
        position = position_of(key)
        if position != expected:  # a hole: what lies above it is not final yet
            expected = 0
            continue
        expected, rows, size = head.next_position(position), rows + 1, size + own
        if rows >= CHECKPOINT_ROWS or size >= CHECKPOINT_BYTES:
            marks.append(Checkpoint(expected, total))
            rows = size = 0
    return total, marks


def _record(messages: Table, topic: TopicId, generation: int, found: _Found, marks: list[Checkpoint]) -> None:
    """Write checkpoints (a blind put: facts) and raise the newest one to the last of them."""
    if not marks:
        return
    key = counter_key(topic, generation)
    messages.put(key, {checkpoint_column(c.offset): c.bytes.to_bytes(8, "big") for c in marks})
    new, current = marks[-1], found.stored
    while current is None or _NEWEST.unpack(current)[0] < new.offset:
        if messages.compare_and_set(key, BYTES_PREFIX, current, _NEWEST.pack(new.offset, new.bytes)):
            return
        current = messages.get_cell(key, BYTES_PREFIX)


def bytes_between(
    messages: Table, payloads: Table, topic: TopicId, generation: int, first: int, end: int
) -> int | None:
    """The payload bytes of the messages at offsets ``first`` <= p < ``end`` (the first readable row's offset
    and the one past the tail row's span), or None while the generation has no checkpoint to count from
    (swept before checkpoints existed, until its next sweep). Writes the checkpoints it passes.

    The sweeper raises the low-water mark before it deletes: if it rose above the checkpoint this read from
    while it read, rows may have gone under it, and it reads again from a checkpoint at or above the new
    mark (checkpoints it passed on such a read are not written)."""
    while True:
        found = _read(messages, topic, generation, first)
        if found.below is None:
            return None
        before, _ = _walk(messages, payloads, topic, generation, found.below, first)
        newest = found.newest
        usable = newest is not None and max(found.below.offset, found.low_water) <= newest.offset <= end
        start = newest if usable and newest is not None else found.below
        through, marks = _walk(messages, payloads, topic, generation, start, end)
        if sequencer.low_water(messages, topic, generation) <= found.below.offset:
            _record(messages, topic, generation, found, marks)
            return through - before


def advance(messages: Table, payloads: Table, topic: TopicId, generation: int) -> None:
    """Move the newest checkpoint up to the generation's tail (the sweeper, once a pass), writing the
    checkpoints on the way."""
    found = _read(messages, topic, generation, 0)
    newest = found.newest
    start = newest if newest is not None and newest.offset >= found.low_water else found.below
    if start is None:
        return
    _, marks = _walk(messages, payloads, topic, generation, start, MAX_POSITION + 1)
    _record(messages, topic, generation, found, marks)


def checkpoint_at(messages: Table, payloads: Table, topic: TopicId, generation: int, offset: int) -> None:
    """Write B(``offset``) and raise the newest checkpoint to at least it: the sweeper, before it raises the
    low-water mark to ``offset`` and deletes the rows below (which must still be there)."""
    found = _read(messages, topic, generation, offset)
    below = found.below
    if below is None and found.newest is None:  # swept before checkpoints existed: the origin of its totals
        below = Checkpoint(found.low_water, 0)
    if below is None:
        log.warning(
            "%s (generation %d) has bytes checkpoints above offset %d only: its bytes stay unknown",
            topic,
            generation,
            offset,
        )
        return
    total, _ = _walk(messages, payloads, topic, generation, below, offset)
    _record(messages, topic, generation, found, [Checkpoint(offset, total)])


def prune(messages: Table, topic: TopicId, generation: int, below: int) -> int:
    """Drop the checkpoints below ``below`` (the low-water mark: nothing is counted from there any more), so
    the counter row does not grow with the generation's history. Returns how many."""
    key = counter_key(topic, generation)
    low, high = _qualifier(_LOWEST), _qualifier(checkpoint_column(below))
    rows = messages.scan(key, key + b"\x00", limit=1, filter=f"ColumnRangeFilter('{low}', true, '{high}', false)")
    columns = [column for _, row in rows for column in row if column.startswith(BYTES_PREFIX)]
    if columns:
        messages.delete_cells(key, columns)
    return len(columns)
