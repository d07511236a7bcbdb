"""One HTTP/1.1 client connection (plain or TLS): what
:class:`tms_hbase.gateway_client.http.GatewayClient` sends and reads, and the request and response
codec that the asyncio connection (:mod:`tms_hbase.gateway_client.aio_http1`) shares with it: the
response parser is a generator that says what to read next (:func:`read_response`), so a blocking and an
asyncio driver run the same parsing.

Why not the standard library's ``http.client``: per call it builds the request line by line (a regular
expression per header), sends the head and the body in two writes, wraps the socket in a new buffered
file for every response and parses the response headers with the ``email`` package. For a 100-message
publish that was about 170 µs of the client's 260 µs of CPU per call (``bench/gateway_cpu.py``). Here
the request goes out in one write and the response is read from one buffered reader per connection.

It reads what HTTP/1.1 servers send (``Content-Length``, chunked, or up to the close; interim 1xx
answers skipped) and refuses anything else with :class:`ProtocolError`, within limits on line length and
header count, so a garbage server is a clear error rather than a hang or a huge allocation. Deadlines are
the caller's (the socket's timeout, and shutting the socket down from another thread).
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Generator
from dataclasses import dataclass
from typing import BinaryIO

from tms_hbase.errors import InvalidArgument

MAX_LINE = 65536  # a status, header or chunk-size line (http.client's limit)
MAX_HEADERS = 100
_READ_CHUNK = 8 << 20  # a longer body is read in pieces, so a lying Content-Length allocates little up front
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class ProtocolError(Exception):
    """The server's answer is not HTTP/1.1 this client can read, or the connection ended inside it."""


class ClosedBeforeAnswer(ProtocolError):
    """The server closed the connection before the first byte of an answer (a kept-alive connection it
    had closed: the request may not have arrived)."""


STALE = (ClosedBeforeAnswer, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
"""What a kept-alive connection the server had closed fails with before any answer."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]  # names in lower case; a repeated header keeps its last value
    body: bytes
    keep_alive: bool  # the connection may carry another request


def header_lines(headers: dict[str, str]) -> bytes:
    """``Name: value`` lines for a request head; InvalidArgument for a control character (CR, LF, ...) in
    one, which would split the header or smuggle another."""
    lines = []
    for name, value in headers.items():
        if _CONTROL.search(name) or _CONTROL.search(value) or ":" in name or not name:
            raise InvalidArgument(f"bad HTTP header {name!r}: a control character (line break?) or a colon in the name")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode("latin-1")


class Connection:
    """A connection to ``host:port`` (TLS with ``context``), opened by :meth:`connect`; one exchange at a
    time. ``sock`` is the socket (None before connecting): shut it down to end a call in flight."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext | None) -> None:
        self.host, self.port, self.context = host, port, context
        self.sock: socket.socket | None = None
        self._reader: BinaryIO | None = None
        self.host_line = host_line(host, port, context is not None)

    def connect(self, timeout: float) -> None:
        sock = socket.create_connection((self.host, self.port), timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                sock = self.context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.sock = sock
        self._reader = sock.makefile("rb")

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def exchange(self, method: str, target: str, headers: bytes, body: bytes | None) -> Response:
        """Send one request (``headers``: from :func:`header_lines`) and read its response."""
        if self.sock is None or self._reader is None:
            raise ProtocolError("not connected")
        self.sock.sendall(request_bytes(self.host_line, method, target, headers, body))
        reader = self._reader
        parser = read_response(method)
        need = next(parser)
        while True:
            try:
                if need.until_closed:
                    data = b"".join(iter(lambda: reader.read(_READ_CHUNK), b""))
                elif need.line:
                    data = reader.readline(need.size)
                else:
                    data = reader.read(need.size)
                need = parser.send(data)
            except StopIteration as done:
                return done.value


def request_bytes(host_line: bytes, method: str, target: str, headers: bytes, body: bytes | None) -> bytes:
    """One request, head and body, to go out in one write (``host_line``: ``Host: ...\\r\\n``)."""
    length = b"" if body is None else b"Content-Length: %d\r\n" % len(body)
    head = f"{method} {target} HTTP/1.1\r\n".encode("ascii") + host_line + headers + length + b"\r\n"
    return head if body is None else head + body


def host_line(host: str, port: int, tls: bool) -> bytes:
    """The ``Host`` header of requests to ``host:port`` (the port left out where it is the default)."""
    name = f"[{host}]" if ":" in host else host  # an IPv6 address goes in brackets
    value = name if port == (443 if tls else 80) else f"{name}:{port}"
    return b"Host: " + value.encode("ascii" if value.isascii() else "idna") + b"\r\n"


# -- reading a response, without I/O ------------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """What the response parser wants next from the connection: a line of at most ``size`` bytes (its
    end included; fewer at the end of the stream), up to ``size`` bytes (fewer only at the end), or
    everything up to the close (``until_closed``)."""

    size: int = 0
    line: bool = False
    until_closed: bool = False


_LINE = Need(MAX_LINE + 1, line=True)

Parser = Generator[Need, bytes, Response]


def read_response(method: str) -> Parser:
    """The response to a ``method`` request, as a generator: it yields what it needs to read and is sent
    the bytes read, until it returns the :class:`Response` (or raises :class:`ProtocolError`). The
    blocking :class:`Connection` and the asyncio one both run it, so both read answers alike."""
    while True:
        line = yield _LINE
        if not line:
            raise ClosedBeforeAnswer("the server closed the connection without answering")
        version, status = _status_line(line)
        headers = yield from _headers()
        if not 100 <= status < 200 or status == 101:
            break  # 1xx: an interim answer (100 Continue), the real one follows
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
    if "transfer-encoding" in headers:
        if headers["transfer-encoding"].lower() != "chunked":
            raise ProtocolError(f"unsupported Transfer-Encoding {headers['transfer-encoding']!r}")
        body = yield from _chunked()
    elif "content-length" in headers:
        text = headers["content-length"].strip()
        if not text.isdigit() or not text.isascii():
            raise ProtocolError(f"bad Content-Length {text!r}")
        body = yield from _exactly(int(text))
    elif status in (204, 304) or method == "HEAD":
        body = b""
    else:  # no framing: the body ends with the connection
        body, keep_alive = (yield Need(until_closed=True)), False
    return Response(status, headers, body, keep_alive)


def _headers() -> Generator[Need, bytes, dict[str, str]]:
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        line = yield from _line("header")
        if line in (b"\r\n", b"\n"):
            return headers
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon or not name or name != name.strip():
            raise ProtocolError(f"bad header line {line[:80]!r}")
        headers[name.lower()] = value.strip()
    raise ProtocolError(f"more than {MAX_HEADERS} headers")


def _line(what: str) -> Generator[Need, bytes, bytes]:
    line = yield _LINE
    if len(line) > MAX_LINE:
        raise ProtocolError(f"{what} line over {MAX_LINE} bytes")
    if not line.endswith(b"\n"):
        raise ProtocolError(f"the connection ended inside a {what} line")
    return line


def _exactly(size: int) -> Generator[Need, bytes, bytes]:
    """``size`` bytes, asked for in pieces of at most 8 MiB (a lying Content-Length allocates little)."""
    parts: list[bytes] = []
    left = size
    while left:
        part = yield Need(min(left, _READ_CHUNK))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    if left:
        raise ProtocolError(f"the connection ended {left} bytes before the end of the body")
    return b"".join(parts)


def _chunked() -> Generator[Need, bytes, bytes]:
    parts: list[bytes] = []
    while True:
        text = (yield from _line("chunk size")).split(b";", 1)[0].strip()
        try:
            size = int(text, 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size {text[:80]!r}") from None
        if size < 0:
            raise ProtocolError(f"bad chunk size {text[:80]!r}")
        if size == 0:
            yield from _headers()  # trailers, up to the blank line
            return b"".join(parts)
        parts.append((yield from _exactly(size)))
        if (yield from _line("chunk end")) not in (b"\r\n", b"\n"):
            raise ProtocolError("a chunk is longer than its size says")


def _status_line(line: bytes) -> tuple[str, int]:
    if len(line) > MAX_LINE:
        raise ProtocolError(f"status line over {MAX_LINE} bytes")
    if not line.endswith(b"\n"):
        raise ProtocolError("the connection ended inside the status line")
    parts = line.decode("latin-1").split(None, 2)
    if len(parts) < 2 or parts[0] not in ("HTTP/1.1", "HTTP/1.0") or not (parts[1].isdigit() and len(parts[1]) == 3):
        raise ProtocolError(f"not an HTTP/1.1 status line: {line[:80]!r}")
    return parts[0], int(parts[1])
