# unasync: sync
"""The messaging interface: what a program may call whether it reaches tms-hbase directly or through the gateway.

:class:`MessagingService` is implemented by :class:`tms_hbase.MessagingClient` (direct, over HBase's Thrift
gateway) and by :class:`tms_hbase.gateway_client.http.GatewayClient` (over ``tms-gateway``'s REST API), as
CDAP's one ``MessagingService`` has a direct and an HTTP client. Both declare it as their base, so the type
checker holds them to the same names, keyword names, units and return types; both check their arguments
with the same functions (:mod:`tms_hbase.model.checks`) and raise the same :mod:`tms_hbase.errors`
classes; ``tests/integration/test_client_parity.py`` runs the same scenarios through both.

Code written against ``MessagingService`` runs on either::

    def drain(service: MessagingService, topic: TopicId) -> list[bytes]:
        return [m.payload for m in service.fetch(topic, limit=100)]

What only one of them offers stays off this interface: the operator's and Spark's calls of the direct
client (``client.admin``), and over the gateway, the raw ``poll`` of CDAP's API. Two calls take an
argument the gateway cannot honour and refuse it with InvalidArgument rather than ignore it:
``update_topic(expected=...)`` and ``publish(resume=...)``; ``list_topics`` through the gateway needs a
namespace (the REST API lists one at a time).

The asyncio twin, :class:`tms_hbase.aio.api.AsyncMessagingService`, is generated from this file by
``tools/unasync.py`` (``make lint`` fails when it drifts): a signature or docstring is written here once.
"""
# unasync: async
# """The messaging interface for asyncio: :class:`AsyncMessagingService`, the twin of
# :class:`tms_hbase.api.MessagingService` with the same method names, arguments, units, results and errors,
# each call a coroutine.
#
# It is implemented by :class:`tms_hbase.gateway_client.aio.AsyncGatewayClient` (over ``tms-gateway``'s REST
# API) and by :class:`tms_hbase.aio.client.AsyncMessagingClient` (direct, over HBase); both declare it as their
# base, so the type checker holds them to it. Code written against it runs on either::
#
#     async def drain(service: AsyncMessagingService, topic: TopicId) -> list[bytes]:
#         return [m.payload async for m in service.fetch(topic, limit=100)]
#
# Where the blocking interface returns an iterator, this one returns an async iterator: ``fetch`` checks its
# arguments at the call and reads the first page at the first ``__anext__``. Consumers are async context
# managers: ``consumer()`` returns the exclusive consumer unopened, and ``async with`` (or ``await
# consumer.open()``) opens it (SubscriptionBusy there while another consumer holds the subscription);
# ``async for`` iterates either kind. Waits carry their unit in their names (``max_wait_seconds``,
# ``timeout_seconds``, ``delay_seconds``, ``ack_timeout_seconds``).
#
# Cancelling a call (``task.cancel()``, ``asyncio.timeout``) raises CancelledError in the caller at once; what
# the call had done by then is each implementation's documented outcome (for a publish: the batch is stored
# whole or not at all, never in part).
# """
# unasync: end

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self

if TYPE_CHECKING:
    from tms_hbase.errors import PublishOutcomeUnknown
    from tms_hbase.model.message import Delivery, Message
    from tms_hbase.model.published import PublishResult
    from tms_hbase.model.record import Record
    from tms_hbase.model.stats import Lag, TopicStats
    from tms_hbase.model.subscription import PendingMessage, Subscription
    from tms_hbase.model.topic import TopicId, TopicLike, TopicMetadata
    from tms_hbase.model.transaction import Transaction
    from tms_hbase.model.wire import RollbackDetail


class SubscriptionConsumer(Protocol):
    """The active consumer of an exclusive subscription (``MessagingService.consumer``)."""

    # unasync: sync
    def __enter__(self) -> Self:
        """The consumer itself: leaving the ``with`` block closes it."""
        ...

    # unasync: async
    # async def __aenter__(self) -> Self:
    #     """Open the consumer (as :meth:`open`); leaving the ``async with`` block closes it."""
    #     ...
    #
    # async def open(self) -> None:
    #     """Take the subscription's lease; SubscriptionBusy while another consumer holds it."""
    #     ...
    #
    # unasync: end

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the consumer (as :meth:`close`)."""
        ...

    @property
    def committed(self) -> bytes | None:
        """The subscription's mark as this consumer last committed or found it."""
        ...

    @property
    def delivered(self) -> bytes | None:
        """The id of the last message delivered (what ``commit()`` stores)."""
        ...

    def poll(self, max_messages: int = 100, timeout_seconds: float = 1.0, *, commit: bool = False) -> list[Message]:
        """Up to ``max_messages`` messages in order, as soon as there is one; ``[]`` after ``timeout_seconds``.
        ``commit``: first store the last delivered message as the mark, as :meth:`commit` (through the
        gateway, in the same call)."""
        ...

    def __iter__(self) -> Iterator[Message]:
        """Messages in order; the iteration ends after ``max_wait_seconds`` without one."""
        ...

    def commit(self, message: Message | bytes | None = None) -> None:
        """Store the last delivered message (or ``message``) as the mark; LeaseLost if it was taken over."""
        ...

    def close(self) -> None:
        """Give the lease back; what was delivered and not committed is delivered again."""
        ...


class SharedSubscriptionConsumer(Protocol):
    """One of any number of consumers of a shared subscription (``MessagingService.shared_consumer``)."""

    def __enter__(self) -> Self:
        """The consumer itself: leaving the ``with`` block closes it."""
        ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the consumer (as :meth:`close`)."""
        ...

    @property
    def held(self) -> list[bytes]:
        """Ids of the messages delivered to this consumer and not settled by it."""
        ...

    def receive(self, max_messages: int = 10, timeout_seconds: float = 1.0) -> list[Delivery]:
        """Up to ``max_messages`` deliveries, as soon as there is one; ``[]`` after ``timeout_seconds``."""
        ...

    def __iter__(self) -> Iterator[Delivery]:
        """Deliveries one by one; the iteration ends after ``max_wait_seconds`` without one."""
        ...

    def ack(self, *deliveries: Delivery | bytes, wait: bool = True) -> None:
        """The messages are done; NotHeld for any this consumer does not hold. ``wait=False``: noted, and
        written with the next receive, :meth:`flush` or :meth:`close` (one round trip for all)."""
        ...

    def flush(self) -> None:
        """Write the acknowledgements noted with ``wait=False``; NotHeld for those refused since the last."""
        ...

    def nack(self, delivery: Delivery | bytes, delay_seconds: float = 0.0) -> None:
        """Deliver it again, after ``delay_seconds``."""
        ...

    def release(self, delivery: Delivery | bytes) -> None:
        """Give it back at once without counting a failed delivery."""
        ...

    def extend(self, delivery: Delivery | bytes, timeout_seconds: float | None = None) -> int:
        """Hold it until ``timeout_seconds`` from now (default: the ack timeout); the new deadline (ms)."""
        ...

    def close(self) -> None:
        """Stop; what this consumer holds goes to others at once (or at its deadline)."""
        ...


class MessagingService(Protocol):
    """Topics, publishing, fetching, subscriptions and consumers: the calls both clients offer alike.

    Every method raises from the :class:`~tms_hbase.errors.TmsError` tree: InvalidArgument for bad
    input (before anything is changed), TopicNotFound, TopicAlreadyExists, SubscriptionNotFound, ...;
    HBaseUnavailable when the service does not answer within the client's ``timeout_seconds``.
    """

    def ping(self) -> None:
        """One cheap round trip: returns if the service answers, HBaseUnavailable otherwise."""
        ...

    def close(self) -> None:
        """Close the client's connections."""
        ...

    def __enter__(self) -> Self:
        """The client itself: leaving the ``with`` block closes it."""
        ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the client (as :meth:`close`)."""
        ...

    # -- topics -------------------------------------------------------------------------------

    def create_topic(
        self, topic: TopicLike, properties: Mapping[str, str] | None = None, *, exist_ok: bool = False
    ) -> TopicMetadata:
        """Create a topic (``ttl`` in seconds among its properties); TopicAlreadyExists unless ``exist_ok``."""
        ...

    def update_topic(
        self, topic: TopicLike, properties: Mapping[str, str], *, expected: TopicMetadata | None = None
    ) -> TopicMetadata:
        """Replace a topic's properties; TopicNotFound."""
        ...

    def get_topic(self, topic: TopicLike) -> TopicMetadata:
        """The topic's metadata; TopicNotFound."""
        ...

    def list_topics(self, namespace: str | None = None) -> list[TopicId]:
        """The topics of ``namespace``, in name order."""
        ...

    def list_topic_metadata(self, namespace: str | None = None) -> list[TopicMetadata]:
        """Like :meth:`list_topics`, with each topic's metadata."""
        ...

    def delete_topic(self, topic: TopicLike) -> None:
        """Delete a topic and make its messages unreadable at once; TopicNotFound."""
        ...

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
        """Publish a batch as one unit, in order: where it is stored (its ids; with a write pointer, also
        the handle ``rollback`` takes)."""
        ...

    def store(
        self,
        topic: TopicLike,
        payloads: Sequence[bytes | Record],
        tx_write_pointer: int,
        *,
        sequence: int | None = None,
    ) -> None:
        """Store payloads under a write pointer, invisible until that pointer is published."""
        ...

    def rollback(self, topic: TopicLike, handle: PublishResult | RollbackDetail | bytes) -> None:
        """Mark a transactional publish rolled back."""
        ...

    def fetch(
        self,
        topic: TopicLike,
        start_message: bytes | None = None,
        start_time_ms: int | None = None,
        inclusive: bool = True,
        limit: int | None = None,
        transaction: Transaction | None = None,
    ) -> Iterator[Message]:
        """Messages in order from a message id or a publish time (ms), up to ``limit``; bad arguments raise at
        the call (InvalidArgument)."""
        ...

    # -- subscriptions and consumers ------------------------------------------------------------

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
        """A durable consume mark on the topic from ``start`` ("earliest", "latest" or a time in ms)."""
        ...

    def get_subscription(self, topic: TopicLike, name: str) -> Subscription:
        """The subscription; SubscriptionNotFound."""
        ...

    def list_subscriptions(self, topic: TopicLike) -> list[Subscription]:
        """The topic's subscriptions, in name order."""
        ...

    def delete_subscription(self, topic: TopicLike, name: str, *, force: bool = False) -> None:
        """Delete a subscription; SubscriptionBusy while a consumer holds it, unless ``force``."""
        ...

    def reset_subscription(
        self,
        topic: TopicLike,
        name: str,
        start_message: bytes | str | None = None,
        start_time_ms: int | None = None,
        *,
        force: bool = False,
    ) -> Subscription:
        """Move the mark to a message id ("earliest", "latest") or a publish time (ms)."""
        ...

    def release_subscription(self, topic: TopicLike, name: str) -> Subscription:
        """Take the lease away from whoever holds the subscription, keeping its mark."""
        ...

    def lag(self, topic: TopicLike, name: str) -> Lag:
        """How far the subscription is behind."""
        ...

    def topic_stats(self, topic: TopicLike, *, windows: Sequence[int] | None = None) -> TopicStats:
        """The topic's numbers, publish rates over ``windows`` (seconds) and its subscriptions' lag."""
        ...

    def pending(self, topic: TopicLike, name: str, *, limit: int | None = None) -> list[PendingMessage]:
        """A shared subscription's deliveries not settled yet."""
        ...

    def consumer(self, topic: TopicLike, name: str, *, max_wait_seconds: float = 5.0) -> SubscriptionConsumer:
        """The active consumer of an exclusive subscription; SubscriptionBusy while another holds it (for
        asyncio: where ``async with`` opens it). The arguments are checked at the call."""
        ...

    def shared_consumer(
        self, topic: TopicLike, name: str, *, owner: str | None = None, max_wait_seconds: float = 5.0
    ) -> SharedSubscriptionConsumer:
        """One consumer of a shared subscription."""
        ...
