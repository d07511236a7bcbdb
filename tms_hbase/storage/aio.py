"""The storage port's asyncio driver: HBase Thrift calls whose socket waits on the event loop.

:class:`AsyncHBaseConnection` is the pool of :mod:`tms_hbase.storage.connection` (the same deadlines,
retry policy, fail-over and error mapping, the same Thrift client and codec: it is that class) whose
connections are non-blocking sockets that wait on the event loop instead of blocking ones. It is made and used inside
:func:`tms_hbase.runtime.bridge.run_sync`: when a Thrift call writes its request or waits for its answer, the
greenlet making it hands the wait to the event loop, so as many calls are in flight at once as the pool
has connections, on one thread. The protocol code above (the :class:`~tms_hbase.storage.hbase.Table`
operations and everything built on them) is unchanged.

Deadlines are kept as in the blocking socket: every connect, read and write waits only for the time
left, so a hung or trickling gateway fails the call when the deadline passes, and an answer announcing
a value larger than any cell is refused (:class:`~tms_hbase.storage.connection.NotThrift`). With TLS, the
socket is wrapped in the pool's SSL context and its handshake, reads and writes wait on the loop the same way.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from thriftpy2.transport import TTransportException

from tms_hbase.runtime import bridge
from tms_hbase.storage.connection import Connection, HBaseConnection, check_read_size, time_left

T = TypeVar("T")

_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
"""What a non-blocking socket's (or TLS socket's) call raises when it must wait for the socket."""


class _LoopSocket:
    """A TCP connection on the event loop with the interface of the blocking Thrift socket
    (:class:`~tms_hbase.storage.connection.DeadlineSocket`): its connect, reads and writes end by
    ``deadline`` (monotonic time).

    A non-blocking socket read and written directly: a read whose bytes are there already (most of
    an answer, read in :data:`~tms_hbase.storage.connection.READ_BUFFER` chunks) and a write the
    socket's buffer takes whole are one system call each, with no trip through the event loop (no
    coroutine, timer or stream buffer: an asyncio stream copies every byte twice more, under the GIL).
    Only a read that must wait for the server, or a write it must wait to take, waits through
    :func:`tms_hbase.runtime.bridge.await_`, for the time left. With ``tls`` (an SSL context), a TLS
    socket, non-blocking too."""

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> None:
        self.host = host
        self.port = port
        self.deadline: float | None = None
        self.tls = tls
        self._sock: socket.socket | None = None

    def is_open(self) -> bool:
        return self._sock is not None

    def open(self) -> None:
        self._sock = bridge.await_(self._connect())

    async def _connect(self) -> socket.socket:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(time_left(self.deadline)):
            infos: list[tuple[Any, ...]]
            try:  # an address needs no lookup (the loop's would take a thread of its executor)
                infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
            except socket.gaierror:
                infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            failure: OSError | None = None
            for family, kind, proto, _name, address in infos:
                sock = socket.socket(family, kind, proto)
                try:
                    sock.setblocking(False)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    await loop.sock_connect(sock, address)
                    return sock if self.tls is None else await self._handshake(loop, sock)
                except OSError as exc:
                    sock.close()
                    failure = exc
                except BaseException:
                    sock.close()
                    raise
            raise failure or OSError(f"cannot resolve {self.host}:{self.port}")

    async def _handshake(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> ssl.SSLSocket:
        """``sock`` wrapped in the TLS context, its handshake done (on the loop: the caller bounds it)."""
        assert self.tls is not None
        tls = self.tls.wrap_socket(sock, server_hostname=self.host, do_handshake_on_connect=False)
        while True:
            try:
                tls.do_handshake()
                return tls
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError) as wait:
                ready: asyncio.Future[None] = loop.create_future()
                fd = tls.fileno()
                writing = isinstance(wait, ssl.SSLWantWriteError)

                def wake(ready: asyncio.Future[None] = ready) -> None:
                    if not ready.done():  # (the loop may call it again before the wait ends)
                        ready.set_result(None)

                (loop.add_writer if writing else loop.add_reader)(fd, wake)
                try:
                    await ready
                finally:
                    (loop.remove_writer if writing else loop.remove_reader)(fd)

    def _open_socket(self) -> socket.socket:
        if self._sock is None:
            raise TTransportException(TTransportException.NOT_OPEN, "the connection is closed")
        return self._sock

    def read(self, sz: int) -> bytes:
        check_read_size(sz)
        sock = self._open_socket()
        time_left(self.deadline)  # TimeoutError once it has passed, however many bytes keep arriving
        try:
            data = sock.recv(sz)
        except _WOULD_BLOCK:
            data = self._wait(sock, partial(sock.recv, sz), writing=False)
        if not data:
            raise TTransportException(TTransportException.END_OF_FILE, "TSocket read 0 bytes")
        return data

    def write(self, data: bytes) -> None:
        sock = self._open_socket()
        time_left(self.deadline)
        try:
            sent = sock.send(data)
        except _WOULD_BLOCK:
            sent = 0
        rest = memoryview(data)[sent:]
        while rest:  # the socket's buffer is full: send the rest as it drains
            sent = self._wait(sock, partial(sock.send, rest), writing=True)
            rest = rest[sent:]

    def _wait(self, sock: socket.socket, attempt: Callable[[], T], *, writing: bool) -> T:
        """``attempt()`` (a recv or a send) once ``sock`` is ready for it, by the deadline (TimeoutError).

        One future of the loop, a reader (or writer) callback that makes the system call itself and a timer
        for the deadline: the greenlet is resumed once, with the bytes, after one loop wake-up; no coroutine,
        no ``asyncio.timeout`` and no second try before waiting (as ``loop.sock_recv`` makes)."""
        left = time_left(self.deadline)
        loop = bridge.event_loop()
        done: asyncio.Future[T] = loop.create_future()

        def ready() -> None:
            if done.done():
                return
            try:
                done.set_result(attempt())
            except _WOULD_BLOCK:
                return  # woken for nothing: wait on
            except OSError as exc:  # (the caller gets it as the blocking socket would raise it)
                done.set_exception(exc)

        def expired() -> None:
            if not done.done():
                done.set_exception(TimeoutError("timed out"))

        fd = sock.fileno()
        if writing:
            loop.add_writer(fd, ready)
        else:
            loop.add_reader(fd, ready)
        timer = None if left is None else loop.call_later(left, expired)
        try:
            return bridge.await_(done)
        finally:
            if writing:
                loop.remove_writer(fd)
            else:
                loop.remove_reader(fd)
            if timer is not None:
                timer.cancel()

    def flush(self) -> None:
        """Nothing to do: :meth:`write` sends."""

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()  # no half-read answer can be mistaken for the next one


class _LoopConnection(Connection):
    """A connection on a :class:`_LoopSocket`."""

    socket_class = _LoopSocket  # type: ignore[assignment]


class AsyncHBaseConnection(HBaseConnection):
    """:class:`~tms_hbase.storage.connection.HBaseConnection` over asyncio streams: make and use it inside
    :func:`tms_hbase.runtime.bridge.run_sync` (its slots and backoffs wait on the event loop too)."""

    connection_class = _LoopConnection

    def __init__(self, host: str, port: int, **options: Any) -> None:
        if not bridge.inside():
            raise RuntimeError("an AsyncHBaseConnection is made inside tms_hbase.runtime.bridge.run_sync")
        super().__init__(host, port, **options)
