"""How the client reads answers over the framed transport and the compact protocol.

The framed transport's channel (tms_hbase.storage.framed.FramedChannel): a frame per flushed request, answers
read as the bytes arrive, a few at a time, across frames, decoded as thriftpy2 framed them; framing no framed
server sends refused as not Thrift, never a hang. The compact protocol's reader of rows
(tms_hbase.storage.compact): the same values as thriftpy2's reader from any answer thriftpy2 writes, and from
truncated or garbage bytes the client's clear error (NotThrift), never a hang or another value."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thriftpy2.protocol import TBinaryProtocol, TCompactProtocol
from thriftpy2.thrift import TApplicationException, TMessageType
from thriftpy2.transport import TFramedTransport, TMemoryBuffer

from tms_hbase.config import ThriftTransport
from tms_hbase.storage import hbase_thrift
from tms_hbase.storage.connection import Connection, NotThrift
from tms_hbase.storage.framed import BadFrame, FramedChannel


class Script:
    """A socket whose answers are ``answer``, ``step`` bytes per read at most; what is written is kept."""

    host, port = "gw.example", 9090

    def __init__(self, answer: bytes = b"", step: int = 3) -> None:
        self.pending = answer
        self.step = step
        self.sent: list[bytes] = []
        self.deadline: float | None = None

    def open(self) -> None:
        pass

    def close(self) -> None:
        self.pending = b""

    def is_open(self) -> bool:
        return True

    def write(self, buf: bytes) -> None:
        self.sent.append(buf)

    def read(self, sz: int) -> bytes:
        if not self.pending:
            raise EOFError
        n = min(sz, self.step)
        data, self.pending = self.pending[:n], self.pending[n:]
        return data


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def test_each_flush_sends_one_frame_and_reads_take_the_frames_bytes_across_frames() -> None:
    sock = Script(_frame(b"abcde") + _frame(b"fg"))
    channel = FramedChannel(sock, 100)
    channel.write(b"one")
    channel.write(b"more")
    channel.flush()
    channel.flush()  # nothing written: nothing sent
    assert sock.sent == [b"\x00\x00\x00\x07onemore"]
    got = b""
    while len(got) < 7:
        piece = channel.read(4)
        assert 0 < len(piece) <= 4
        got += piece
    assert got == b"abcdefg"


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (b"\x80\x01\x00\x02\x00\x00\x00\x01x", "a frame of -2147418110 bytes"),  # an unframed binary answer
        (_frame(b""), "a frame of 0 bytes"),
        (struct.pack(">i", 5000), "a frame of 5000 bytes"),
    ],
)
def test_framing_no_framed_server_sends_is_refused(answer: bytes, says: str) -> None:
    with pytest.raises(BadFrame, match=says):
        FramedChannel(Script(answer, step=1000), 1000).read(10)
    with pytest.raises(BadFrame, match="a value of 1001 bytes"):
        FramedChannel(Script(_frame(b"x")), 1000).read(1001)


class _ScriptSocket(Script):
    """A :class:`Script` made as a connection makes its socket."""

    def __init__(self, host: str, port: int, tls: object = None) -> None:
        super().__init__()


class _Scripted(Connection):
    socket_class = _ScriptSocket  # type: ignore[assignment]


def _answer(protocol: type, result: Any, *, framed: bool = True) -> bytes:
    """The answer carrying ``result`` (a call's ``*_result``), written by thriftpy2 (``framed``: framed by its
    framed transport)."""
    buffer = TMemoryBuffer()
    trans = TFramedTransport(buffer) if framed else buffer
    out = protocol(trans)
    out.write_message_begin(type(result).__name__.removesuffix("_result"), TMessageType.REPLY, 0)
    result.write(out)
    out.write_message_end()
    trans.flush()
    return buffer.getvalue()


def _maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | values


_CELLS = st.builds(
    hbase_thrift.TCell, value=_maybe(st.binary(max_size=300)), timestamp=_maybe(st.integers(-(2**63), 2**63 - 1))
)
_ROWS = st.lists(
    st.builds(
        hbase_thrift.TRowResult,
        row=_maybe(st.binary(max_size=20)),
        columns=_maybe(st.dictionaries(st.binary(max_size=10), _CELLS, max_size=3)),
        sortedColumns=st.none()
        | st.lists(st.builds(hbase_thrift.TColumn, columnName=st.binary(max_size=5), cell=_CELLS), max_size=2),
    ),
    max_size=20,
)
_RESULTS = st.one_of(
    st.builds(hbase_thrift.Hbase.scannerGetList_result, success=_ROWS),
    st.builds(hbase_thrift.Hbase.getRowWithColumns_result, success=_ROWS),
    st.builds(
        hbase_thrift.Hbase.scannerGetList_result, io=st.builds(hbase_thrift.IOError, message=st.text(max_size=20))
    ),
)


def _call(conn: Connection, api: str) -> Any:
    """The client's answer to ``api`` (an exception HBase sent: its message; no result at all: "missing")."""
    try:
        return conn.client._recv(api)
    except hbase_thrift.IOError as exc:
        return ("IOError", exc.message)
    except TApplicationException as exc:
        assert exc.type == TApplicationException.MISSING_RESULT
        return "missing"


def _thriftpy2_reads(answer: bytes, api: str) -> Any:
    """What thriftpy2's own compact reader reads from the (unframed) ``answer`` of ``api``."""
    proto = TCompactProtocol(TMemoryBuffer(answer), decode_response=False)
    proto.read_message_begin()
    result = getattr(hbase_thrift.Hbase, api + "_result")()
    result.read(proto)
    if result.success is not None:  # (as thriftpy2's client looks at them)
        return result.success
    return "missing" if result.io is None else ("IOError", result.io.message)


@settings(max_examples=50, deadline=None)
@given(rows=_ROWS, step=st.integers(1, 70), compact=st.booleans())
def test_the_client_reads_answers_as_thriftpy2_framed_them(
    rows: list[hbase_thrift.TRowResult], step: int, compact: bool
) -> None:
    answer = _answer(TCompactProtocol if compact else TBinaryProtocol, hbase_thrift.Hbase.scannerGetList_result(rows))
    conn = _Scripted("gw.example", 9090, ThriftTransport(framed=True, compact=compact))
    conn.socket.pending = answer + answer  # two calls' answers, read back to back
    conn.socket.step = step
    assert conn.client.pipeline([("scannerGetList", {"id": 1, "nbRows": 9})] * 2) == [rows, rows]
    assert conn.socket.pending == b""


@settings(max_examples=200, deadline=None)
@given(result=_RESULTS, step=st.integers(1, 70), framed=st.booleans())
def test_the_compact_reader_reads_what_thriftpy2_reads(result: Any, step: int, framed: bool) -> None:
    api = type(result).__name__.removesuffix("_result")
    conn = _Scripted("gw.example", 9090, ThriftTransport(framed=framed, compact=True))
    conn.socket.pending = _answer(TCompactProtocol, result, framed=framed)
    conn.socket.step = step
    assert _call(conn, api) == _thriftpy2_reads(_answer(TCompactProtocol, result, framed=False), api)
    assert conn.socket.pending == b""


@settings(max_examples=100, deadline=None)
@given(result=_RESULTS, data=st.data())
def test_a_truncated_compact_answer_is_not_thrift(result: Any, data: st.DataObject) -> None:
    answer = _answer(TCompactProtocol, result, framed=False)
    conn = _Scripted("gw.example", 9090, ThriftTransport(compact=True))
    conn.socket.pending = answer[: data.draw(st.integers(0, len(answer) - 1))]
    with pytest.raises(NotThrift):
        _call(conn, type(result).__name__.removesuffix("_result"))


@settings(max_examples=300, deadline=None)
@given(garbage=st.binary(max_size=200), api=st.sampled_from(["scannerGetList", "getRowWithColumns"]))
def test_garbage_in_a_compact_answer_is_not_thrift_or_what_thriftpy2_reads(garbage: bytes, api: str) -> None:
    """Bytes after a valid message header: the client refuses them (NotThrift) or, where they happen to be an
    answer, reads what thriftpy2 reads."""
    head = _answer(TCompactProtocol, getattr(hbase_thrift.Hbase, api + "_result")(), framed=False)[:-1]
    conn = _Scripted("gw.example", 9090, ThriftTransport(compact=True))
    conn.socket.pending = head + garbage
    try:
        got = _call(conn, api)
    except NotThrift:
        return
    assert got == _thriftpy2_reads(head + garbage, api)


def test_a_bad_frame_is_reported_as_not_thrift() -> None:
    conn = _Scripted("gw.example", 9090, ThriftTransport(framed=True))
    conn.socket.pending = b"\xff\xff\xff\xff"
    with pytest.raises(NotThrift, match="BadFrame: it announced a frame of -1 bytes"):
        conn.client.scannerGetList(1, 9)
