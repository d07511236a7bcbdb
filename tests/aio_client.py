"""The asyncio client for tests: an AsyncMessagingClient on a test's table prefix, and a runner that watches
the event loop (asyncio debug mode's slow-callback log, and a heartbeat) for anything that blocks it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tms_hbase.aio import AsyncMessagingClient

T = TypeVar("T")


@asynccontextmanager
async def async_client(address: str, prefix: str, **options: Any) -> AsyncIterator[AsyncMessagingClient]:
    """An AsyncMessagingClient on ``prefix`` (the test's prefix fixture drops its tables), closed afterwards;
    its first create_topic creates the tables unless ``create_tables=False`` is passed."""
    async with AsyncMessagingClient(address, prefix, **{"create_tables": True, **options}) as client:
        yield client


@dataclass
class LoopWatch:
    """What :func:`run_watched` saw: the longest gap between heartbeats and the callbacks debug mode logged
    as slow."""

    longest_gap: float = 0.0
    slow_callbacks: list[str] = field(default_factory=list)


class _SlowCallbacks(logging.Handler):
    def __init__(self, watch: LoopWatch) -> None:
        super().__init__(logging.WARNING)
        self.watch = watch

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Executing"):
            self.watch.slow_callbacks.append(message)


def run_watched(main: Callable[[], Awaitable[T]], slow_seconds: float) -> tuple[T, LoopWatch]:
    """``asyncio.run(main())`` in debug mode with ``slow_callback_duration = slow_seconds``, and a heartbeat
    task every 10 ms: a call that blocks the loop shows as a long gap and a slow callback."""
    watch = LoopWatch()
    handler = _SlowCallbacks(watch)
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)

    async def heartbeat() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            watch.longest_gap = max(watch.longest_gap, now - last)
            last = now

    async def watched() -> T:
        asyncio.get_running_loop().slow_callback_duration = slow_seconds
        beat = asyncio.create_task(heartbeat())
        try:
            return await main()
        finally:
            beat.cancel()

    try:
        return asyncio.run(watched(), debug=True), watch
    finally:
        logger.removeHandler(handler)
