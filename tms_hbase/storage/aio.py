"""The storage port's asyncio driver: HBase Thrift calls whose socket waits on the event loop.

:class:`AsyncHBaseConnection` is the pool of :mod:`tms_hbase.storage.connection` (the same deadlines,
retry policy, fail-over and error mapping, the same Thrift client and codec: it is that class) whose
connections are asyncio streams instead of blocking sockets. It is made and used inside
:func:`tms_hbase.model.green.run_sync`: when a Thrift call writes its request or waits for its answer, the
greenlet making it hands the wait to the event loop, so as many calls are in flight at once as the pool
has connections, on one thread. The protocol code above (the :class:`~tms_hbase.storage.hbase.Table`
operations and everything built on them) is unchanged.

Deadlines are kept as in the blocking socket: every connect, read and write waits only for the time
left, so a hung or trickling gateway fails the call when the deadline passes, and an answer announcing
a value larger than any cell is refused (:class:`~tms_hbase.storage.connection.NotThrift`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from thriftpy2.transport import TTransportException

from tms_hbase.model import green
from tms_hbase.storage.connection import HBaseConnection, _Connection, check_read_size, time_left


class _LoopSocket:
    """A TCP connection on the event loop with the interface of the blocking Thrift socket
    (:class:`~tms_hbase.storage.connection.DeadlineSocket`): its connect, reads and writes end by
    ``deadline`` (monotonic time) and wait through :func:`tms_hbase.model.green.await_`."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.deadline: float | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    def is_open(self) -> bool:
        return self._writer is not None

    def open(self) -> None:
        self._reader, self._writer = green.await_(self._connect())

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        async with asyncio.timeout(time_left(self.deadline)):
            return await asyncio.open_connection(self.host, self.port)

    def read(self, sz: int) -> bytes:
        check_read_size(sz)
        data = green.await_(self._read(sz))
        if not data:
            raise TTransportException(TTransportException.END_OF_FILE, "TSocket read 0 bytes")
        return data

    async def _read(self, sz: int) -> bytes:
        if self._reader is None:
            raise TTransportException(TTransportException.NOT_OPEN, "the connection is closed")
        async with asyncio.timeout(time_left(self.deadline)):
            return await self._reader.read(sz)

    def write(self, data: bytes) -> None:
        if self._writer is None:
            raise TTransportException(TTransportException.NOT_OPEN, "the connection is closed")
        self._writer.write(data)  # sent at once unless the socket's buffer is full
        if self._writer.transport.get_write_buffer_size():
            green.await_(self._drain(self._writer))

    async def _drain(self, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(time_left(self.deadline)):
            await writer.drain()

    def flush(self) -> None:
        """Nothing to do: :meth:`write` sends."""

    def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.transport.abort()  # no half-read answer can be mistaken for the next one


class _LoopConnection(_Connection):
    """A happybase connection on a :class:`_LoopSocket`."""

    socket_class = _LoopSocket  # type: ignore[assignment]


class AsyncHBaseConnection(HBaseConnection):
    """:class:`~tms_hbase.storage.connection.HBaseConnection` over asyncio streams: make and use it inside
    :func:`tms_hbase.model.green.run_sync` (its slots and backoffs wait on the event loop too)."""

    connection_class = _LoopConnection

    def __init__(self, host: str, port: int, **options: Any) -> None:
        if not green.bridged():
            raise RuntimeError("an AsyncHBaseConnection is made inside tms_hbase.model.green.run_sync")
        super().__init__(host, port, **options)
