"""One worker's gateway: its library client running on the worker's event loop, the guard, the metrics and
the settings. Built when the worker starts (ASGI lifespan, :meth:`Gateway.open`), closed when it stops.

The library calls run on the event loop itself, as the asyncio client runs them
(:mod:`tms_hbase.aio`): the synchronous client's protocol code in a greenlet
(:func:`tms_hbase.runtime.bridge.run_sync`) over the asyncio storage driver
(:class:`~tms_hbase.storage.aio.AsyncHBaseConnection`), so every HBase call, backoff and consumer wait
waits on the loop and no call hops to a thread. The gateway keeps the synchronous client's objects
(rather than :class:`~tms_hbase.aio.AsyncMessagingClient`'s wrappers) because its consumer sessions
park, take up and detach library consumers between HTTP calls (:mod:`.sessions`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from tms_hbase import MessagingClient
from tms_hbase.config import Config
from tms_hbase.errors import HBaseUnavailable, TmsError
from tms_hbase.runtime.bridge import run_sync, run_to_end
from tms_hbase.storage.aio import AsyncHBaseConnection

from .auth import Guard
from .config import Settings
from .metrics import Metrics
from .sessions import Sessions, SharedSessions

log = logging.getLogger(__name__)
T = TypeVar("T")


class LoopClient(MessagingClient):
    """The synchronous client's protocol code over the asyncio storage driver: made and used inside
    :func:`~tms_hbase.runtime.bridge.run_sync`."""

    _pool_class = AsyncHBaseConnection


class Gateway:
    """At most ``settings.threads`` library calls run at once (the client's HBase connections, so no call
    waits for a connection) and at most ``settings.long_polls`` long-poll waits, apart, so waiting
    consumers never hold up publishes. A call whose request is cancelled (its client went away, the
    worker stops) runs on to its end first: the library is never left half-way behind a finished request."""

    def __init__(self, settings: Settings, metrics: Metrics, client: MessagingClient) -> None:
        self.settings = settings
        self.metrics = metrics
        self.guard = Guard(settings)
        self.client = client
        self._calls = asyncio.Semaphore(settings.threads)
        self._waits = asyncio.Semaphore(settings.long_polls)
        self.sessions = Sessions(settings.consumer_sessions, settings.consumer_lease, metrics.consumer_sessions.set)
        self.shared_sessions = SharedSessions(
            settings.consumer_sessions,
            lambda t, n, o, i: self.client.shared_consumer(t, n, owner=o, max_wait_seconds=0.0, isolation=i),
        )
        self.stopping = threading.Event()  # set on SIGTERM/SIGINT (a signal handler): long-polls answer at once
        # a full batch as base64 JSON, with room for the framing
        self.max_body_bytes = self.client.max_batch_bytes * 3 // 2 + 64 * 1024
        self._warming: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, settings: Settings, metrics: Metrics) -> Gateway:
        """The worker's gateway, its client made on this event loop; HBase's clock is read in the
        background, so that the first publish does not pay for it."""
        extra: dict[str, Any] = (
            {} if settings.max_batch_bytes is None else {"max_batch_bytes": settings.max_batch_bytes}
        )
        config = Config.resolve(
            settings.thrift,
            settings.prefix,
            timeout_seconds=settings.timeout,
            pool_size=settings.threads,
            transport=settings.thrift_transport(),
        )
        client = await run_sync(LoopClient, config=config, **extra)
        gateway = cls(settings, metrics, client)
        gateway._warming = asyncio.ensure_future(gateway._warm())
        log.info("worker %d serving %r, %d library calls at once", os.getpid(), client, settings.threads)
        return gateway

    async def _warm(self) -> None:
        """Read HBase's clock once (a failure only means the first call that needs it reads it)."""
        try:
            await run_sync(self.client.hbase_clock.now_ms)
        except TmsError as exc:
            log.info("could not read HBase's clock at start (the first call that needs it will): %s", exc)

    async def run(self, call: Callable[..., T], *args: object) -> T:
        """``call(*args)``: library code (and the decoding and encoding around it) on the loop."""
        async with self._calls:
            return await run_to_end(call, *args)

    async def wait(self, call: Callable[..., T], *args: object) -> T:
        """A library call that waits (a slice of a long-poll), among the long-poll waits."""
        async with self._waits:
            return await run_to_end(call, *args)

    async def ping(self) -> None:
        """HBase answers within the timeout, or HBaseUnavailable (a hung ping is interrupted: it reads only)."""
        try:
            async with asyncio.timeout(self.settings.timeout):
                await run_sync(self.client.ping)
        except TimeoutError:
            seconds = self.settings.timeout
            raise HBaseUnavailable(f"HBase at {self.settings.thrift} did not answer within {seconds}s") from None

    async def close(self) -> None:
        if self._warming is not None:
            self._warming.cancel()
        await self.sessions.stop_reading()
        await run_sync(self.sessions.close)
        await run_sync(self.client.close)
