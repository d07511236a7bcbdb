"""AsyncMessagingClient: the messaging client for asyncio programs, on the event loop itself.

It runs the very protocol code of :class:`~tms_hbase.client.MessagingClient` (ordering, sequencer
reservations, metadata, reads) through :func:`tms_hbase.runtime.bridge.run_sync`, over the asyncio storage
driver (:class:`~tms_hbase.storage.aio.AsyncHBaseConnection`): every HBase call, backoff and hand-over
between publishes waits on the event loop, so many publishes and fetches are in flight at once on one
thread, with no thread per call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from functools import partial
from itertools import islice
from typing import Any, TypeVar

from tms_hbase import tracing
from tms_hbase.aio.api import AsyncMessagingService
from tms_hbase.aio.coalesce import GroupOutcome, PublishLanes
from tms_hbase.aio.consumer import AsyncConsumer
from tms_hbase.aio.forwarding import ForwardedOperations
from tms_hbase.aio.shared import AsyncSharedConsumer
from tms_hbase.client import MessagingClient
from tms_hbase.config import Config
from tms_hbase.consume.consumer import Consumer
from tms_hbase.consume.doorbell import DEFAULT_HOST
from tms_hbase.errors import ClientClosed, PublishOutcomeUnknown
from tms_hbase.model import checks
from tms_hbase.model.checks import validate_payloads
from tms_hbase.model.isolation import check_isolation
from tms_hbase.model.message import Message
from tms_hbase.model.published import PublishResult
from tms_hbase.model.record import Record
from tms_hbase.model.retry import Retry
from tms_hbase.model.topic import TopicId, TopicLike, as_topic
from tms_hbase.model.transaction import Transaction
from tms_hbase.publish.writer import unknown_part
from tms_hbase.runtime.bridge import run_sync
from tms_hbase.shared.consumer import SharedConsumer
from tms_hbase.storage.aio import AsyncHBaseConnection
from tms_hbase.tx.pointers import MAX_LIFETIME_SECONDS, validate_max_lifetime

log = logging.getLogger(__name__)
T = TypeVar("T")

FETCH_CHUNK = 256
"""Messages an async fetch takes from the reader per turn on the event loop."""


class _LoopClient(MessagingClient):
    """The synchronous client's protocol code over the asyncio storage driver (made inside run_sync)."""

    _pool_class = AsyncHBaseConnection

    def publish_group(
        self, topic: TopicId, batches: Sequence[tuple[bytes | Record, ...]], ttl: float | None, since: float
    ) -> GroupOutcome:
        """The batches of several publishes as one batch row on a sequencer topic (or a lone batch on any
        topic), by the client's deadline from ``since``; on a chain topic, more than one: nothing written."""
        self._ensure_ready()
        with self.installation.hbase.operation(since):
            sequencer = self._writer.topics.get(topic).sequencer  # (a shared row's resume needs a sequencer)
            if not sequencer and len(batches) > 1:
                return GroupOutcome(sequencer, None)
            return GroupOutcome(sequencer, self._publish(topic, batches, None, ttl, None))

    def publish_since(
        self, topic: TopicId, payloads: tuple[bytes | Record, ...], ttl: float | None, since: float
    ) -> PublishResult:
        """:meth:`publish` by the client's deadline from ``since``."""
        with self.installation.hbase.operation(since):
            return self.publish(topic, payloads, ttl_seconds=ttl)


class AsyncMessagingClient(ForwardedOperations):
    """A connection to tms-hbase for asyncio: the operations of :class:`~tms_hbase.client.MessagingClient`
    as coroutines, with the same arguments, Config, deadlines and errors. Those that only run the blocking
    client's operation on the event loop come from :mod:`tms_hbase.aio.forwarding` (generated from the
    interface); those written here do more.

    Use it on one event loop, as ``async with AsyncMessagingClient(...) as client`` or by awaiting
    :meth:`close`. Its connections open on first use. ``timeout_seconds`` is a deadline per call, as in
    the synchronous client. Cancelling ``await client.publish(...)`` raises CancelledError at once but
    never interrupts the write: it runs on to its own outcome (within the deadline: the batch stored whole,
    or not at all; logged), and :meth:`close` waits for it. Other calls are interrupted where they wait.
    """

    def __init__(
        self,
        address: str | None = None,
        prefix: str | None = None,
        *,
        config: Config | None = None,
        timeout_seconds: float | None = None,
        pool_size: int | None = None,
        retry: Retry | None = None,
        create_tables: bool = False,
        max_batch_bytes: int = checks.DEFAULT_MAX_BATCH_BYTES,
        metadata_max_age_seconds: float = 1.0,
        tx_max_lifetime_seconds: float = MAX_LIFETIME_SECONDS,
        tx_server: str | None = None,
    ) -> None:
        validate_max_lifetime(tx_max_lifetime_seconds)
        config = Config.of_client(
            config, address, prefix, timeout_seconds=timeout_seconds, retry=retry, pool_size=pool_size
        )
        self.config = config
        """Where this client's installation is and how it talks to it (:class:`~tms_hbase.config.Config`)."""
        self._options: dict[str, Any] = {
            "create_tables": create_tables,
            "max_batch_bytes": max_batch_bytes,
            "metadata_max_age_seconds": metadata_max_age_seconds,
            "tx_max_lifetime_seconds": tx_max_lifetime_seconds,
            "tx_server": tx_server,
        }
        self._client: MessagingClient | None = None
        self._closed = False
        self._writes: set[asyncio.Future[PublishResult]] = set()  # cancelled publishes running on
        # Publishes in the protocol at once: at most one a pooled connection. The others wait here, before
        # reserving offsets, so no reservation waits for a connection longer than a sequencer's window.
        self._publish_slots = asyncio.Semaphore(config.pool_size)
        # Single publishes to one topic put together while a write to it is in flight (coalesce.py).
        self._lanes = PublishLanes(
            partial(self._write, _LoopClient.publish_group),
            partial(self._write, _LoopClient.publish_since),
            unknown_part,
            max_batch_bytes,
            metadata_max_age_seconds,
        )

    def __repr__(self) -> str:
        return f"AsyncMessagingClient({self.config.addresses!r}, prefix={self.config.prefix!r})"

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> AsyncMessagingClient:
        await self._ready()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Let the writes of cancelled publishes end, release the offsets reserved ahead and close the
        connections (idempotent)."""
        self._closed = True
        await self._lanes.wait_idle()
        if self._writes:
            await asyncio.wait(list(self._writes))
        client, self._client = self._client, None
        if client is not None:
            await run_sync(client.close)

    async def _ready(self) -> MessagingClient:
        if self._closed:
            raise ClientClosed("this client has been closed: open a new AsyncMessagingClient")
        if self._client is None:
            self._client = await run_sync(_LoopClient, config=self.config, **self._options)
        return self._client

    async def _run(self, call: Callable[[MessagingClient], T]) -> T:
        """``call`` of the blocking client, on the event loop (connected first)."""
        client = await self._ready()
        return await run_sync(call, client)

    # -- what runs more than the blocking client's operation (the others: ForwardedOperations) ---

    async def publish(
        self,
        topic: TopicLike,
        payloads: Sequence[bytes | Record],
        tx_write_pointer: int | None = None,
        *,
        ttl_seconds: float | None = None,
        resume: PublishOutcomeUnknown | None = None,
    ) -> PublishResult:
        """Publish a batch as one unit, in order (see :meth:`MessagingClient.publish
        <tms_hbase.client.MessagingClient.publish>`); PublishOutcomeUnknown with a resume if HBase stops
        answering mid-publish. Cancelled, it raises CancelledError at once and the write runs on to its
        outcome (see the class).

        Publishes to a sequencer topic made while a write to it is in flight go together in the next write
        (one batch row; each result names its own messages): see :mod:`tms_hbase.aio.coalesce`."""
        client = self._client if self._client is not None and not self._closed else await self._ready()
        topic = as_topic(topic)
        payloads = tracing.created(str(topic), payloads)  # in the caller's context (see tms_hbase.tracing)
        if tx_write_pointer is None and resume is None and not self._lanes.direct(topic):
            batch = validate_payloads(payloads, client.max_batch_bytes, allow_empty=False)
            checks.ttl_seconds(ttl_seconds)
            return await self._lanes.publish(topic, batch, ttl_seconds)
        async with self._publish_slots:  # (see _publish_slots)
            return await self._publish(client, topic, payloads, tx_write_pointer, ttl_seconds, resume)

    async def _write(self, call: Callable[..., T], *args: Any) -> T:
        """``call(client, *args)`` in the protocol, with a publish slot (a coalesced write, or one on its own)."""
        client = await self._ready()
        async with self._publish_slots:
            return await run_sync(call, client, *args)

    async def _publish(
        self,
        client: MessagingClient,
        topic: TopicLike,
        payloads: Sequence[bytes | Record],
        tx_write_pointer: int | None,
        ttl_seconds: float | None,
        resume: PublishOutcomeUnknown | None,
    ) -> PublishResult:
        write = asyncio.ensure_future(
            run_sync(lambda: client.publish(topic, payloads, tx_write_pointer, ttl_seconds=ttl_seconds, resume=resume))
        )
        try:
            return await asyncio.shield(write)
        except asyncio.CancelledError:
            if not write.done():
                self._writes.add(write)  # close() waits for it
                write.add_done_callback(self._writes.discard)
            write.add_done_callback(partial(_log_cancelled, topic))
            raise

    def fetch(
        self,
        topic: TopicLike,
        start_message: bytes | None = None,
        start_time_ms: int | None = None,
        inclusive: bool = True,
        limit: int | None = None,
        transaction: Transaction | None = None,
    ) -> AsyncIterator[Message]:
        """Messages in order from a message id or a publish time (ms), up to ``limit``: ``async for message in
        client.fetch(topic)``. The arguments are checked at the call (InvalidArgument); the start is found at
        the first ``__anext__``, and each read while iterating gets the client's deadline of its own."""
        topic = as_topic(topic)
        checks.fetch_args(start_message, start_time_ms, inclusive, limit, transaction)
        return _AsyncMessages(
            self, lambda c: c.fetch(topic, start_message, start_time_ms, inclusive, limit, transaction)
        )

    def consumer(
        self, topic: TopicLike, name: str, *, max_wait_seconds: float = 5.0, isolation: str = "committed"
    ) -> AsyncConsumer:
        """The exclusive consumer of a subscription, opened by ``async with`` (SubscriptionBusy there while
        another consumer holds it); ``async for`` ends after ``max_wait_seconds`` without a new message.
        ``isolation``: "committed" (committed messages only) or "uncommitted", as ``MessagingClient.consumer``."""
        topic = as_topic(topic)
        checks.seconds("max_wait_seconds", max_wait_seconds)
        check_isolation(isolation)

        async def opened() -> Consumer:
            client = await self._ready()
            return await run_sync(
                lambda: client.consumer(topic, name, max_wait_seconds=max_wait_seconds, isolation=isolation)
            )

        return AsyncConsumer(opened)

    def shared_consumer(
        self,
        topic: TopicLike,
        name: str,
        *,
        owner: str | None = None,
        max_wait_seconds: float = 5.0,
        poll_interval_seconds: float = 0.5,
        reap_interval: float | None = None,
        doorbell: str | None = DEFAULT_HOST,
        isolation: str = "committed",
    ) -> AsyncSharedConsumer:
        """One consumer of a shared subscription, opened by ``async with`` (InvalidArgument there for an
        exclusive subscription); ``async for`` ends after ``max_wait_seconds`` without a delivery. ``owner``,
        ``poll_interval_seconds``, ``reap_interval``, ``doorbell`` and ``isolation`` mean what they mean for
        :meth:`MessagingClient.shared_consumer <tms_hbase.client.MessagingClient.shared_consumer>`."""
        topic = as_topic(topic)
        checks.seconds("max_wait_seconds", max_wait_seconds)
        checks.seconds("poll_interval_seconds", poll_interval_seconds)
        checks.seconds("reap_interval", reap_interval, optional=True)
        check_isolation(isolation)

        async def opened() -> SharedConsumer:
            client = await self._ready()
            return await run_sync(
                lambda: client.shared_consumer(
                    topic,
                    name,
                    owner=owner,
                    max_wait_seconds=max_wait_seconds,
                    poll_interval_seconds=poll_interval_seconds,
                    reap_interval=reap_interval,
                    doorbell=doorbell,
                    isolation=isolation,
                )
            )

        return AsyncSharedConsumer(opened)


# mypy holds the class to its whole interface: a member missing (abstract) is an error here.
_SERVICE: type[AsyncMessagingService] = AsyncMessagingClient


class _AsyncMessages:
    """A fetch's messages as an async iterator: the start found at the first ``__anext__``, then the reader's
    lazy iterator advanced on the event loop :data:`FETCH_CHUNK` messages at a time."""

    def __init__(self, client: AsyncMessagingClient, start: Callable[[MessagingClient], Iterator[Message]]) -> None:
        self._client = client
        self._start = start
        self._messages: Iterator[Message] | None = None
        self._chunk: list[Message] = []
        self._done = False

    def __aiter__(self) -> _AsyncMessages:
        return self

    async def __anext__(self) -> Message:
        if self._messages is None:
            self._messages = await self._client._run(self._start)
        if not self._chunk and not self._done:
            messages = self._messages
            self._chunk = await run_sync(lambda: list(islice(messages, FETCH_CHUNK)))
            self._chunk.reverse()
            self._done = len(self._chunk) < FETCH_CHUNK
        if not self._chunk:
            raise StopAsyncIteration
        return self._chunk.pop()


def _log_cancelled(topic: TopicLike, write: asyncio.Future[PublishResult]) -> None:
    """What a cancelled publish came to (its caller got CancelledError at once)."""
    if write.cancelled():
        log.info("cancelled publish to %s: not stored", topic)
    elif (error := write.exception()) is not None:
        log.info("cancelled publish to %s ran on and failed: %s", topic, error)
    else:
        log.info("cancelled publish to %s ran on and was stored as %s", topic, write.result().message_ids)
