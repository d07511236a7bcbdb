"""The Thrift HTTP transport (HBase's ``hbase.regionserver.thrift.http``): each Thrift request is the body of
one HTTP/1.1 POST on a kept-alive connection, its reply the body of the answer.

:class:`HttpChannel` sits between the Thrift buffered transport and the connection's socket (the blocking
:class:`~tms_hbase.storage.connection.DeadlineSocket` or the asyncio pool's), so every byte of a request and
of its answer, headers included, goes through that socket's reads and writes: the same deadlines, TLS
(HTTPS), fail-over and error mapping as the binary transport. A minimal HTTP/1.1 client rather than
``http.client`` or thriftpy2's ``THttpClient``, whose sockets wait by their own per-read timeouts, not by
the call's deadline, and cannot run on the asyncio driver's socket.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

SERVER_IDLE_SECONDS = 30.0
"""How long HBase's Thrift HTTP server (Jetty, whose default it keeps) holds an idle connection open."""

MAX_HEADER_BYTES = 64 * 1024
"""The most an answer's status line and headers may take (Jetty's own limit is 64 KiB too): more is not
the HBase gateway."""

_READ = 64 * 1024


class HttpStatus(Exception):
    """The gateway answered a Thrift request with an HTTP status other than 200 (not a TmsError: the pool
    wraps it): ``status``, and what the answer said."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class NotHttp(Exception):
    """The answer is not HTTP, or not one this client can read (the pool reports it as not a Thrift reply)."""


class Socket(Protocol):
    """What :class:`HttpChannel` needs of a connection's socket: a connection that reads and writes by its
    deadline (``read`` returns at least one byte, or raises at the end of the stream)."""

    host: str
    port: int

    def open(self) -> None: ...

    def close(self) -> None: ...

    def is_open(self) -> bool: ...

    def read(self, sz: int) -> bytes: ...

    def write(self, buf: bytes) -> None: ...


class HttpChannel:
    """A Thrift transport underneath the buffered one: what it writes is collected, and on :meth:`flush`
    sent as one POST whose answer's body is appended to what :meth:`read` returns. One Thrift call per POST
    (HBase's servlet serves one), so the client flushes after each call; answers of calls written one after
    another (a pipeline) are read back in order. An answer longer than ``max_body`` bytes is refused. A
    connection the server said it closes (``Connection: close``) is opened again before the next request."""

    def __init__(self, socket: Socket, max_body: int, authorize: Callable[[str], bytes] | None = None) -> None:
        self.socket = socket
        self.max_body = max_body  # a longer answer is refused as soon as it says so (NotHttp)
        self.authorize = authorize  # the Authorization header line of each request, for the gateway's host
        self._request = bytearray()
        self._replies: deque[bytes] = deque()  # the Thrift bytes of answers not read yet, each answer's body
        self._at = 0  # where the first of them is read up to
        self._inbox = bytearray()  # bytes read from the socket and not parsed yet
        self._closing = False  # the server closes the connection after the last answer
        self._head = (
            f"POST / HTTP/1.1\r\nHost: {socket.host}:{socket.port}\r\nContent-Type: application/x-thrift\r\n"
            "Accept: application/x-thrift\r\nUser-Agent: tms-hbase\r\n"
        ).encode()

    def is_open(self) -> bool:
        return self.socket.is_open()

    def open(self) -> None:
        self.socket.open()

    def close(self) -> None:
        self._request.clear()
        self._replies.clear()
        self._at = 0
        self._inbox.clear()
        self.socket.close()

    def write(self, buf: bytes) -> None:
        self._request += buf

    def read(self, sz: int) -> bytes:
        if not self._replies:
            raise NotHttp("the HTTP answer ended before its Thrift reply did")
        body, at = self._replies[0], self._at
        end = at + sz
        if end < len(body):
            self._at = end
            return body[at:end]
        self._replies.popleft()
        self._at = 0
        return body[at:] if at else body

    def flush(self) -> None:
        """Send what was written as one POST and take in its answer (nothing to send: nothing happens)."""
        if not self._request:
            return
        if self._closing:
            self._closing = False
            self._inbox.clear()
            self.socket.close()
            self.socket.open()
        body = bytes(self._request)
        self._request.clear()
        head = self._head + self.authorize(self.socket.host) if self.authorize else self._head
        self.socket.write(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self._answer()

    def _answer(self) -> None:
        status, headers = self._read_head()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = self._read_chunked()
        elif "content-length" in headers:
            parts: list[bytes] = []
            self._take(self._check(_length(headers["content-length"])), parts)
            body = b"".join(parts)
        else:  # (an HTTP/1.0 server's body would run to the end of the connection; Jetty's never does)
            raise NotHttp(f"an HTTP {status} answer without a length")
        if headers.get("connection", "").lower() == "close":
            self._closing = True
        if status != 200:
            text = body[:200].decode("utf-8", "replace").strip().splitlines()
            reason = f"HTTP {status}" + (f": {text[0]}" if text else "")
            if status == 401 and "negotiate" in headers.get("www-authenticate", "").lower():
                reason += (
                    " (the gateway refused this client's Kerberos ticket)"
                    if self.authorize
                    else " (the gateway asks for Kerberos, SPNEGO: --thrift-kerberos)"
                )
            raise HttpStatus(status, reason)
        if body:
            self._replies.append(body)

    def _fill(self) -> None:
        self._inbox += self.socket.read(_READ)

    def _read_line(self) -> bytes:
        while (end := self._inbox.find(b"\r\n")) < 0:
            if len(self._inbox) > MAX_HEADER_BYTES:
                raise NotHttp(f"an HTTP line longer than {MAX_HEADER_BYTES} bytes")
            self._fill()
        line = bytes(self._inbox[:end])
        del self._inbox[: end + 2]
        return line

    def _read_head(self) -> tuple[int, dict[str, str]]:
        """The status and headers (names in lower case) of the next answer; an interim 1xx answer is skipped."""
        while True:
            status_line = self._read_line()
            parts = status_line.split(b" ", 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
                raise NotHttp(f"not an HTTP answer: {status_line[:40]!r}")
            headers: dict[str, str] = {}
            size = len(status_line)
            while line := self._read_line():
                size += len(line)
                if size > MAX_HEADER_BYTES:
                    raise NotHttp(f"HTTP headers longer than {MAX_HEADER_BYTES} bytes")
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            status = int(parts[1])
            if status >= 200:
                return status, headers

    def _check(self, size: int) -> int:
        if size > self.max_body:
            raise NotHttp(f"an HTTP answer of {size} bytes")
        return size

    def _take(self, size: int, parts: list[bytes]) -> None:
        """Append the next ``size`` bytes of the answer to ``parts``: the socket's reads as they are, not copied
        through the inbox (an answer is megabytes; the caller joins the parts once)."""
        inbox = self._inbox
        if len(inbox) >= size:
            with memoryview(inbox) as view:
                parts.append(bytes(view[:size]))
            del inbox[:size]
            return
        parts.append(bytes(inbox))
        got = len(inbox)
        inbox.clear()
        while got < size:
            piece = self.socket.read(_READ)
            if got + len(piece) > size:
                inbox += piece[size - got :]
                piece = piece[: size - got]
            parts.append(piece)
            got += len(piece)

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        length = 0
        while True:
            size_line = self._read_line().split(b";", 1)[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                raise NotHttp(f"a bad HTTP chunk size {size_line[:20]!r}") from None
            if size == 0:
                while self._read_line():  # trailers, up to the empty line
                    pass
                return b"".join(parts)
            length = self._check(length + size)
            self._take(size, parts)
            if self._read_line():
                raise NotHttp("an HTTP chunk longer than it said")


def _length(text: str) -> int:
    if not text.isdigit():
        raise NotHttp(f"a bad HTTP Content-Length {text[:20]!r}")
    return int(text)
