"""The storage port's asyncio driver: HBase Thrift calls made by thriftpy2's asyncio client.

:class:`AsyncHBaseConnection` is the pool of :mod:`tms_hbase.storage.connection` (the same deadlines,
retry policy, fail-over and error mapping: it is that class) whose connections speak Thrift over
asyncio streams instead of blocking sockets. It is made and used inside
:func:`tms_hbase.model.green.run_sync`: each Thrift call hands its coroutine to the event loop, so as many
calls are in flight at once as the pool has connections, on one thread. The protocol code above (the
:class:`~tms_hbase.storage.hbase.Table` operations and everything built on them) is unchanged.

Deadlines are kept as in the blocking socket: every connect, read and write waits only for the time
left, so a hung or trickling gateway fails the call when the deadline passes, and an answer announcing
a value larger than any cell is refused (:class:`~tms_hbase.storage.connection.NotThrift`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import happybase  # noqa: F401 (its import loads Hbase_thrift)
import Hbase_thrift
from thriftpy2.contrib.aio.client import TAsyncClient
from thriftpy2.contrib.aio.protocol.binary import TAsyncBinaryProtocol
from thriftpy2.contrib.aio.transport.buffered import TAsyncBufferedTransport
from thriftpy2.transport import TTransportException

from tms_hbase.model import green
from tms_hbase.storage.connection import (
    READ_BUFFER,
    HBaseConnection,
    _Connection,
    check_read_size,
    decoding_failure,
    time_left,
)


class _AsyncSocket:
    """An asyncio TCP stream whose connect, reads and writes all end by ``deadline`` (monotonic time),
    with the interface thriftpy2's asyncio transports expect."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.deadline: float | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    def is_open(self) -> bool:
        return self._writer is not None

    async def open(self) -> None:
        async with asyncio.timeout(time_left(self.deadline)):
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)

    async def read(self, sz: int) -> bytes:
        check_read_size(sz)
        if self._reader is None:
            raise TTransportException(TTransportException.NOT_OPEN, "the connection is closed")
        async with asyncio.timeout(time_left(self.deadline)):
            data = await self._reader.read(sz)
        if not data:
            raise TTransportException(TTransportException.END_OF_FILE, "TSocket read 0 bytes")
        return data

    def write(self, data: bytes) -> None:
        if self._writer is None:
            raise TTransportException(TTransportException.NOT_OPEN, "the connection is closed")
        self._writer.write(data)

    async def flush(self) -> None:
        if self._writer is None:
            raise TTransportException(TTransportException.NOT_OPEN, "the connection is closed")
        async with asyncio.timeout(time_left(self.deadline)):
            await self._writer.drain()

    def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.transport.abort()  # no half-read answer can be mistaken for the next one


class _CheckedAsyncClient(TAsyncClient):
    """thriftpy2's asyncio client reporting an undecodable answer as NotThrift, as the blocking client does."""

    async def _recv(self, _api: str) -> Any:
        try:
            return await super()._recv(_api)
        except Exception as exc:
            failure = decoding_failure(exc)
            if failure is None:
                raise
            raise failure from exc


class _GreenClient:
    """The blocking Thrift client's interface over the asyncio one: each call waits on the event loop."""

    def __init__(self, client: _CheckedAsyncClient) -> None:
        self._client = client

    def __getattr__(self, api: str) -> Any:
        call = getattr(self._client, api)

        def on_loop(*args: Any, **kwargs: Any) -> Any:
            return green.await_(call(*args, **kwargs))

        return on_loop


class _GreenTransport:
    """happybase's view of the transport (open, close, is_open), opening on the event loop."""

    def __init__(self, transport: TAsyncBufferedTransport) -> None:
        self._transport = transport

    def is_open(self) -> bool:
        return bool(self._transport.is_open())

    def open(self) -> None:
        green.await_(self._transport.open())

    def close(self) -> None:
        self._transport.close()


class _AsyncConnection(_Connection):
    """A happybase connection whose Thrift client is thriftpy2's asyncio one, awaited on the event loop."""

    def _refresh_thrift_client(self) -> None:
        self.socket = _AsyncSocket(self.host, self.port)  # type: ignore[assignment]
        transport = TAsyncBufferedTransport(self.socket, buf_size=READ_BUFFER)
        self.transport = _GreenTransport(transport)
        protocol = TAsyncBinaryProtocol(transport, decode_response=False)
        self.client = _GreenClient(_CheckedAsyncClient(Hbase_thrift.Hbase, protocol))  # type: ignore[assignment]


class AsyncHBaseConnection(HBaseConnection):
    """:class:`~tms_hbase.storage.connection.HBaseConnection` over asyncio streams: make and use it inside
    :func:`tms_hbase.model.green.run_sync` (its slots and backoffs wait on the event loop)."""

    connection_class = _AsyncConnection

    def __init__(self, host: str, port: int, **options: Any) -> None:
        if not green.bridged():
            raise RuntimeError("an AsyncHBaseConnection is made inside tms_hbase.model.green.run_sync")
        super().__init__(host, port, **options)
