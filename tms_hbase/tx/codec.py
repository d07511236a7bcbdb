"""Tephra's TransactionCodec: a Transaction as the Thrift binary-protocol bytes of ``TTransaction``, no prefix."""

from __future__ import annotations

import functools
import struct
from pathlib import Path
from types import ModuleType
from typing import Any

import thriftpy2
from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.utils import serialize

from tms_hbase.errors import InvalidArgument
from tms_hbase.model.transaction import Transaction, TransactionType, VisibilityLevel

IDL_PATH = Path(__file__).with_name("tephra.thrift")
"""Tephra's full Thrift IDL (enums, TTransaction, exceptions, TBoolean, service TTransactionServer)."""

# Thrift wire type codes (TType) used by the binary protocol.
T_STOP, T_BOOL, T_BYTE, T_DOUBLE, T_I16, T_I32, T_I64 = 0, 2, 3, 4, 6, 8, 10
T_STRING, T_STRUCT, T_MAP, T_SET, T_LIST = 11, 12, 13, 14, 15
_TYPE_NAMES = {
    T_BOOL: "bool",
    T_BYTE: "byte",
    T_DOUBLE: "double",
    T_I16: "i16",
    T_I32: "i32",
    T_I64: "i64",
    T_STRING: "string",
    T_STRUCT: "struct",
    T_MAP: "map",
    T_SET: "set",
    T_LIST: "list",
}
_FIXED_SIZES = {T_BOOL: 1, T_BYTE: 1, T_DOUBLE: 8, T_I16: 2, T_I32: 4, T_I64: 8}
_MAX_DEPTH = 64  # nesting allowed while skipping unknown fields; real Tephra data never nests

# TTransaction field id -> (name, wire type); lists are list<i64>.
_FIELDS = {
    1: ("transactionId", T_I64),
    2: ("readPointer", T_I64),
    3: ("invalids", T_LIST),
    4: ("inProgress", T_LIST),
    5: ("firstShort", T_I64),
    6: ("type", T_I32),
    7: ("writePointer", T_I64),
    8: ("checkpointWritePointers", T_LIST),
    9: ("visibilityLevel", T_I32),
}
_REQUIRED = (1, 2, 5)  # every Tephra version writes these i64 fields; without them the bytes are not a Tephra tx


@functools.cache
def load_tephra_thrift() -> ModuleType:
    """Load (once) the thriftpy2 module of Tephra's IDL; the transaction server and client reuse it."""
    return thriftpy2.load(str(IDL_PATH), module_name="tephra_thrift")


class _Truncated(Exception):
    """Internal: the input ended inside a value."""


class _Reader:
    """Minimal strict reader of Thrift binary-protocol values over an in-memory buffer."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    @property
    def remaining(self) -> int:
        """Bytes not read yet."""
        return len(self.data) - self.pos

    def take(self, size: int) -> bytes:
        """Return the next ``size`` bytes, or raise _Truncated."""
        if size > self.remaining:
            raise _Truncated
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def unpack(self, fmt: str) -> int:
        """Read one big-endian fixed-size integer (``fmt`` is a struct format such as ``>q``)."""
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def size(self, what: str, min_item_size: int) -> int:
        """Read an i32 element count; reject negative counts and counts the remaining bytes cannot hold."""
        count = self.unpack(">i")
        if count < 0:
            raise InvalidArgument(f"malformed TTransaction: negative {what} size {count}")
        if count * min_item_size > self.remaining:
            raise _Truncated
        return count

    def list_header(self, name: str) -> int:
        """Read a list<i64> header and return its length."""
        elem_type = self.unpack(">b")
        if elem_type != T_I64:
            raise InvalidArgument(
                f"malformed TTransaction: field {name} is a list of {_type_name(elem_type)}, expected list<i64>"
            )
        return self.size(f"{name} list", 8)

    def skip(self, ttype: int, depth: int = 0) -> None:
        """Skip one value of wire type ``ttype`` (an unknown field), validating its structure."""
        if depth > _MAX_DEPTH:
            raise InvalidArgument("malformed TTransaction: unknown field nested too deeply")
        if ttype in _FIXED_SIZES:
            self.take(_FIXED_SIZES[ttype])
        elif ttype == T_STRING:
            self.take(self.size("string", 1))
        elif ttype == T_STRUCT:
            while (field_type := self.unpack(">b")) != T_STOP:
                self.take(2)
                self.skip(field_type, depth + 1)
        elif ttype == T_MAP:
            key_type, value_type = self.unpack(">b"), self.unpack(">b")
            for _ in range(self.size("map", 2)):
                self.skip(key_type, depth + 1)
                self.skip(value_type, depth + 1)
        elif ttype in (T_SET, T_LIST):
            elem_type = self.unpack(">b")
            for _ in range(self.size("list", 1)):
                self.skip(elem_type, depth + 1)
        else:
            raise InvalidArgument(f"malformed TTransaction: unknown Thrift type code {ttype}")


def _type_name(ttype: int) -> str:
    """Human name of a Thrift wire type code, for error messages."""
    return _TYPE_NAMES.get(ttype, f"type code {ttype}")


def _read_fields(reader: _Reader) -> dict[int, Any]:
    """Read TTransaction's fields up to the stop byte; unknown field ids are skipped, the last duplicate wins."""
    values: dict[int, Any] = {}
    while (field_type := reader.unpack(">b")) != T_STOP:
        field_id = reader.unpack(">h")
        if field_id not in _FIELDS:
            reader.skip(field_type)
            continue
        name, expected = _FIELDS[field_id]
        if field_type != expected:
            raise InvalidArgument(
                f"malformed TTransaction: field {field_id} ({name}) has type {_type_name(field_type)},"
                f" expected {_type_name(expected)}"
            )
        if expected == T_LIST:
            count = reader.list_header(name)
            values[field_id] = list(struct.unpack(f">{count}q", reader.take(8 * count)))
        else:
            values[field_id] = reader.unpack(">q" if expected == T_I64 else ">i")
    return values


def _enum(cls: type[TransactionType] | type[VisibilityLevel], name: str, value: int) -> Any:
    """Map a Thrift enum value to our enum; an unknown value means the bytes are not a Tephra transaction."""
    try:
        return cls(value)
    except ValueError:
        raise InvalidArgument(f"malformed TTransaction: unknown {name} value {value}") from None


# The bytes HBase's Bytes.toStringBinary (which Tephra's ChangeId.toString uses) leaves as they are.
_PRINTABLE = frozenset(
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz`~!@#$%^&*()-_=+[]{}|;:'\",.<>/?"
)


def to_string_binary(data: bytes) -> str:
    """A change key as Tephra puts it on the wire: ``\\xHH`` for every byte outside a printable set."""
    return "".join(chr(b) if b in _PRINTABLE else f"\\x{b:02X}" for b in data)


def to_bytes_binary(text: str) -> bytes:
    """The inverse of :func:`to_string_binary` (HBase's Bytes.toBytesBinary)."""
    out = bytearray()
    i = 0
    while i < len(text):
        if text.startswith("\\x", i) and i + 4 <= len(text):
            try:
                out.append(int(text[i + 2 : i + 4], 16))
                i += 4
                continue
            except ValueError:
                pass
        out += text[i].encode()
        i += 1
    return bytes(out)


def to_thrift(tx: Transaction) -> Any:
    """The thriftpy2 ``TTransaction`` struct of a transaction, every field set (as Tephra's wrap does)."""
    return load_tephra_thrift().TTransaction(
        transactionId=tx.tx_id,
        readPointer=tx.read_pointer,
        invalids=list(tx.invalids),
        inProgress=list(tx.in_progress),
        firstShort=tx.first_short_in_progress,
        type=tx.type.value,
        writePointer=tx.write_pointer,
        checkpointWritePointers=list(tx.checkpoint_write_pointers),
        visibilityLevel=tx.visibility_level.value,
    )


def from_thrift(ttx: Any) -> Transaction:
    """A transaction from a ``TTransaction`` struct received over Thrift (absent parts as Tephra reads them)."""
    try:
        return Transaction(
            ttx.readPointer,
            ttx.transactionId,
            ttx.invalids or (),
            ttx.inProgress or (),
            ttx.firstShort,
            type=_enum(TransactionType, "type", ttx.type if ttx.type is not None else TransactionType.LONG.value),
            checkpoint_write_pointers=ttx.checkpointWritePointers or (),
            visibility_level=_enum(
                VisibilityLevel, "visibilityLevel", ttx.visibilityLevel or VisibilityLevel.SNAPSHOT.value
            ),
            write_pointer=ttx.writePointer,
        )
    except (InvalidArgument, TypeError) as e:
        raise InvalidArgument(f"malformed TTransaction: {e}") from None


class TransactionCodec:
    """Encode and decode transactions exactly as Tephra's ``org.apache.tephra.TransactionCodec`` does."""

    @staticmethod
    def encode(tx: Transaction) -> bytes:
        """Serialize ``tx``: every field set, in id order, like Java's generated ``TTransaction.write``."""
        if not isinstance(tx, Transaction):
            raise InvalidArgument(f"expected a Transaction, got {type(tx).__name__}")
        return serialize(to_thrift(tx), TBinaryProtocolFactory())

    @staticmethod
    def decode(data: bytes) -> Transaction:
        """Parse Tephra-encoded bytes; malformed input raises InvalidArgument, never a raw exception.

        As in Tephra, absent lists are empty, an absent visibility level is SNAPSHOT, an absent type is LONG and
        unknown fields are skipped. Stricter than Tephra, so that garbage is not taken for a transaction: fields
        1, 2 and 5 must be present, known fields must have their declared types, enum values must be known and
        nothing may follow the struct. An absent write pointer defaults to the last checkpoint, else the id.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidArgument(f"expected bytes, got {type(data).__name__}")
        reader = _Reader(bytes(data))
        try:
            values = _read_fields(reader)
        except (_Truncated, struct.error):
            raise InvalidArgument(f"malformed TTransaction: truncated at byte {reader.pos} of {len(data)}") from None
        if reader.remaining:
            raise InvalidArgument(f"malformed TTransaction: {reader.remaining} unexpected bytes after the struct")
        missing = [_FIELDS[i][0] for i in _REQUIRED if i not in values]
        if missing:
            raise InvalidArgument(f"not a Tephra transaction: missing field(s) {', '.join(missing)}")
        tx_type = _enum(TransactionType, "type", values.get(6, TransactionType.LONG.value))
        level = _enum(VisibilityLevel, "visibilityLevel", values.get(9, VisibilityLevel.SNAPSHOT.value))
        try:
            return Transaction(
                values[2],
                values[1],
                values.get(3, ()),
                values.get(4, ()),
                values[5],
                type=tx_type,
                checkpoint_write_pointers=values.get(8, ()),
                visibility_level=level,
                write_pointer=values.get(7),
            )
        except InvalidArgument as e:
            raise InvalidArgument(f"malformed TTransaction: {e}") from None
