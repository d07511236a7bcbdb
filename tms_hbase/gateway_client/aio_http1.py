"""HTTP/1.1 client connections for asyncio (plain or TLS) and their pool: what
:class:`tms_hbase.gateway_client.aio.AsyncGatewayClient` sends and reads.

The request bytes and the response parser are :mod:`tms_hbase.gateway_client.http1`'s, which the blocking
client uses, run here over asyncio streams: one write per request, answers read from the stream's
buffer, the same limits and the same :class:`~tms_hbase.gateway_client.http1.ProtocolError` for what is
not HTTP/1.1. Why not httpx: its connection pool looks at every connection for every request it places
(a readiness check per idle connection), so 64 calls in flight on one loop ran at a few dozen a second
(``bench/gateway_aio.py``); and it sends a request's head and body in two writes.

Deadlines and cancellation are the caller's (``asyncio.timeout``); a connection whose exchange did not
finish is aborted, never given back to the pool.
"""

from __future__ import annotations

import asyncio
import ssl
import time

from tms_hbase.gateway_client import http1
from tms_hbase.gateway_client.http1 import ProtocolError, Response


class AsyncConnection:
    """A connection to ``host:port`` (TLS with ``context``), opened by :meth:`connect`; one exchange at a
    time. ``sent`` tells whether the last exchange's request began to go out."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext | None) -> None:
        self.host, self.port, self.context = host, port, context
        self.host_line = http1.host_line(host, port, context is not None)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.sent = False

    @property
    def connected(self) -> bool:
        return self._writer is not None

    async def connect(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(
            self.host,
            self.port,
            ssl=self.context,
            server_hostname=self.host if self.context is not None else None,
            limit=http1.MAX_LINE + 1,
        )

    def usable(self) -> bool:
        """An idle connection is usable unless the server closed it (the loop has seen its end)."""
        if self._reader is None or self._writer is None or self._writer.is_closing():
            return False
        return not self._reader.at_eof()

    def abort(self) -> None:
        """Drop the connection at once (an exchange cut short: what is left of its answer is not read)."""
        if self._writer is not None:
            self._writer.transport.abort()
        self._reader = self._writer = None

    async def exchange(self, method: str, target: str, headers: bytes, body: bytes | None) -> Response:
        """Send one request (``headers``: from :func:`http1.header_lines`) and read its response."""
        if self._reader is None or self._writer is None:
            raise ProtocolError("not connected")
        self.sent = True
        self._writer.write(http1.request_bytes(self.host_line, method, target, headers, body))
        reader = self._reader
        parser = http1.read_response(method)
        need = next(parser)
        while True:
            if need.until_closed:
                data = await reader.read()
            elif need.line:
                data = await _line(reader)
            else:
                data = await _read(reader, need.size)
            try:
                need = parser.send(data)
            except StopIteration as done:
                return done.value


async def _line(reader: asyncio.StreamReader) -> bytes:
    """Up to and including the next newline, as ``readline`` gives it; an over-long line comes back longer
    than :data:`http1.MAX_LINE` (the parser refuses it), the end of the stream shorter."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as end:
        return end.partial
    except asyncio.LimitOverrunError:
        return b"x" * (http1.MAX_LINE + 1)


async def _read(reader: asyncio.StreamReader, size: int) -> bytes:
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as end:
        return end.partial


class AsyncPool:
    """Idle keep-alive connections to one gateway, newest first (at most ``size`` kept, each idle at
    most ``max_idle`` seconds), and at most ``max_connections`` exchanges at once (more wait in
    :meth:`take`, within the caller's deadline)."""

    def __init__(
        self,
        host: str,
        port: int,
        context: ssl.SSLContext | None,
        size: int,
        max_idle: float,
        max_connections: int,
    ) -> None:
        self.host, self.port, self.context = host, port, context
        self.size, self.max_idle = size, max_idle
        self._idle: list[tuple[AsyncConnection, float]] = []
        self._slots = asyncio.Semaphore(max_connections)

    async def take(self) -> tuple[AsyncConnection, bool]:
        """A connection (and whether it was used before) once fewer than ``max_connections`` are in use;
        a new one is not connected yet. Give it back with :meth:`give_back` or :meth:`discard`."""
        await self._slots.acquire()
        while self._idle:
            conn, since = self._idle.pop()
            if time.monotonic() - since < self.max_idle and conn.usable():
                return conn, True
            conn.abort()
        return AsyncConnection(self.host, self.port, self.context), False

    def give_back(self, conn: AsyncConnection, keep_alive: bool) -> None:
        self._slots.release()
        if keep_alive and len(self._idle) < self.size:
            self._idle.append((conn, time.monotonic()))
        else:
            conn.abort()

    def discard(self, conn: AsyncConnection) -> None:
        self._slots.release()
        conn.abort()

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.abort()
