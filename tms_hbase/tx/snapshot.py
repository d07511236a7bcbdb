"""Tephra's transaction-state snapshot and its binary format, version 4 (SnapshotCodecV4 behind the version)."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from tms_hbase.errors import CorruptData, InvalidArgument
from tms_hbase.model.transaction import TransactionType, check_long, check_longs

SNAPSHOT_VERSION = 4
"""Version written before the body, as Tephra's SnapshotCodecProvider does (files and getSnapshot alike)."""

DECODABLE_VERSIONS = (2, 3, 4)
"""Versions 2 and 3 (SnapshotCodecV2/V3) are version 4 without checkpoint lists; version 1 has no tx types."""

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
_VARINT_BYTES = {32: 5, 64: 10}  # longest zig-zag varint of a Java int / long


class InProgressType(enum.Enum):
    """Kind of an in-progress entry; values are the Java ordinals Tephra writes (not the Thrift enum values)."""

    SHORT = 0
    LONG = 1
    CHECKPOINT = 2  # a checkpoint write pointer of a transaction, tracked in progress until that tx ends

    @classmethod
    def of(cls, tx_type: TransactionType) -> InProgressType:
        """In-progress type of a newly started transaction of type ``tx_type``."""
        return cls.SHORT if tx_type is TransactionType.SHORT else cls.LONG

    @property
    def transaction_type(self) -> TransactionType | None:
        """The transaction type this entry stands for; ``None`` for a checkpoint."""
        return {0: TransactionType.SHORT, 1: TransactionType.LONG}.get(self.value)


@dataclass(frozen=True, slots=True)
class InProgressTx:
    """What the transaction manager keeps of an in-progress pointer (Tephra's ``TransactionManager.InProgressTx``)."""

    expiration: int  # ms since the epoch at which the transaction times out
    visibility_upper_bound: int  # the oldest in-progress pointer minus one when this transaction started
    type: InProgressType
    checkpoint_write_pointers: tuple[int, ...] = ()  # in the order they were created

    def __post_init__(self) -> None:
        """Validate that every number is a Java long and freeze the checkpoint list."""
        check_long("expiration", self.expiration)
        check_long("visibility_upper_bound", self.visibility_upper_bound)
        if not isinstance(self.type, InProgressType):
            raise InvalidArgument(f"type must be an InProgressType, got {self.type!r}")
        pointers = self.checkpoint_write_pointers
        if isinstance(pointers, str | bytes | bytearray) or not isinstance(pointers, Iterable):
            raise InvalidArgument(f"checkpoint_write_pointers must be a sequence of ints, got {pointers!r}")
        pointers = tuple(check_long(f"checkpoint_write_pointers[{i}]", p) for i, p in enumerate(pointers))
        object.__setattr__(self, "checkpoint_write_pointers", pointers)

    @property
    def is_long_running(self) -> bool:
        """True for a LONG transaction (no conflict detection, long timeout, invalidated on abort)."""
        return self.type is InProgressType.LONG


def _change_sets(name: str, value: object) -> dict[int, frozenset[bytes]]:
    """Validate a map of commit (or tx) pointer -> set of change keys; return a fresh dict of frozensets."""
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{name} must be a mapping of int to a set of bytes, got {type(value).__name__}")
    result: dict[int, frozenset[bytes]] = {}
    for key, changes in value.items():
        pointer = check_long(f"{name} key", key)
        if isinstance(changes, str | bytes | bytearray) or not isinstance(changes, Iterable):
            raise InvalidArgument(f"{name}[{pointer}] must be a set of bytes, got {type(changes).__name__}")
        items = []
        for change in changes:
            if not isinstance(change, bytes | bytearray | memoryview):
                raise InvalidArgument(f"{name}[{pointer}] holds a {type(change).__name__}, expected bytes")
            items.append(bytes(change))
        result[pointer] = frozenset(items)
    return result


@dataclass(frozen=True, slots=True)
class TransactionSnapshot:
    """The transaction manager's whole state at one instant (Tephra's ``persist.TransactionSnapshot``)."""

    timestamp: int  # ms since the epoch when the snapshot was taken
    read_pointer: int
    write_pointer: int  # the last write pointer handed out
    invalid: tuple[int, ...] = ()  # sorted, as Tephra writes it
    in_progress: dict[int, InProgressTx] = field(default_factory=dict)  # pointer -> entry; encoded by pointer
    committing_change_sets: dict[int, frozenset[bytes]] = field(default_factory=dict)  # tx id -> changes
    committed_change_sets: dict[int, frozenset[bytes]] = field(default_factory=dict)  # commit pointer -> changes

    def __post_init__(self) -> None:
        """Validate every number as a Java long and take private copies of the collections."""
        check_long("timestamp", self.timestamp)
        check_long("read_pointer", self.read_pointer)
        check_long("write_pointer", self.write_pointer)
        object.__setattr__(self, "invalid", check_longs("invalid", self.invalid))
        if not isinstance(self.in_progress, Mapping):
            raise InvalidArgument(f"in_progress must be a mapping of int to InProgressTx, got {self.in_progress!r}")
        in_progress: dict[int, InProgressTx] = {}
        for key, entry in sorted(self.in_progress.items(), key=lambda item: check_long("in_progress key", item[0])):
            if not isinstance(entry, InProgressTx):
                raise InvalidArgument(f"in_progress[{key}] must be an InProgressTx, got {type(entry).__name__}")
            in_progress[key] = entry
        object.__setattr__(self, "in_progress", in_progress)
        for name in ("committing_change_sets", "committed_change_sets"):
            object.__setattr__(self, name, _change_sets(name, getattr(self, name)))

    @property
    def visibility_upper_bound(self) -> int:
        """Tephra's bound: the first in-progress entry's visibility upper bound, else the read pointer."""
        for entry in self.in_progress.values():
            return entry.visibility_upper_bound
        return self.read_pointer


def _varint(value: int, bits: int) -> bytes:
    """Zig-zag then little-endian base-128 encode ``value`` (Tephra's BinaryEncoder writeInt/writeLong)."""
    zigzag = (value << 1) ^ (value >> (bits - 1))
    out = bytearray()
    while zigzag > 0x7F:
        out.append(0x80 | (zigzag & 0x7F))
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _int(value: int) -> bytes:
    """Encode a Java int (counts, the version, type ordinals)."""
    if not INT_MIN <= value <= INT_MAX:
        raise InvalidArgument(f"{value} does not fit in a Java int")
    return _varint(value, 32)


def _long(value: int) -> bytes:
    """Encode a Java long (pointers, timestamps, byte-string lengths)."""
    return _varint(value, 64)


def _block(count: int, items: Iterable[bytes]) -> bytes:
    """A list or map in Avro blocks as Tephra writes them: one block of ``count`` items if any, then a zero."""
    body = b"".join(items)
    return (_int(count) + body if count else b"") + _int(0)


def _encode_in_progress(entries: dict[int, InProgressTx]) -> bytes:
    """SnapshotCodecV4.encodeInProgress: id, expiration, upper bound, type ordinal, checkpoint list per entry."""
    return _block(
        len(entries),
        (
            _long(tx_id)
            + _long(entry.expiration)
            + _long(entry.visibility_upper_bound)
            + _int(entry.type.value)
            + _block(len(entry.checkpoint_write_pointers), map(_long, entry.checkpoint_write_pointers))
            for tx_id, entry in sorted(entries.items())
        ),
    )


def _encode_change_sets(change_sets: dict[int, frozenset[bytes]]) -> bytes:
    """DefaultSnapshotCodec.encodeChangeSets: pointer, then the change keys (length-prefixed) as a nested list."""
    return _block(
        len(change_sets),
        (
            _long(pointer) + _block(len(changes), (_long(len(key)) + key for key in sorted(changes)))
            for pointer, changes in sorted(change_sets.items())
        ),
    )


def encode_snapshot(snapshot: TransactionSnapshot) -> bytes:
    """Encode ``snapshot`` exactly as a Tephra snapshot file / ``getSnapshot`` result: version 4, then the body.

    Maps are written in key order and change keys in byte order: Tephra iterates hash sets (and the committing
    hash map) in an order of its own, so only those orders can differ from Java's bytes; readers do not care.
    """
    if not isinstance(snapshot, TransactionSnapshot):
        raise InvalidArgument(f"expected a TransactionSnapshot, got {type(snapshot).__name__}")
    return b"".join(
        (
            _int(SNAPSHOT_VERSION),
            _long(snapshot.timestamp),
            _long(snapshot.read_pointer),
            _long(snapshot.write_pointer),
            _block(len(snapshot.invalid), map(_long, snapshot.invalid)),
            _encode_in_progress(snapshot.in_progress),
            _encode_change_sets(snapshot.committing_change_sets),
            _encode_change_sets(snapshot.committed_change_sets),
        )
    )


class _Truncated(Exception):
    """Internal: the input ended inside a value."""


class _Decoder:
    """Strict reader of Tephra's BinaryDecoder values (zig-zag varints, length-prefixed bytes, blocks)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    @property
    def remaining(self) -> int:
        """Bytes not read yet."""
        return len(self.data) - self.pos

    def _varint(self, bits: int) -> int:
        """Read a zig-zag varint of a Java int (bits=32) or long (bits=64); reject overlong or oversized ones."""
        start, shift, raw = self.pos, 0, 0
        for _ in range(_VARINT_BYTES[bits]):
            if self.pos >= len(self.data):
                raise _Truncated
            byte = self.data[self.pos]
            self.pos += 1
            raw |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                if raw >> bits:
                    raise CorruptData(f"corrupt snapshot: varint at byte {start} overflows a {bits}-bit number")
                return (raw >> 1) ^ -(raw & 1)
        raise CorruptData(f"corrupt snapshot: varint at byte {start} is longer than {_VARINT_BYTES[bits]} bytes")

    def read_int(self) -> int:
        """Read a Java int."""
        return self._varint(32)

    def read_long(self) -> int:
        """Read a Java long."""
        return self._varint(64)

    def read_bytes(self) -> bytes:
        """Read a length-prefixed byte string."""
        size = self.read_int()
        if size < 0:
            raise CorruptData(f"corrupt snapshot: negative byte-string length {size} before byte {self.pos}")
        if size > self.remaining:
            raise _Truncated
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def blocks(self, what: str) -> Iterator[None]:
        """Yield once per item of a block-encoded list or map (counts until a zero count)."""
        while (count := self.read_int()) != 0:
            if count < 0 or count > self.remaining:  # every item takes at least one byte
                raise CorruptData(f"corrupt snapshot: impossible {what} block size {count} before byte {self.pos}")
            for _ in range(count):
                yield

    def in_progress(self, version: int) -> dict[int, InProgressTx]:
        """SnapshotCodecV4.decodeInProgress (V2/V3: the same without the checkpoint list)."""
        entries: dict[int, InProgressTx] = {}
        for _ in self.blocks("in-progress"):
            tx_id, expiration, upper_bound = self.read_long(), self.read_long(), self.read_long()
            ordinal = self.read_int()
            try:
                tx_type = InProgressType(ordinal)
            except ValueError:
                raise CorruptData(f"corrupt snapshot: in-progress type ordinal {ordinal} of tx {tx_id}") from None
            checkpoints = tuple(self.read_long() for _ in self.blocks("checkpoint")) if version >= 4 else ()
            entries[tx_id] = InProgressTx(expiration, upper_bound, tx_type, checkpoints)
        return entries

    def change_sets(self, what: str) -> dict[int, frozenset[bytes]]:
        """DefaultSnapshotCodec.decodeChangeSets: pointer -> set of change keys."""
        result: dict[int, frozenset[bytes]] = {}
        for _ in self.blocks(what):
            pointer = self.read_long()
            result[pointer] = frozenset(self.read_bytes() for _ in self.blocks(f"{what} keys"))
        return result


def decode_snapshot(data: bytes) -> TransactionSnapshot:
    """Decode a Tephra snapshot (version 4, or the older 2 and 3); anything malformed raises CorruptData."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidArgument(f"expected bytes, got {type(data).__name__}")
    decoder = _Decoder(bytes(data))
    try:
        version = decoder.read_int()
        if version not in DECODABLE_VERSIONS:
            raise CorruptData(f"unsupported snapshot version {version} (supported: 2, 3, 4)")
        timestamp, read_pointer, write_pointer = decoder.read_long(), decoder.read_long(), decoder.read_long()
        invalid = tuple(decoder.read_long() for _ in decoder.blocks("invalid"))
        in_progress = decoder.in_progress(version)
        committing = decoder.change_sets("committing change sets")
        committed = decoder.change_sets("committed change sets")
    except _Truncated:
        raise CorruptData(f"corrupt snapshot: truncated at byte {decoder.pos} of {len(data)}") from None
    if decoder.remaining:
        raise CorruptData(f"corrupt snapshot: {decoder.remaining} unexpected bytes after the end")
    return TransactionSnapshot(timestamp, read_pointer, write_pointer, invalid, in_progress, committing, committed)
