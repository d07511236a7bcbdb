"""The Thrift framed transport (HBase's ``hbase.regionserver.thrift.framed``): each request and each answer is
one frame, its length (4 bytes, big-endian) then its bytes.

:class:`FramedChannel` sits between the Thrift buffered transport and the connection's socket, as the HTTP and
SASL channels do, instead of thriftpy2's framed transport, which reads a whole answer's frame before the
protocol decodes a byte of it, copying it four times through buffers it allocates to the frame's size (a scan's
answer is megabytes): here the buffered transport's reads take the frame's bytes from the socket as they come,
so the client decodes an answer while the rest of it arrives, and copies it no more than the buffered transport.
"""

from __future__ import annotations

import struct

from tms_hbase.storage.http import Socket

_LENGTH = struct.Struct(">i")


class BadFrame(Exception):
    """The answer's framing is not what a framed Thrift server sends (the client reports it as not Thrift)."""


class FramedChannel:
    """A Thrift transport underneath the buffered one: what it writes is collected, and on :meth:`flush` sent
    as one frame (HBase's framed servers take one request per frame, so the client flushes after each call);
    :meth:`read` returns the bytes of the answers' frames, the length prefixes taken out. A frame announced
    longer than ``max_frame`` bytes, or empty, or a read larger than ``max_frame``, is refused
    (:class:`BadFrame`)."""

    def __init__(self, socket: Socket, max_frame: int) -> None:
        self.socket = socket
        self.max_frame = max_frame
        self._request: list[bytes] = []
        self._left = 0  # bytes of the current answer's frame not read yet
        self._head = b""  # bytes of the next frame's length read so far

    def is_open(self) -> bool:
        return self.socket.is_open()

    def open(self) -> None:
        self.socket.open()

    def close(self) -> None:
        self._request.clear()
        self._left = 0
        self._head = b""
        self.socket.close()

    def write(self, buf: bytes) -> None:
        self._request.append(buf)

    def flush(self) -> None:
        """Send what was written as one frame (nothing written: nothing is sent)."""
        if not self._request:
            return
        body = b"".join(self._request)
        self._request.clear()
        self.socket.write(_LENGTH.pack(len(body)) + body)

    def read(self, sz: int) -> bytes:
        """Up to ``sz`` bytes of the answers (at least one), from the current frame or, once it is read, the next."""
        if sz > self.max_frame:
            raise BadFrame(f"it announced a value of {sz} bytes")
        while not self._left:
            self._head += self.socket.read(_LENGTH.size - len(self._head))
            if len(self._head) == _LENGTH.size:
                (size,) = _LENGTH.unpack(self._head)
                self._head = b""
                if not 0 < size <= self.max_frame:
                    raise BadFrame(f"it announced a frame of {size} bytes")
                self._left = size
        data = self.socket.read(min(sz, self._left))
        self._left -= len(data)
        return data
