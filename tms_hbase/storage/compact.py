"""The compact protocol as the storage port reads HBase's answers: thriftpy2's, whose reader is pure Python
(the binary one is Cython), with the answers that carry rows (``list<TRowResult>``: scanners, gets) decoded by
code written for them.

thriftpy2's generic reader takes several Python calls per byte of a field header or varint and looks each
field up in its struct's spec; a row of small cells cost the client several times what the binary protocol
costs. :class:`RowsCompactProtocol` reads those answers' rows, cells and maps straight from the transport's
bytes and makes the same objects; every other answer, and any field of a row it does not expect, goes through
thriftpy2's reader. Bytes that are not such an answer raise :class:`~thriftpy2.protocol.exc.TProtocolException`
(or whatever thriftpy2's reader raises on them), which the client reports as not Thrift.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thriftpy2.protocol import TCompactProtocol
from thriftpy2.protocol.compact import TTYPES, CompactType
from thriftpy2.protocol.exc import TProtocolException
from thriftpy2.thrift import TType

from tms_hbase.storage.hbase_thrift import Hbase, TCell, TRowResult

_BINARY = CompactType.BINARY
_MAP_OF_CELLS = CompactType.BINARY << 4 | CompactType.STRUCT  # a map's key and value types: binary -> struct
_BIN_TYPES = (TType.STRING, TType.BINARY)
_MAX_VARINT_SHIFT = 63  # a varint of a 64-bit value has at most 10 bytes

Read = Callable[[int], bytes]


def _varint(read: Read, first: int | None = None) -> int:
    """An unsigned varint (``first``: its first byte, already read)."""
    byte = read(1)[0] if first is None else first
    result = shift = 0
    while True:
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
        shift += 7
        if shift > _MAX_VARINT_SHIFT:
            raise TProtocolException(TProtocolException.INVALID_DATA, "a varint longer than 10 bytes")
        byte = read(1)[0]


def _length(read: Read) -> int:
    """A length (a varint, most often of one byte)."""
    byte = read(1)[0]
    return byte if byte < 0x80 else _varint(read, byte)


def _field_id(head: int, last: int, read: Read) -> int:
    """The id of a field whose header byte is ``head``, ``last`` the id of the struct's field before it."""
    delta = head >> 4
    if delta:
        return last + delta
    fid = _varint(read)
    return (fid >> 1) ^ -(fid & 1)


def _other_field(proto: TCompactProtocol, obj: Any, fid: int, ctype: int) -> None:
    """Read a field the fast code does not expect into ``obj`` as thriftpy2's reader would (or skip it)."""
    ttype = TTYPES.get(ctype)
    if ttype is None:
        raise TProtocolException(TProtocolException.INVALID_DATA, f"a field of unknown compact type {ctype}")
    if ctype in (CompactType.TRUE, CompactType.FALSE):
        proto._bool_value = ctype == CompactType.TRUE  # (the compact protocol keeps a bool in the field header)
    spec = obj.thrift_spec.get(fid)
    if spec is None or not (ttype == spec[0] or (ttype in _BIN_TYPES and spec[0] in _BIN_TYPES)):
        proto.skip(ttype)
        return
    setattr(obj, spec[1], proto._read_val(spec[0], spec[2] if len(spec) > 3 else None))


def _cell(read: Read, proto: TCompactProtocol) -> TCell:
    cell = TCell()
    last = 0
    while True:
        head = read(1)[0]
        ctype = head & 0x0F
        if not ctype:
            return cell
        last = last + (head >> 4) if head >> 4 else _field_id(head, last, read)
        if last == 1 and ctype == _BINARY:
            cell.value = read(_length(read))
        elif last == 2 and ctype == CompactType.I64:
            stamp = _varint(read)
            cell.timestamp = (stamp >> 1) ^ -(stamp & 1)
        else:
            _other_field(proto, cell, last, ctype)


def _cells(read: Read, proto: TCompactProtocol) -> dict[bytes, TCell]:
    """A row's ``columns``: column name -> cell."""
    size = _length(read)
    if not size:
        return {}
    types = read(1)[0]
    if types != _MAP_OF_CELLS:  # as thriftpy2's reader does: a map of other types is skipped, read as empty
        key, value = TTYPES.get(types >> 4), TTYPES.get(types & 0x0F)
        if key is None or value is None:
            raise TProtocolException(TProtocolException.INVALID_DATA, f"a map of unknown compact types {types}")
        for _ in range(size):
            proto.skip(key)
            proto.skip(value)
        return {}
    cells = {}
    for _ in range(size):
        name = read(_length(read))
        cells[name] = _cell(read, proto)
    return cells


def _row(read: Read, proto: TCompactProtocol) -> TRowResult:
    row = TRowResult()
    last = 0
    while True:
        head = read(1)[0]
        ctype = head & 0x0F
        if not ctype:
            return row
        last = last + (head >> 4) if head >> 4 else _field_id(head, last, read)
        if last == 1 and ctype == _BINARY:
            row.row = read(_length(read))
        elif last == 2 and ctype == CompactType.MAP:
            row.columns = _cells(read, proto)
        else:
            _other_field(proto, row, last, ctype)


def _rows(read: Read, proto: TCompactProtocol) -> list[TRowResult]:
    head = read(1)[0]
    if head & 0x0F != CompactType.STRUCT:
        raise TProtocolException(TProtocolException.INVALID_DATA, f"a list of compact type {head & 0x0F}, not rows")
    size = head >> 4
    if size == 15:
        size = _varint(read)
    return [_row(read, proto) for _ in range(size)]


def _rows_result(proto: TCompactProtocol, result: Any) -> None:
    """Read a call's result whose ``success`` (field 0) is ``list<TRowResult>``."""
    read = proto.trans.read
    last = 0
    while True:
        head = read(1)[0]
        ctype = head & 0x0F
        if not ctype:
            return
        last = last + (head >> 4) if head >> 4 else _field_id(head, last, read)
        if last == 0 and ctype == CompactType.LIST:
            result.success = _rows(read, proto)
        else:
            _other_field(proto, result, last, ctype)


ROWS_RESULTS: frozenset[type] = frozenset(
    cls
    for name, cls in vars(Hbase).items()
    if name.endswith("_result") and cls.thrift_spec.get(0) == (TType.LIST, "success", (TType.STRUCT, TRowResult), False)
)
"""The results of the calls that answer rows (scannerGet, scannerGetList, getRow...): those read by the fast code."""


class RowsCompactProtocol(TCompactProtocol):
    """thriftpy2's compact protocol, with the results in :data:`ROWS_RESULTS` read by the code above."""

    def read_struct(self, obj: Any) -> None:
        if type(obj) in ROWS_RESULTS:
            _rows_result(self, obj)
        else:
            super().read_struct(obj)
