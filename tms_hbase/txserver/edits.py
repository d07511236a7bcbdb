"""Transaction-state edits (after Tephra's ``persist.TransactionEdit``) and their binary log format.

Every change the :class:`~tms_hbase.txserver.manager.TransactionManager` makes to its state is one of these edits; a
server writes them to a durable log before answering and replays them with ``TransactionManager.apply`` after a
crash to rebuild exactly the same state.

Binary format, version 1 (``encode_edit`` / ``decode_edit``)::

    u8 format version (1) | u8 kind | fields of the kind, in dataclass order

    long      8 bytes, big-endian two's complement (pointers, times)
    count     unsigned LEB128 varint (set sizes, byte-string lengths), at most 5 bytes
    bytes     count + raw bytes
    type      u8: the Thrift TTransactionType value (SHORT=1, LONG=2)
    bool      u8: 0 or 1
    str?      count (0 = None, else UTF-8 length + 1) + UTF-8 bytes
    longs     count + long*  (sets are written sorted, checkpoint lists in order)
    changes   count + bytes* (sorted)

Kinds: 1 InProgress, 2 Committing, 3 Committed, 4 Invalid, 5 Aborted, 6 MoveWatermark, 7 TruncateInvalid,
8 Checkpoint, 9 TruncateInvalidBefore, 10 TimedOut, 11 CommitConflict, 12 Reset. Anything malformed (unknown
version or kind, truncation, trailing bytes, bad enum, duplicate set member, invalid UTF-8) raises CorruptData.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, cast

from tms_hbase.errors import CorruptData, InvalidArgument
from tms_hbase.model.transaction import TransactionType, check_long

FORMAT_VERSION = 1
_LONG = struct.Struct(">q")
_MAX_COUNT_BYTES = 5


def _changes(name: str, values: object) -> frozenset[bytes]:
    """Validate a collection of change keys and freeze it."""
    if isinstance(values, str | bytes | bytearray) or not isinstance(values, Iterable):
        raise InvalidArgument(f"{name} must be a set of bytes, got {type(values).__name__}")
    items = []
    for value in values:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise InvalidArgument(f"{name} holds a {type(value).__name__}, expected bytes")
        items.append(bytes(value))
    return frozenset(items)


def _longs(name: str, values: object) -> tuple[int, ...]:
    """Validate a collection of Java longs and return it as a tuple (order kept)."""
    if isinstance(values, str | bytes | bytearray) or not isinstance(values, Iterable):
        raise InvalidArgument(f"{name} must be a collection of ints, got {type(values).__name__}")
    return tuple(check_long(f"{name}[{i}]", v) for i, v in enumerate(values))


def _type(value: object) -> TransactionType:
    """Validate a transaction type."""
    if not isinstance(value, TransactionType):
        raise InvalidArgument(f"type must be a TransactionType, got {value!r}")
    return value


class _Edit:
    """Shared validation: long fields are Java longs, sets are frozen, tuples are tuples."""

    __slots__ = ()

    def __post_init__(self) -> None:
        """Validate and normalise every field according to its annotation."""
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            kind = f.type
            if kind == "int":
                new: Any = check_long(f.name, value)
            elif kind == "frozenset[bytes]":
                new = _changes(f.name, value)
            elif kind == "frozenset[int]":
                new = frozenset(_longs(f.name, value))
            elif kind == "tuple[int, ...]":
                new = _longs(f.name, value)
            elif kind == "TransactionType":
                new = _type(value)
            elif kind == "bool":
                if not isinstance(value, bool):
                    raise InvalidArgument(f"{f.name} must be a bool, got {value!r}")
                new = value
            elif kind == "str | None":
                if value is not None and not isinstance(value, str):
                    raise InvalidArgument(f"{f.name} must be a str or None, got {value!r}")
                new = value
            else:  # pragma: no cover - a field type this module forgot to handle
                raise TypeError(f"unhandled edit field type {kind}")
            object.__setattr__(self, f.name, new)


@dataclass(frozen=True, slots=True)
class InProgress(_Edit):
    """A transaction started (Tephra INPROGRESS): it enters the in-progress map and advances the write pointer."""

    write_pointer: int
    expiration: int  # ms since the epoch
    visibility_upper_bound: int
    type: TransactionType
    client_id: str | None = None  # Tephra does not log it; we do, so a replayed state is the same


@dataclass(frozen=True, slots=True)
class Committing(_Edit):
    """canCommit passed (Tephra COMMITTING): the transaction's change set is recorded for the commit."""

    write_pointer: int
    changes: frozenset[bytes]


@dataclass(frozen=True, slots=True)
class Committed(_Edit):
    """A transaction committed (Tephra COMMITTED); its changes are recorded under ``commit_pointer`` if can_commit.

    ``current_write_pointer`` is the write pointer the client committed with (Tephra does not log it and
    replays with the tx id; it moves the read pointer when the transaction had no checkpoints).
    """

    write_pointer: int  # the transaction id
    current_write_pointer: int
    commit_pointer: int  # last write pointer + 1 at commit time
    changes: frozenset[bytes]
    can_commit: bool  # False when the transaction had no committing change set


@dataclass(frozen=True, slots=True)
class Invalid(_Edit):
    """invalidate() was called (Tephra INVALID); it changes nothing if the tx was neither in progress nor committing."""

    write_pointer: int


@dataclass(frozen=True, slots=True)
class Aborted(_Edit):
    """A transaction aborted (Tephra ABORTED): SHORT is forgotten, LONG becomes invalid."""

    write_pointer: int
    type: TransactionType
    checkpoint_write_pointers: tuple[int, ...] = ()  # as the client's Transaction listed them


@dataclass(frozen=True, slots=True)
class MoveWatermark(_Edit):
    """Raise the last write pointer and the read pointer to at least ``write_pointer`` (start-up initialisation)."""

    write_pointer: int


@dataclass(frozen=True, slots=True)
class TruncateInvalid(_Edit):
    """Remove these ids from the invalid list (Tephra TRUNCATE_INVALID_TX with ids)."""

    ids: frozenset[int]


@dataclass(frozen=True, slots=True)
class Checkpoint(_Edit):
    """A checkpoint (Tephra CHECKPOINT): ``write_pointer`` is a new pointer of in-progress ``parent_write_pointer``."""

    write_pointer: int
    parent_write_pointer: int


@dataclass(frozen=True, slots=True)
class TruncateInvalidBefore(_Edit):
    """Remove invalid ids whose pointer is older than ``time_ms`` (Tephra TRUNCATE_INVALID_TX with a time)."""

    time_ms: int


@dataclass(frozen=True, slots=True)
class TimedOut(_Edit):
    """These in-progress pointers expired and become invalid, read pointer unmoved (Tephra's cleanup thread).

    Tephra logs one INVALID per transaction here, whose replay also moves the read pointer; a dedicated
    edit keeps the replayed state identical to the live one.
    """

    write_pointers: frozenset[int]


@dataclass(frozen=True, slots=True)
class CommitConflict(_Edit):
    """commit() found a conflict; Tephra drops the committing change set without logging it, we log it."""

    write_pointer: int


@dataclass(frozen=True, slots=True)
class Reset(_Edit):
    """resetState(): every list and pointer back to empty / zero."""


Edit = (
    InProgress
    | Committing
    | Committed
    | Invalid
    | Aborted
    | MoveWatermark
    | TruncateInvalid
    | Checkpoint
    | TruncateInvalidBefore
    | TimedOut
    | CommitConflict
    | Reset
)
"""Any transaction-state edit."""

_KINDS: dict[int, type] = {
    1: InProgress,
    2: Committing,
    3: Committed,
    4: Invalid,
    5: Aborted,
    6: MoveWatermark,
    7: TruncateInvalid,
    8: Checkpoint,
    9: TruncateInvalidBefore,
    10: TimedOut,
    11: CommitConflict,
    12: Reset,
}
_TAGS = {cls: tag for tag, cls in _KINDS.items()}


def _count(value: int) -> bytes:
    """Unsigned LEB128 varint."""
    out = bytearray()
    while value > 0x7F:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def _encode_field(kind: str, value: Any) -> bytes:
    """Encode one field by its annotation."""
    if kind == "int":
        return _LONG.pack(value)
    if kind == "frozenset[bytes]":
        return _count(len(value)) + b"".join(_count(len(v)) + v for v in sorted(value))
    if kind == "frozenset[int]":
        return _count(len(value)) + b"".join(_LONG.pack(v) for v in sorted(value))
    if kind == "tuple[int, ...]":
        return _count(len(value)) + b"".join(_LONG.pack(v) for v in value)
    if kind == "TransactionType":
        return bytes((value.value,))
    if kind == "bool":
        return b"\x01" if value else b"\x00"
    if kind == "str | None":
        if value is None:
            return b"\x00"
        data = value.encode("utf-8")
        return _count(len(data) + 1) + data
    raise TypeError(f"unhandled edit field type {kind}")  # pragma: no cover


def encode_edit(edit: Edit) -> bytes:
    """Encode an edit in the versioned binary format described in the module docstring."""
    tag = _TAGS.get(type(edit))
    if tag is None:
        raise InvalidArgument(f"not a transaction edit: {edit!r}")
    parts = [bytes((FORMAT_VERSION, tag))]
    parts += [_encode_field(f.type, getattr(edit, f.name)) for f in fields(edit)]  # type: ignore[arg-type]
    return b"".join(parts)


class _Reader:
    """Strict cursor over an encoded edit; running out of bytes raises CorruptData."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        """Next ``size`` bytes."""
        if size > len(self.data) - self.pos:
            raise CorruptData(f"corrupt transaction edit: truncated at byte {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def long(self) -> int:
        """A big-endian signed 64-bit long."""
        return _LONG.unpack(self.take(8))[0]

    def byte(self) -> int:
        """One unsigned byte."""
        return self.take(1)[0]

    def count(self) -> int:
        """An unsigned LEB128 varint of at most 5 bytes, no longer than needed."""
        value = shift = 0
        for i in range(_MAX_COUNT_BYTES):
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                if byte == 0 and i > 0:
                    raise CorruptData("corrupt transaction edit: overlong varint")
                return value
        raise CorruptData("corrupt transaction edit: varint too long")

    def field(self, kind: str) -> Any:
        """Decode one field by its annotation."""
        if kind == "int":
            return self.long()
        if kind == "frozenset[bytes]":
            items = [self.take(self.count()) for _ in range(self._items(1))]
            return self._unique(items)
        if kind == "frozenset[int]":
            return self._unique([self.long() for _ in range(self._items(8))])
        if kind == "tuple[int, ...]":
            return tuple(self.long() for _ in range(self._items(8)))
        if kind == "TransactionType":
            value = self.byte()
            try:
                return TransactionType(value)
            except ValueError:
                raise CorruptData(f"corrupt transaction edit: transaction type {value}") from None
        if kind == "bool":
            value = self.byte()
            if value > 1:
                raise CorruptData(f"corrupt transaction edit: boolean byte {value}")
            return value == 1
        if kind == "str | None":
            size = self.count()
            if size == 0:
                return None
            try:
                return self.take(size - 1).decode("utf-8")
            except UnicodeDecodeError:
                raise CorruptData("corrupt transaction edit: client id is not UTF-8") from None
        raise TypeError(f"unhandled edit field type {kind}")  # pragma: no cover

    def _items(self, min_size: int) -> int:
        """A collection size, checked against the bytes left so garbage cannot ask for huge allocations."""
        size = self.count()
        if size * min_size > len(self.data) - self.pos:
            raise CorruptData(f"corrupt transaction edit: {size} items cannot fit in the bytes left")
        return size

    @staticmethod
    def _unique(items: list) -> frozenset:
        """Freeze a decoded set; a duplicate means the bytes were not written by encode_edit."""
        result = frozenset(items)
        if len(result) != len(items):
            raise CorruptData("corrupt transaction edit: duplicate set member")
        return result


def decode_edit(data: bytes) -> Edit:
    """Decode bytes written by :func:`encode_edit`; anything malformed raises CorruptData."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidArgument(f"expected bytes, got {type(data).__name__}")
    reader = _Reader(bytes(data))
    version = reader.byte()
    if version != FORMAT_VERSION:
        raise CorruptData(f"unsupported transaction edit format version {version}")
    tag = reader.byte()
    cls = _KINDS.get(tag)
    if cls is None:
        raise CorruptData(f"unknown transaction edit kind {tag}")
    values = [reader.field(cast(str, f.type)) for f in fields(cls)]  # annotations stay strings (__future__)
    if reader.pos != len(reader.data):
        raise CorruptData(f"corrupt transaction edit: {len(reader.data) - reader.pos} trailing bytes")
    try:
        return cls(*values)
    except InvalidArgument as exc:
        raise CorruptData(f"corrupt transaction edit: {exc}") from None
