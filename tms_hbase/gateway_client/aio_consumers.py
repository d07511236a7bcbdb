"""The consumers of :class:`~tms_hbase.gateway_client.aio.AsyncGatewayClient`: an exclusive subscription's
(a gateway consumer session, opened by ``async with``) and a shared subscription's, with the calls and
session handling of the blocking client's (:class:`tms_hbase.gateway_client.sessions.ConsumerSession` and
:class:`~tms_hbase.gateway_client.sessions.SharedSession` build and read every request of both)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import TracebackType
from typing import TYPE_CHECKING

from tms_hbase.aio.api import AsyncSharedSubscriptionConsumer, AsyncSubscriptionConsumer
from tms_hbase.errors import InvalidArgument, NotHeld, TmsError
from tms_hbase.gateway_client.sessions import ConsumerSession, SharedSession
from tms_hbase.model import checks
from tms_hbase.model.isolation import COMMITTED
from tms_hbase.model.message import Delivery, Message
from tms_hbase.model.topic import TopicId

if TYPE_CHECKING:
    from tms_hbase.gateway_client.aio import AsyncGatewayClient


class AsyncGatewayConsumer(AsyncSubscriptionConsumer):
    """The active consumer of an exclusive subscription through the gateway: ``async with`` opens its
    session (SubscriptionBusy while another consumer holds the subscription) and closes it (the lease
    is given back; what was delivered and not committed is delivered again: at-least-once). ``poll``,
    ``async for``, ``commit``, ``committed`` and ``delivered`` as the blocking client's consumer. Its calls go
    over one connection of its own (:meth:`AsyncGatewayClient.session_pool`), closed with it. One task at a
    time."""

    def __init__(
        self,
        client: AsyncGatewayClient,
        topic: TopicId,
        name: str,
        max_wait_seconds: float,
        batch: int,
        isolation: str = COMMITTED,
    ) -> None:
        checks.seconds("max_wait_seconds", max_wait_seconds)
        checks.positive_int("batch", batch)
        self.client, self.topic, self.name = client, topic, name
        self.max_wait_seconds, self.batch = max_wait_seconds, batch
        self._session = ConsumerSession(client.calls, topic, name, isolation)
        self._pool = client.session_pool()
        self._opened = False

    async def __aenter__(self) -> AsyncGatewayConsumer:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncGatewayConsumer({self.topic}, {self.name!r}, {self.client.url!r})"

    async def open(self) -> None:
        """Open the gateway's consumer session: SubscriptionBusy while another consumer holds it."""
        if self._opened:
            raise InvalidArgument(f"{self!r} is open already")
        await self.client.run(self._session.open(), pool=self._pool)
        self._opened = True

    @property
    def committed(self) -> bytes | None:
        """The subscription's mark as this consumer last committed or found it."""
        return self._session.committed

    @property
    def delivered(self) -> bytes | None:
        """The id of the last message delivered (what ``commit()`` stores)."""
        return self._session.delivered

    async def poll(
        self, max_messages: int = 100, timeout_seconds: float = 1.0, *, commit: bool = False
    ) -> list[Message]:
        """Up to ``max_messages`` messages in order, as soon as there is one; ``[]`` after ``timeout_seconds``.
        ``commit``: first store the last delivered message as the mark, in the same HTTP call (as the
        blocking client's)."""
        checks.seconds("timeout_seconds", timeout_seconds)
        self._check_open()
        return await self.client.run(self._session.poll(max_messages, timeout_seconds, commit), pool=self._pool)

    def __aiter__(self) -> AsyncIterator[Message]:
        """Messages in order; waits up to ``max_wait_seconds`` for the next one, then the iteration ends."""
        return self._messages()

    async def _messages(self) -> AsyncIterator[Message]:
        while page := await self.poll(self.batch, self.max_wait_seconds):
            for message in page:
                self._session.delivered = message.id
                yield message

    async def commit(self, message: Message | bytes | None = None) -> None:
        """Store the last delivered message (or ``message``, delivered already) as the subscription's
        mark; LeaseLost if the session's lease ran out or was taken over."""
        self._check_open()
        request = self._session.commit(message)
        if request is not None:
            await self.client.run(request, pool=self._pool)

    async def close(self) -> None:
        """Give the lease back (another consumer may start at once). Idempotent; raises no TmsError."""
        if not self._opened:
            self._session.closed = True
            self._pool.close()
            return
        request = self._session.close()
        if request is not None:
            with contextlib.suppress(TmsError):
                await self.client.run(request, pool=self._pool)
        self._pool.close()

    def _check_open(self) -> None:
        if not self._opened and not self._session.closed:
            raise InvalidArgument(f"{self!r} is not open: use `async with client.consumer(...)` or `await open()`")


# mypy holds the class to its whole interface: a member missing (abstract) is an error here.
_CONSUMER: type[AsyncSubscriptionConsumer] = AsyncGatewayConsumer


class AsyncGatewaySharedConsumer(AsyncSharedSubscriptionConsumer):
    """One consumer of a shared subscription through the gateway: ``receive``, ``async for``, ``ack``,
    ``nack``, ``release``, ``extend``, ``held``, ``owner`` and ``close`` (gives back what it holds), as
    the blocking client's. Its session starts at the first ``receive`` (or is ``owner``'s)."""

    def __init__(
        self,
        client: AsyncGatewayClient,
        topic: TopicId,
        name: str,
        owner: str | None,
        max_wait_seconds: float,
        isolation: str = COMMITTED,
    ) -> None:
        checks.seconds("max_wait_seconds", max_wait_seconds)
        self.client, self.topic, self.name, self.max_wait_seconds = client, topic, name, max_wait_seconds
        self._session = SharedSession(client.calls, topic, name, owner, isolation)

    async def __aenter__(self) -> AsyncGatewaySharedConsumer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncGatewaySharedConsumer({self.topic}, {self.name!r}, {self.client.url!r})"

    @property
    def owner(self) -> str | None:
        """The session's secret (what ``owner=`` takes to settle its deliveries from elsewhere)."""
        return self._session.token

    @property
    def held(self) -> list[bytes]:
        """Ids of the messages delivered to this consumer and not settled by it."""
        return list(self._session.held)

    async def receive(self, max_messages: int = 10, timeout_seconds: float = 1.0) -> list[Delivery]:
        """Up to ``max_messages`` deliveries, redeliveries first, as soon as there is one; ``[]`` after
        ``timeout_seconds``."""
        checks.positive_int("max_messages", max_messages)
        checks.seconds("timeout_seconds", timeout_seconds)
        await self._send_deferred()
        return await self.client.run(self._session.receive(max_messages, timeout_seconds))

    def __aiter__(self) -> AsyncIterator[Delivery]:
        """Deliveries one by one; the iteration ends after ``max_wait_seconds`` without one."""
        return self._deliveries()

    async def _deliveries(self) -> AsyncIterator[Delivery]:
        while got := await self.receive(1, self.max_wait_seconds):
            yield got[0]

    async def ack(self, *deliveries: Delivery | bytes, wait: bool = True) -> None:
        """Acknowledge; NotHeld (after settling the others) lists those this session does not hold.
        ``wait=False``: noted, and sent in one request with the next receive, :meth:`flush` or close."""
        if wait:
            await self.client.run(self._session.ack(deliveries))
        else:
            self._session.note_ack(deliveries)

    async def flush(self) -> None:
        """Send the acknowledgements noted with ``wait=False``; NotHeld for those refused since the last."""
        await self._send_deferred()
        self._session.raise_refused()

    async def _send_deferred(self) -> None:
        request = self._session.send_deferred()
        if request is not None:
            try:
                await self.client.run(request)
            except NotHeld as exc:
                self._session.refuse(exc)

    async def nack(self, delivery: Delivery | bytes, delay_seconds: float = 0.0) -> None:
        """Deliver again after ``delay_seconds``, to any consumer; the delivery counts."""
        checks.seconds("delay_seconds", delay_seconds)
        await self.client.run(self._session.nack(delivery, delay_seconds))

    async def release(self, delivery: Delivery | bytes) -> None:
        """Give it back at once without counting this delivery."""
        await self.client.run(self._session.release(delivery))

    async def extend(self, delivery: Delivery | bytes, timeout_seconds: float | None = None) -> int:
        """Hold it until ``timeout_seconds`` from now (default: the ack timeout); the new deadline (HBase ms)."""
        checks.seconds("timeout_seconds", timeout_seconds, optional=True)
        return await self.client.run(self._session.extend(delivery, timeout_seconds))

    async def close(self) -> None:
        """Give back what this consumer holds (it goes to others at once). Idempotent; raises no TmsError
        (what cannot be given back is delivered again after its deadline). The acknowledgements noted
        with ``wait=False`` are sent first."""
        with contextlib.suppress(TmsError):
            await self._send_deferred()
        request = self._session.close()
        if request is not None:
            with contextlib.suppress(TmsError):
                await self.client.run(request)


_SHARED_CONSUMER: type[AsyncSharedSubscriptionConsumer] = AsyncGatewaySharedConsumer  # as _CONSUMER
