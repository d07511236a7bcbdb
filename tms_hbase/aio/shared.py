"""AsyncSharedConsumer: one consumer of a shared subscription for asyncio, ``async with`` and ``async for``.

It is the synchronous :class:`~tms_hbase.shared.consumer.SharedConsumer` run on the event loop
(:func:`tms_hbase.runtime.bridge.run_sync`): its claims are written at once by greenlets, and while it is idle it
waits on its doorbell's socket through the loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import TracebackType

from tms_hbase.aio.api import AsyncSharedSubscriptionConsumer
from tms_hbase.errors import TmsError
from tms_hbase.model.message import Delivery
from tms_hbase.runtime.bridge import run_sync
from tms_hbase.shared.consumer import SharedConsumer

_END = object()


class AsyncSharedConsumer(AsyncSharedSubscriptionConsumer):
    """One consumer of a shared subscription (``AsyncMessagingClient.shared_consumer``), opened by
    ``async with`` or :meth:`open`; settle each delivery with :meth:`ack`, :meth:`nack` or :meth:`release`."""

    def __init__(self, open_consumer: Callable[[], Awaitable[SharedConsumer]]) -> None:
        self._open = open_consumer
        self._consumer: SharedConsumer | None = None

    async def __aenter__(self) -> AsyncSharedConsumer:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Check the subscription is shared and start consuming (InvalidArgument for an exclusive one)."""
        if self._consumer is None:
            self._consumer = await self._open()

    def _opened(self) -> SharedConsumer:
        if self._consumer is None:
            raise TmsError("the consumer is not open: use `async with client.shared_consumer(...)` or `await open()`")
        return self._consumer

    @property
    def held(self) -> list[bytes]:
        """The ids of the deliveries this consumer holds and has not settled."""
        return self._opened().held

    async def receive(self, max_messages: int = 10, timeout_seconds: float = 1.0) -> list[Delivery]:
        """Up to ``max_messages`` deliveries, as soon as there is one; ``[]`` after ``timeout_seconds``."""
        consumer = self._opened()
        return await run_sync(consumer.receive, max_messages, timeout_seconds)

    def __aiter__(self) -> AsyncIterator[Delivery]:
        """Deliveries; waits up to the consumer's ``max_wait_seconds`` for the next one, then ends."""
        return self._deliveries(iter(self._opened()))

    @staticmethod
    async def _deliveries(deliveries: Iterator[Delivery]) -> AsyncIterator[Delivery]:
        while (delivery := await run_sync(next, deliveries, _END)) is not _END:
            yield delivery

    async def ack(self, *deliveries: Delivery | bytes, wait: bool = True) -> None:
        """Settle deliveries as done; ``wait=False``: noted, written with the next receive, flush or close."""
        consumer = self._opened()
        await run_sync(consumer.ack, *deliveries, wait=wait)

    async def flush(self) -> None:
        """Write the acknowledgements noted with ``wait=False``; NotHeld for those refused since the last."""
        await run_sync(self._opened().flush)

    async def nack(self, delivery: Delivery | bytes, delay_seconds: float = 0.0) -> None:
        """Give a delivery back for redelivery after ``delay_seconds`` (it counts as a delivery)."""
        consumer = self._opened()
        await run_sync(consumer.nack, delivery, delay_seconds)

    async def release(self, delivery: Delivery | bytes) -> None:
        """Give a delivery back at once, not counted as a delivery."""
        consumer = self._opened()
        await run_sync(consumer.release, delivery)

    async def extend(self, delivery: Delivery | bytes, timeout_seconds: float | None = None) -> int:
        """Push a delivery's deadline out (default: the subscription's ack timeout from now); the new deadline (ms)."""
        consumer = self._opened()
        return await run_sync(consumer.extend, delivery, timeout_seconds)

    async def close(self) -> None:
        """Stop consuming; held deliveries are redelivered after their deadline. Idempotent."""
        if self._consumer is not None:
            await run_sync(self._consumer.close)
