"""One worker's gateway: its MessagingClient, the bounded thread pools its library calls run in, the
guard, the metrics and the settings. Built when the worker starts (ASGI lifespan), closed when it stops."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from tms_hbase import MessagingClient
from tms_hbase.errors import HBaseUnavailable, TmsError

from .auth import Guard
from .config import Settings
from .metrics import Metrics
from .sessions import Sessions, SharedSessions
from .threads import Threads

log = logging.getLogger(__name__)
T = TypeVar("T")


class Gateway:
    """The library is synchronous: every call runs in a worker thread, at most ``settings.threads`` at
    once (the same number as the client's HBase connections, so no thread waits for a connection)."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.guard = Guard(settings)
        extra: dict[str, Any] = (
            {} if settings.max_batch_bytes is None else {"max_batch_bytes": settings.max_batch_bytes}
        )
        self.client = MessagingClient(
            settings.thrift, settings.prefix, timeout_seconds=settings.timeout, pool_size=settings.threads, **extra
        )
        self.threads = Threads(settings.threads, "tms-gateway")
        # long-polls wait in threads of their own, so waiting consumers never starve publishes
        self.waiters = Threads(settings.long_polls, "tms-gateway-wait")
        self.sessions = Sessions(settings.consumer_sessions, settings.consumer_lease, metrics.consumer_sessions.set)
        self.shared_sessions = SharedSessions(
            settings.consumer_sessions, lambda t, n, o: self.client.shared_consumer(t, n, owner=o, max_wait_seconds=0.0)
        )
        self.stopping = threading.Event()  # set on SIGTERM/SIGINT: long-polls answer at once
        # a full batch as base64 JSON, with room for the framing
        self.max_body_bytes = self.client.max_batch_bytes * 3 // 2 + 64 * 1024
        log.info("worker %d serving %r with %d threads", os.getpid(), self.client, settings.threads)

    def warm(self) -> None:
        """Read HBase's clock once, so that the first publish does not pay for it (a failure only means
        the first call that needs the clock reads it)."""
        try:
            self.client.hbase_clock.now_ms()
        except TmsError as exc:
            log.info("could not read HBase's clock at start (the first call that needs it will): %s", exc)

    async def run(self, call: Callable[..., T], *args: object) -> T:
        """Run a blocking library call in the pool."""
        return await self.threads.run(call, *args)

    async def wait(self, call: Callable[..., T], *args: object) -> T:
        """Run a library call that waits (a slice of a long-poll) in the long-poll threads."""
        return await self.waiters.run(call, *args)

    async def ping(self) -> None:
        """HBase answers within the timeout, or HBaseUnavailable (a hung ping is abandoned, not awaited)."""
        try:
            async with asyncio.timeout(self.settings.timeout):
                await self.threads.run(self.client.ping, abandon=True)
        except TimeoutError:
            seconds = self.settings.timeout
            raise HBaseUnavailable(f"HBase at {self.settings.thrift} did not answer within {seconds}s") from None

    def close(self) -> None:
        self.sessions.close()
        self.threads.close()
        self.waiters.close()
        self.client.close()
