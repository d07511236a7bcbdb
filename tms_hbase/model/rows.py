"""Byte layouts of the message and payload tables (docs/tables.md has the tables).

Message table: one row per published batch at a dense position of its topic generation::

    key   = topic key (b"ns:topic:") | generation u32 | position u64           (big-endian)
    d:m   = version u8 | flags u8 | publish_time i64 ms | writer id 16 | writer batch i64
            | [tx write pointer i64] | [expires_at i64 ms] | [messages total u64 | bytes total u64]
            | [span u32] | [count u32 | (len u32 | payload)* | [extra*]]

With flag 64 the payloads are followed by one *extra* section per message, in order: its key and headers
(layout in :mod:`tms_hbase.model.record`). A batch of plain payloads has no such flag and no such section.

A generation is a *chain* or a *sequencer* generation (the topic's ``ordering`` property; docs/ordering.md).
In a chain generation the position is the batch's place in a dense sequence 1, 2, 3, … In a sequencer
generation it is the batch's **first message offset**, and the row says how many offsets it takes (its
span, flag 32): the next row of the dense order starts at ``position + span``. The offsets are handed out
by the generation's counter row, which sorts before position 1 (scans from a position and the tail's
reverse scan never meet it)::

    counter row = topic key | generation u32      (d:s = last offset handed out, d:l = low-water mark,
                                                   d:f = frontier: every offset below it holds a row,
                                                   d:k<offset, 16 hex digits> = span of a skip marker there,
                                                   d:b, d:b<offset, 16 hex digits> = bytes checkpoints:
                                                   publish/byte_totals.py)

In any generation the counter row also holds the rollback index, ``d:x<position, 16 hex digits>`` (empty)
for each rolled-back row (publish/rolled_back.py); a chain generation's counter row holds nothing else.

The low-water mark is raised by the sweeper before it deletes a prefix of the generation: every offset
below it is swept (or a hole nobody can write any more), so a reader jumps over a gap below it.

A **skip marker** (flag 16, with a span) fills offsets nobody will write: a writer releasing what it
reserved, or a reader filling a hole left too long. It holds no messages; its publish time is the
row's before it (or 0), so time seeks step over it.

Payload table: payloads stored under a transaction write pointer, in store order::

    key   = topic key | generation u32 | write pointer i64 | sequence u64     (d:p = payload,
                                                                            [d:r = extra: key and headers])
    counter row = topic key | generation u32 | write pointer i64             (d:c = last sequence)

The totals (flag 8) count the messages and payload bytes of the generation up to and including this row,
so the size of any range of a topic is a subtraction (lag, stats) instead of a scan. A sequencer row has
them only as its own messages and bytes: a pointer row (what was stored under its pointer when published)
and a row the sweeper stripped (what it held), for the byte totals (publish/byte_totals.py).

Everything a batch says is one cell, so a batch appears whole or not at all (checkAndPut on one cell).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from tms_hbase.errors import CorruptData
from tms_hbase.model import record
from tms_hbase.model.message_id import encode as encode_id
from tms_hbase.model.record import Extra, Record
from tms_hbase.model.tables import FAMILY
from tms_hbase.model.topic import TopicId

MESSAGE_COLUMN = f"{FAMILY}:m".encode()
PAYLOAD_COLUMN = f"{FAMILY}:p".encode()
EXTRA_COLUMN = f"{FAMILY}:r".encode()  # a stored payload's key and headers (payload table; absent: none)
COUNTER_COLUMN = f"{FAMILY}:c".encode()
SEQUENCE_COLUMN = f"{FAMILY}:s".encode()  # the offset counter of a sequencer generation (messages table)
LOW_WATER_COLUMN = f"{FAMILY}:l".encode()  # first offset of a sequencer generation not swept (its counter row)
FRONTIER_COLUMN = f"{FAMILY}:f".encode()  # every offset below it holds a row or is swept (its counter row)
SKIPPED_PREFIX = f"{FAMILY}:k".encode()  # the skip index in the counter row: d:k<offset, 16 hex digits> = span
BYTES_PREFIX = f"{FAMILY}:b".encode()  # bytes checkpoints in the counter row (publish/byte_totals.py)
ROLLED_BACK_PREFIX = f"{FAMILY}:x".encode()  # the rollback index in the counter row (publish/rolled_back.py)

VERSION = 1
F_TX = 1
F_POINTER = 2
F_EXPIRY = 4
F_COUNTS = 8
F_SKIP = 16
F_SPAN = 32
F_EXTRA = 64

_HEADER = struct.Struct(">BBq16sq")
TX_OFFSET = _HEADER.size  # the write pointer sits at a fixed offset so rollback can flip its sign
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_TOTALS = struct.Struct(">QQ")
_GEN = struct.Struct(">I")
_POS = struct.Struct(">Q")
MAX_POSITION = 2**64 - 1
T = TypeVar("T")


def generation_prefix(topic: TopicId, generation: int) -> bytes:
    """Key prefix of one generation of a topic (message and payload tables alike)."""
    return topic.key + _GEN.pack(generation)


def past_last(prefix: bytes) -> bytes:
    """The scan stop just past the last position (or sequence) under ``prefix``: ``prefix`` + 8 × 0xff
    is itself the key of position 2**64 - 1, so a stop at it would leave that row out."""
    return prefix + b"\xff" * 8 + b"\x00"


def counter_key(topic: TopicId, generation: int) -> bytes:
    """Key of a generation's counter row (a sequencer generation's offset counter, any generation's rollback
    index): the generation prefix itself, below position 1."""
    return generation_prefix(topic, generation)


def skipped_column(position: int) -> bytes:
    """The skip index's cell (in a sequencer generation's counter row) for a skip marker at ``position``;
    its value is the marker's span (u64). Hex digits sort as the offsets do."""
    return SKIPPED_PREFIX + f"{position:016x}".encode()


def rolled_back_column(position: int) -> bytes:
    """The rollback index's cell (in a generation's counter row) for a rolled-back row at ``position``."""
    return ROLLED_BACK_PREFIX + f"{position:016x}".encode()


def message_key(topic: TopicId, generation: int, position: int) -> bytes:
    return generation_prefix(topic, generation) + _POS.pack(position)


def position_of(key: bytes) -> int:
    """The position encoded at the end of a message row key."""
    return _POS.unpack_from(key, len(key) - 8)[0]


def pointer_prefix(topic: TopicId, generation: int, write_pointer: int) -> bytes:
    """Key of the sequence counter of one write pointer; its payload rows extend it."""
    return generation_prefix(topic, generation) + _I64.pack(write_pointer)


def payload_key(topic: TopicId, generation: int, write_pointer: int, sequence: int) -> bytes:
    return pointer_prefix(topic, generation, write_pointer) + _POS.pack(sequence)


def sequence_of(key: bytes) -> int:
    return _POS.unpack_from(key, len(key) - 8)[0]


@dataclass(frozen=True)
class Totals:
    """Running totals of one topic generation: messages and payload bytes up to and including a row.

    A pointer row counts the payloads its write pointer's counter had handed out when it was
    published, and no bytes (its publisher does not know their sizes).
    """

    messages: int
    bytes: int

    def plus(self, messages: int, size: int) -> Totals:
        return Totals(self.messages + messages, self.bytes + size)


@dataclass(frozen=True)
class BatchRow:
    """The decoded cell of one message-table row."""

    publish_time: int
    writer_id: bytes
    batch_no: int
    payloads: tuple[bytes | memoryview, ...] = ()  # memoryview slices of the cell when decoded with ``views``
    tx_pointer: int | None = None  # negative once rolled back or marked invalid
    expires_at: int | None = None  # per-message TTL, as an absolute time in ms
    pointer: bool = False  # no payloads inline: they are in the payload table under tx_pointer
    totals: Totals | None = None  # messages and bytes of the generation through this row (rows since flag 8)
    span: int | None = None  # offsets this row takes (sequencer generations only)
    skip: bool = False  # a skip marker: no messages, its span is filled
    extras: tuple[Extra, ...] | None = None  # each payload's key and headers (None: plain payloads, flag 64 unset)

    def encode(self) -> bytes:
        flags = (F_TX if self.tx_pointer is not None else 0) | (F_POINTER if self.pointer else 0)
        flags |= F_EXPIRY if self.expires_at is not None else 0
        flags |= F_COUNTS if self.totals is not None else 0
        flags |= (F_SPAN if self.span is not None else 0) | (F_SKIP if self.skip else 0)
        flags |= F_EXTRA if self.extras is not None else 0
        parts = [_HEADER.pack(VERSION, flags, self.publish_time, self.writer_id, self.batch_no)]
        if self.tx_pointer is not None:
            parts.append(_I64.pack(self.tx_pointer))
        if self.expires_at is not None:
            parts.append(_I64.pack(self.expires_at))
        if self.totals is not None:
            parts.append(_TOTALS.pack(self.totals.messages, self.totals.bytes))
        if self.span is not None:
            parts.append(_U32.pack(self.span))
        if not self.pointer:
            payloads = self.payloads
            parts.append(_U32.pack(len(payloads)))
            # each payload after its length, interleaved by slice assignment: no Python step per payload
            body: list[bytes | memoryview] = [b""] * (2 * len(payloads))
            body[::2] = map(_U32.pack, map(len, payloads))
            body[1::2] = payloads
            parts += body
            if self.extras is not None:
                parts.append(record.encode_all(self.extras))
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes, *, views: bool = False) -> BatchRow:
        """The row of cell ``data``; ``views``: its payloads as memoryview slices of ``data``, not copies
        (for a reader that writes them out as they are: the gateway's pages)."""
        head, offset = _head(data)
        payloads: list[bytes | memoryview] = []
        extras = _walk_payloads(memoryview(data) if views else data, head, offset, payloads)
        return cls(
            head.publish_time,
            head.writer_id,
            head.batch_no,
            tuple(payloads),
            head.tx_pointer,
            head.expires_at,
            bool(head.flags & F_POINTER),
            head.totals,
            head.span,
            head.skip,
            extras,
        )


@dataclass(frozen=True)
class RowHeader:
    """What a batch row says about itself, read without decoding its payloads (what the sweeper, a
    writer that lost a race and a time seek need)."""

    publish_time: int
    tx_pointer: int | None
    expires_at: int | None
    has_payloads: bool
    writer_id: bytes
    batch_no: int
    flags: int = 0
    payload_count: int = 0  # inline payloads (0 for a pointer row)
    totals: Totals | None = None  # None in rows written before totals existed
    span: int | None = None  # offsets the row takes (sequencer generations; None in chain rows)

    @property
    def skip(self) -> bool:
        """A skip marker (holds no messages; its span is filled)."""
        return bool(self.flags & F_SKIP)

    def next_position(self, position: int) -> int:
        """Where the next row of the dense order starts, for this row at ``position``."""
        return next_position(position, self.span)


def next_position(position: int, span: int | None) -> int:
    """Where the row after one at ``position`` taking ``span`` offsets starts (None: a chain row, one)."""
    return position + (1 if span is None else span)


def _head(data: bytes) -> tuple[RowHeader, int]:
    """The fixed and optional header fields, and the offset where the payload count starts."""
    try:
        version, flags, publish_time, writer_id, batch_no = _HEADER.unpack_from(data)
        if version != VERSION:
            raise CorruptData(f"message row of unknown format version {version}")
        offset = _HEADER.size
        tx_pointer = expires_at = None
        if flags & F_TX:
            tx_pointer = _I64.unpack_from(data, offset)[0]
            offset += 8
        if flags & F_EXPIRY:
            expires_at = _I64.unpack_from(data, offset)[0]
            offset += 8
        totals = None
        if flags & F_COUNTS:
            totals = Totals(*_TOTALS.unpack_from(data, offset))
            offset += _TOTALS.size
        span = None
        if flags & F_SPAN:
            span = _U32.unpack_from(data, offset)[0]
            offset += 4
            if span < 1:
                raise CorruptData("message row with a span of 0")
        count = 0 if flags & F_POINTER else _U32.unpack_from(data, offset)[0]
    except struct.error as exc:
        raise CorruptData(f"truncated message row: {exc}") from None
    header = RowHeader(publish_time, tx_pointer, expires_at, count > 0, writer_id, batch_no, flags, count, totals, span)
    return header, offset


def _walk_payloads(
    data: bytes | memoryview, head: RowHeader, offset: int, out: list[bytes | memoryview] | None
) -> tuple[Extra, ...] | None:
    """Follow the payload section from ``offset`` to the cell's end (CorruptData if it does not end
    exactly there), appending the payloads to ``out`` if given (slices of ``data``: copies of bytes,
    views of a memoryview); the messages' keys and headers (None without flag 64)."""
    extras = None
    try:
        if not head.flags & F_POINTER:
            (count,) = _U32.unpack_from(data, offset)
            offset += 4
            for _ in range(count):
                (size,) = _U32.unpack_from(data, offset)
                offset += 4
                if out is not None:
                    out.append(data[offset : offset + size])
                offset += size
            if head.flags & F_EXTRA:
                extras, offset = record.decode_all(data, offset, count)
    except struct.error as exc:
        raise CorruptData(f"truncated message row: {exc}") from None
    if offset != len(data):
        raise CorruptData("message row has trailing or missing bytes")
    return extras


def peek(data: bytes) -> RowHeader:
    """The header of a message cell; the payload count is read, the payloads are not."""
    return _head(data)[0]


def message_count(data: bytes) -> int | None:
    """How many payloads a message cell holds inline (its payload count, read without the payloads),
    or None for a pointer row, whose payloads are payload-table rows."""
    head, offset = _head(data)
    if head.flags & F_POINTER:
        return None
    return _U32.unpack_from(data, offset)[0]


def check_cell(data: bytes) -> RowHeader:
    """The header of a message cell that decodes completely (what :meth:`BatchRow.decode` accepts),
    checked without copying its payloads; CorruptData saying what is wrong otherwise."""
    head, offset = _head(data)
    _walk_payloads(data, head, offset, None)
    return head


def split_key(key: bytes) -> tuple[TopicId, int] | None:
    """(topic, generation) at the start of a message or payload row key; None if it has none."""
    first = key.find(b":")
    second = key.find(b":", first + 1)
    if first <= 0 or second <= first + 1 or len(key) < second + 5:
        return None
    return _parse_prefix(key[: second + 5])


@functools.lru_cache(maxsize=4096)
def _parse_prefix(prefix: bytes) -> tuple[TopicId, int] | None:
    """(topic, generation) of ``namespace:topic:`` + generation; cached, as rows come in long runs."""
    first = prefix.find(b":")
    second = prefix.find(b":", first + 1)
    try:
        topic = TopicId(prefix[:first].decode(), prefix[first + 1 : second].decode())
    except (UnicodeDecodeError, ValueError):
        return None
    return topic, _GEN.unpack_from(prefix, second + 1)[0]


def decode_row(key: bytes, cell: bytes | None, *, views: bool = False) -> BatchRow:
    """The message row ``key`` whose ``d:m`` cell is ``cell`` (None: the row has no such cell),
    decoded (``views``: see :meth:`BatchRow.decode`); CorruptData naming the row's topic, generation and
    position if it cannot be."""
    return _at(key, cell, functools.partial(BatchRow.decode, views=views))


def peek_row(key: bytes, cell: bytes | None) -> RowHeader:
    """Like :func:`decode_row`, reading only the header (see :func:`peek`)."""
    return _at(key, cell, peek)


def _at(key: bytes, cell: bytes | None, decode: Callable[[bytes], T]) -> T:
    try:
        if cell is None:
            raise CorruptData(f"it has no {MESSAGE_COLUMN.decode()} cell")
        return decode(cell)
    except CorruptData as exc:
        topic = key[: -_GEN.size - _POS.size].decode(errors="replace").removesuffix(":")
        generation, position = _GEN.unpack_from(key, len(key) - 12)[0], position_of(key)
        raise CorruptData(
            f"corrupt message row at position {position} of {topic} (generation {generation}): {exc}",
            topic=topic,
            generation=generation,
            position=position,
        ) from None


def with_tx_pointer(data: bytes, tx_pointer: int) -> bytes:
    """The same cell with its transaction write pointer replaced (rollback: +p → −p)."""
    if len(data) < TX_OFFSET + 8 or not data[1] & F_TX:
        raise CorruptData("message row has no transaction write pointer")
    return data[:TX_OFFSET] + _I64.pack(tx_pointer) + data[TX_OFFSET + 8 :]


def skip_marker(publish_time: int, span: int, filler: bytes = bytes(16), mark: int = 0) -> bytes:
    """The cell of a skip marker over ``span`` offsets, dated ``publish_time`` (the row's before it).
    ``filler``/``mark`` say who wrote it (a writer releasing its own reservation, or zeros for a reader)."""
    return BatchRow(publish_time, filler, mark, span=span, skip=True).encode()


def batch_size(payloads: Sequence[bytes | Record]) -> int:
    """Bytes a batch's messages take in a row (what the batch size limit counts): payloads and their lengths,
    and the keys and headers of records as stored. Additive, so batches can be grouped by their sizes (a plain
    message in a batch with records takes 6 more bytes, for its empty extra section, not counted)."""
    return record.message_bytes(payloads) + 4 * len(payloads)


def plain_size(payloads: Sequence[bytes]) -> int:
    """:func:`batch_size` of a batch of plain payloads (no records): each payload and its length."""
    return sum(map(len, payloads)) + 4 * len(payloads)


@dataclass(frozen=True, slots=True)
class RowSlice:
    """Consecutive messages of one batch row as it is stored, without a message object each: their ids are
    (``generation``, ``position``, ``first``) … (…, ``first + len - 1``), their publish time is the row's and
    their payloads are the row's (memoryview slices of its cell when it was decoded with ``views``, or
    the stored payloads of a pointer row). What a gateway page is written from."""

    generation: int
    position: int
    first: int
    publish_time: int
    payloads: Sequence[bytes | memoryview]
    extras: Sequence[Extra] | None = None  # the messages' keys and headers (None: they have none)

    def __len__(self) -> int:
        return len(self.payloads)

    def ids(self) -> list[bytes]:
        """The messages' ids, in order."""
        generation, position = self.generation, self.position
        return [encode_id(generation, position, index) for index in range(self.first, self.first + len(self.payloads))]

    @property
    def last_id(self) -> bytes:
        return encode_id(self.generation, self.position, self.first + len(self.payloads) - 1)

    def split(self, count: int) -> tuple[RowSlice, RowSlice]:
        """The first ``count`` messages and the rest (0 < count < len)."""
        head, tail = self.payloads[:count], self.payloads[count:]
        extras = self.extras
        return (
            RowSlice(self.generation, self.position, self.first, self.publish_time, head, extras and extras[:count]),
            RowSlice(
                self.generation, self.position, self.first + count, self.publish_time, tail, extras and extras[count:]
            ),
        )
