# unasync: sync
"""The gateway clients' operations that forward one call each, written once.

:class:`GatewayOperations`, the base of :class:`~tms_hbase.gateway_client.http.GatewayClient`, holds every
operation that builds its request with :mod:`tms_hbase.gateway_client.calls`, carries it with the client's
``run`` and returns the decoded answer. Its asyncio twin, ``AsyncGatewayOperations``
(:mod:`tms_hbase.gateway_client.aio_operations`, the base of ``AsyncGatewayClient``), is generated from this
file by ``tools/unasync.py`` (``make lint`` fails when it drifts): a keyword is added here once. What the two
clients do differently is written in each: fetching page by page, the consumers, the asyncio client's
coalescing ``publish`` and concurrent ``list_topic_metadata``, and how a request travels.
"""
# unasync: async
# """The asyncio gateway client's operations that forward one call each: the base of
# :class:`~tms_hbase.gateway_client.aio.AsyncGatewayClient`, generated from the blocking client's
# (:mod:`tms_hbase.gateway_client.operations`) by ``tools/unasync.py``; each call is a coroutine.
# """
# unasync: end

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from tms_hbase.api import MessagingService
from tms_hbase.errors import SubscriptionAlreadyExists, TopicAlreadyExists

if TYPE_CHECKING:
    from tms_hbase.errors import PublishOutcomeUnknown
    from tms_hbase.gateway_client.calls import Calls, Request
    from tms_hbase.model.message import Message
    from tms_hbase.model.published import PublishResult
    from tms_hbase.model.record import Record
    from tms_hbase.model.requests import ConsumeRequest
    from tms_hbase.model.stats import Lag, TopicStats
    from tms_hbase.model.subscription import PendingMessage, Subscription
    from tms_hbase.model.topic import TopicId, TopicLike, TopicMetadata
    from tms_hbase.model.wire import RollbackDetail

T = TypeVar("T")


class GatewayOperations(MessagingService):
    """The operations of :class:`~tms_hbase.api.MessagingService` that are one request to the
    gateway (and CDAP's raw ``poll``), for a client that builds requests with ``calls`` and carries
    them with ``run``."""

    calls: Calls

    @abstractmethod
    def run(self, request: Request[T]) -> T:
        """Carry one request: its decoded 2xx answer, else the TmsError the gateway reported or
        HBaseUnavailable / PublishOutcomeUnknown for a link that failed."""

    def ping(self) -> None:
        """``GET /health``: returns once the gateway answers that HBase does; HBaseUnavailable otherwise."""
        self.run(self.calls.ping())

    # -- topics -------------------------------------------------------------------------------

    def create_topic(
        self, topic: TopicLike, properties: Mapping[str, str] | None = None, *, exist_ok: bool = False
    ) -> TopicMetadata:
        """``PUT /topics/<t>``: TopicAlreadyExists (409), unless ``exist_ok`` (then the existing topic is
        returned as it is), or InvalidArgument (400), as direct access raises."""
        request = self.calls.create_topic(topic, properties)
        try:
            return self.run(request)
        except TopicAlreadyExists:
            if not exist_ok:
                raise
            return self.get_topic(topic)

    def update_topic(
        self, topic: TopicLike, properties: Mapping[str, str], *, expected: TopicMetadata | None = None
    ) -> TopicMetadata:
        """``PUT /topics/<t>/properties`` (replaces them all). ``expected`` is not supported by the REST API
        (InvalidArgument)."""
        return self.run(self.calls.update_topic(topic, properties, expected))

    def get_topic(self, topic: TopicLike) -> TopicMetadata:
        return self.run(self.calls.get_topic(topic))

    def list_topics(self, namespace: str | None = None) -> list[TopicId]:
        """The topics of ``namespace`` (the REST API lists one namespace at a time)."""
        return self.run(self.calls.list_topics(namespace))

    def delete_topic(self, topic: TopicLike) -> None:
        self.run(self.calls.delete_topic(topic))

    # -- messages -----------------------------------------------------------------------------

    def publish(
        self,
        topic: TopicLike,
        payloads: Sequence[bytes | Record],
        tx_write_pointer: int | None = None,
        *,
        ttl_seconds: float | None = None,
        resume: PublishOutcomeUnknown | None = None,
    ) -> PublishResult:
        """``POST /topics/<t>/publish``: the PublishResult from the gateway's ``TMS-Published`` header
        (generation and position) and, with a write pointer, the handle of its body as ``rollback``.

        ``resume`` cannot be honoured over HTTP (the retry state stays in the gateway): passing one is
        InvalidArgument rather than a silent second copy.
        """
        return self.run(self.calls.publish(topic, payloads, tx_write_pointer, ttl_seconds, resume))

    def store(
        self,
        topic: TopicLike,
        payloads: Sequence[bytes | Record],
        tx_write_pointer: int,
        *,
        sequence: int | None = None,
    ) -> None:
        """``POST /topics/<t>/store``: payloads under a write pointer, invisible until it is published."""
        self.run(self.calls.store(topic, payloads, tx_write_pointer, sequence))

    def rollback(self, topic: TopicLike, handle: PublishResult | RollbackDetail | bytes) -> None:
        """``POST /topics/<t>/rollback`` with the handle's bytes as the body."""
        self.run(self.calls.rollback(topic, handle))

    def poll(self, topic: TopicId, request: ConsumeRequest) -> list[Message]:
        """One ``poll`` call as CDAP's API defines it (a page of at most the gateway's cap)."""
        return self.run(self.calls.poll(topic, request))

    # -- subscriptions ------------------------------------------------------------------------

    def create_subscription(
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
        """``PUT .../subscriptions/<name>``, as :meth:`MessagingClient.create_subscription` (a shared one
        with its settings); SubscriptionAlreadyExists (409), unless ``exist_ok`` (then the existing
        subscription is returned as it is), and InvalidArgument (400) as direct access raises."""
        options: dict[str, object] = {"ack_timeout_seconds": ack_timeout_seconds, "max_deliveries": max_deliveries}
        options |= {"claim_size": claim_size, "dead_letter": dead_letter, "ordering": ordering}
        request = self.calls.create_subscription(topic, name, start, shared, options)
        try:
            return self.run(request)
        except SubscriptionAlreadyExists:
            if not exist_ok:
                raise
            return self.get_subscription(topic, name)

    def get_subscription(self, topic: TopicLike, name: str) -> Subscription:
        return self.run(self.calls.get_subscription(topic, name))

    def list_subscriptions(self, topic: TopicLike) -> list[Subscription]:
        return self.run(self.calls.list_subscriptions(topic))

    def delete_subscription(self, topic: TopicLike, name: str, *, force: bool = False) -> None:
        self.run(self.calls.delete_subscription(topic, name, force))

    def reset_subscription(
        self,
        topic: TopicLike,
        name: str,
        start_message: bytes | str | None = None,
        start_time_ms: int | None = None,
        *,
        force: bool = False,
    ) -> Subscription:
        """``POST .../subscriptions/<name>/reset``: as :meth:`MessagingClient.reset_subscription`."""
        return self.run(self.calls.reset_subscription(topic, name, start_message, start_time_ms, force))

    def release_subscription(self, topic: TopicLike, name: str) -> Subscription:
        """``DELETE .../subscriptions/<name>/consumer?force=true``: take the lease away from whichever
        session (or direct consumer) holds the subscription, keeping its mark; SubscriptionNotFound."""
        self.run(self.calls.release_subscription(topic, name))
        return self.get_subscription(topic, name)

    def lag(self, topic: TopicLike, name: str) -> Lag:
        """How far the subscription is behind (from ``GET .../subscriptions/<name>``)."""
        return self.run(self.calls.lag(topic, name))

    def topic_stats(self, topic: TopicLike, *, windows: Sequence[int] | None = None) -> TopicStats:
        """``GET /topics/<t>/stats``: as :meth:`MessagingClient.topic_stats`."""
        return self.run(self.calls.topic_stats(topic, windows))

    def pending(self, topic: TopicLike, name: str, *, limit: int | None = None) -> list[PendingMessage]:
        """``GET .../subscriptions/<name>/pending``: a shared subscription's deliveries not settled."""
        return self.run(self.calls.pending(topic, name, limit))
