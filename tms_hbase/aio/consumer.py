"""AsyncConsumer: the exclusive consumer of a subscription for asyncio, ``async with`` and ``async for``.

It is the synchronous :class:`~tms_hbase.consume.consumer.Consumer` run on the event loop
(:func:`tms_hbase.runtime.bridge.run_sync`): its lease is renewed by a task of the loop, and while it waits for
messages it waits on its doorbell's socket through the loop, so a publish wakes it at once and nothing
blocks the loop.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import TracebackType

from tms_hbase.aio.api import AsyncSubscriptionConsumer
from tms_hbase.consume.consumer import Consumer
from tms_hbase.errors import TmsError
from tms_hbase.model.message import Message
from tms_hbase.runtime.bridge import run_sync

_END = object()


class AsyncConsumer(AsyncSubscriptionConsumer):
    """The active consumer of an exclusive subscription (``AsyncMessagingClient.consumer``): opened by
    ``async with`` or :meth:`open` (SubscriptionBusy there while another consumer holds the subscription)."""

    def __init__(self, open_consumer: Callable[[], Awaitable[Consumer]]) -> None:
        self._open = open_consumer
        self._consumer: Consumer | None = None

    async def __aenter__(self) -> AsyncConsumer:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._consumer is not None:
            await run_sync(self._consumer.__exit__, exc_type, exc, tb)

    async def open(self) -> None:
        """Take the subscription's lease; SubscriptionBusy while another consumer holds it."""
        if self._consumer is None:
            self._consumer = await self._open()

    def _opened(self) -> Consumer:
        if self._consumer is None:
            raise TmsError("the consumer is not open: use `async with client.consumer(...)` or `await open()`")
        return self._consumer

    @property
    def committed(self) -> bytes | None:
        """The id of the last message committed (where a new consumer would resume)."""
        return self._opened().committed

    @property
    def delivered(self) -> bytes | None:
        """The id of the last message delivered (what ``commit()`` stores)."""
        return self._opened().delivered

    async def poll(
        self, max_messages: int = 100, timeout_seconds: float = 1.0, *, commit: bool = False
    ) -> list[Message]:
        """Up to ``max_messages`` messages in order, as soon as there is one; ``[]`` after ``timeout_seconds``.
        ``commit``: first store the last delivered message as the mark."""
        consumer = self._opened()
        return await run_sync(functools.partial(consumer.poll, max_messages, timeout_seconds, commit=commit))

    def __aiter__(self) -> AsyncIterator[Message]:
        """Messages in order; waits up to the consumer's ``max_wait_seconds`` for the next one, then ends."""
        return self._messages(iter(self._opened()))

    @staticmethod
    async def _messages(messages: Iterator[Message]) -> AsyncIterator[Message]:
        while (message := await run_sync(next, messages, _END)) is not _END:
            yield message

    async def commit(self, message: Message | bytes | None = None) -> None:
        """Store the subscription's mark at ``message`` (default: the last delivered)."""
        consumer = self._opened()
        await run_sync(consumer.commit, message)

    async def close(self) -> None:
        """Give the lease back (a standby takes over at once). Idempotent."""
        if self._consumer is not None:
            await run_sync(self._consumer.close)
