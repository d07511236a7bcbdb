"""The Thrift framed transport's channel (tms_hbase.storage.framed.FramedChannel): a frame per flushed request,
answers read as the bytes arrive, a few at a time, across frames; the client's answers decoded from it as from
thriftpy2's own framed transport; framing no framed server sends refused as not Thrift, never a hang."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thriftpy2.protocol import TBinaryProtocol, TCompactProtocol
from thriftpy2.thrift import TMessageType
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


def _answer(protocol: type, rows: list[hbase_thrift.TRowResult]) -> bytes:
    """scannerGetList's answer of ``rows``, framed by thriftpy2's own framed transport."""
    buffer = TMemoryBuffer()
    framed = TFramedTransport(buffer)
    out = protocol(framed)
    out.write_message_begin("scannerGetList", TMessageType.REPLY, 0)
    hbase_thrift.Hbase.scannerGetList_result(success=rows).write(out)
    out.write_message_end()
    framed.flush()
    return buffer.getvalue()


_ROWS = st.lists(
    st.builds(
        lambda row, cells: hbase_thrift.TRowResult(
            row=row,
            columns={name: hbase_thrift.TCell(value=value, timestamp=ts) for name, (value, ts) in cells.items()},
        ),
        st.binary(max_size=20),
        st.dictionaries(
            st.binary(max_size=10),
            st.tuples(st.binary(max_size=300), st.integers(-(2**63), 2**63 - 1)),
            max_size=3,
        ),
    ),
    max_size=5,
)


@settings(max_examples=50, deadline=None)
@given(rows=_ROWS, step=st.integers(1, 70), compact=st.booleans())
def test_the_client_reads_answers_as_thriftpy2_framed_them(
    rows: list[hbase_thrift.TRowResult], step: int, compact: bool
) -> None:
    answer = _answer(TCompactProtocol if compact else TBinaryProtocol, rows)
    conn = _Scripted("gw.example", 9090, ThriftTransport(framed=True, compact=compact))
    conn.socket.pending = answer + answer  # two calls' answers, read back to back
    conn.socket.step = step
    assert conn.client.pipeline([("scannerGetList", {"id": 1, "nbRows": 9})] * 2) == [rows, rows]
    assert conn.socket.pending == b""


def test_a_bad_frame_is_reported_as_not_thrift() -> None:
    conn = _Scripted("gw.example", 9090, ThriftTransport(framed=True))
    conn.socket.pending = b"\xff\xff\xff\xff"
    with pytest.raises(NotThrift, match="BadFrame: it announced a frame of -1 bytes"):
        conn.client.scannerGetList(1, 9)
