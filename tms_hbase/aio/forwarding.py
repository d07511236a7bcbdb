# Generated from tms_hbase/api.py by tools/unasync.py:
# edit that file and run `python -m tools.unasync`.
"""The operations of :class:`~tms_hbase.aio.client.AsyncMessagingClient` that run the blocking client's on the
event loop and do nothing more, with :class:`~tms_hbase.aio.api.AsyncMessagingService`'s signatures and
docstrings (by ``tools/forwarding.py``). The operations with asyncio behaviour of their own are written in the
client and listed in that tool's ``HAND_WRITTEN``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from tms_hbase.aio.api import AsyncMessagingService

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from tms_hbase.client import MessagingClient
    from tms_hbase.model.published import PublishResult
    from tms_hbase.model.record import Record
    from tms_hbase.model.stats import Lag, TopicStats
    from tms_hbase.model.subscription import PendingMessage, Subscription
    from tms_hbase.model.topic import TopicId, TopicLike, TopicMetadata
    from tms_hbase.model.wire import RollbackDetail


T = TypeVar("T")


class ForwardedOperations(AsyncMessagingService):
    """Each operation as the blocking client's, run by :meth:`_run`."""

    @abstractmethod
    async def _run(self, call: Callable[[MessagingClient], T]) -> T:
        """``call`` of the client's blocking protocol code, run on the event loop."""

    async def ping(self) -> None:
        """One cheap round trip: returns if the service answers, HBaseUnavailable otherwise."""
        await self._run(lambda c: c.ping())

    async def create_topic(
        self, topic: TopicLike, properties: Mapping[str, str] | None = None, *, exist_ok: bool = False
    ) -> TopicMetadata:
        """Create a topic (``ttl`` in seconds among its properties); TopicAlreadyExists unless ``exist_ok``."""
        return await self._run(lambda c: c.create_topic(topic, properties, exist_ok=exist_ok))

    async def update_topic(
        self, topic: TopicLike, properties: Mapping[str, str], *, expected: TopicMetadata | None = None
    ) -> TopicMetadata:
        """Replace a topic's properties; TopicNotFound."""
        return await self._run(lambda c: c.update_topic(topic, properties, expected=expected))

    async def get_topic(self, topic: TopicLike) -> TopicMetadata:
        """The topic's metadata; TopicNotFound."""
        return await self._run(lambda c: c.get_topic(topic))

    async def list_topics(self, namespace: str | None = None) -> list[TopicId]:
        """The topics of ``namespace``, in name order."""
        return await self._run(lambda c: c.list_topics(namespace))

    async def list_topic_metadata(self, namespace: str | None = None) -> list[TopicMetadata]:
        """Like :meth:`list_topics`, with each topic's metadata."""
        return await self._run(lambda c: c.list_topic_metadata(namespace))

    async def delete_topic(self, topic: TopicLike) -> None:
        """Delete a topic and make its messages unreadable at once; TopicNotFound."""
        await self._run(lambda c: c.delete_topic(topic))

    async def store(
        self,
        topic: TopicLike,
        payloads: Sequence[bytes | Record],
        tx_write_pointer: int,
        *,
        sequence: int | None = None,
    ) -> None:
        """Store payloads under a write pointer, invisible until that pointer is published."""
        await self._run(lambda c: c.store(topic, payloads, tx_write_pointer, sequence=sequence))

    async def rollback(self, topic: TopicLike, handle: PublishResult | RollbackDetail | bytes) -> None:
        """Mark a transactional publish rolled back."""
        await self._run(lambda c: c.rollback(topic, handle))

    async def create_subscription(
        self,
        topic: TopicLike,
        name: str,
        start: str | int = "earliest",
        *,
        exist_ok: bool = False,
        shared: bool = False,
        ack_timeout_seconds: float | None = None,
        max_deliveries: int | None = None,
        dead_letter: TopicLike | None = None,
        claim_size: int | None = None,
        ordering: str | None = None,
    ) -> Subscription:
        """A durable consume mark on the topic from ``start`` ("earliest", "latest" or a time in ms)."""
        return await self._run(
            lambda c: c.create_subscription(
                topic,
                name,
                start,
                exist_ok=exist_ok,
                shared=shared,
                ack_timeout_seconds=ack_timeout_seconds,
                max_deliveries=max_deliveries,
                dead_letter=dead_letter,
                claim_size=claim_size,
                ordering=ordering,
            )
        )

    async def get_subscription(self, topic: TopicLike, name: str) -> Subscription:
        """The subscription; SubscriptionNotFound."""
        return await self._run(lambda c: c.get_subscription(topic, name))

    async def list_subscriptions(self, topic: TopicLike) -> list[Subscription]:
        """The topic's subscriptions, in name order."""
        return await self._run(lambda c: c.list_subscriptions(topic))

    async def delete_subscription(self, topic: TopicLike, name: str, *, force: bool = False) -> None:
        """Delete a subscription; SubscriptionBusy while a consumer holds it, unless ``force``."""
        await self._run(lambda c: c.delete_subscription(topic, name, force=force))

    async def reset_subscription(
        self,
        topic: TopicLike,
        name: str,
        start_message: bytes | str | None = None,
        start_time_ms: int | None = None,
        *,
        force: bool = False,
    ) -> Subscription:
        """Move the mark to a message id ("earliest", "latest") or a publish time (ms)."""
        return await self._run(lambda c: c.reset_subscription(topic, name, start_message, start_time_ms, force=force))

    async def release_subscription(self, topic: TopicLike, name: str) -> Subscription:
        """Take the lease away from whoever holds the subscription, keeping its mark."""
        return await self._run(lambda c: c.release_subscription(topic, name))

    async def lag(self, topic: TopicLike, name: str) -> Lag:
        """How far the subscription is behind."""
        return await self._run(lambda c: c.lag(topic, name))

    async def topic_stats(self, topic: TopicLike, *, windows: Sequence[int] | None = None) -> TopicStats:
        """The topic's numbers, publish rates over ``windows`` (seconds) and its subscriptions' lag."""
        return await self._run(lambda c: c.topic_stats(topic, windows=windows))

    async def pending(self, topic: TopicLike, name: str, *, limit: int | None = None) -> list[PendingMessage]:
        """A shared subscription's deliveries not settled yet."""
        return await self._run(lambda c: c.pending(topic, name, limit=limit))
