"""AsyncGatewayClient: the gateway's Python client for asyncio (:class:`tms_hbase.aio.api.AsyncMessagingService`
over ``tms-gateway``'s REST API, on asyncio streams: :mod:`tms_hbase.gateway_client.aio_http1`).

It sends what the blocking :class:`~tms_hbase.gateway_client.http.GatewayClient` sends: every request is
built, checked and decoded by :mod:`tms_hbase.gateway_client.calls` and every failure mapped by
:mod:`tms_hbase.gateway_client.outcomes`, so both raise the same errors for the same input and answers.
What differs is the I/O: no thread per call, many calls in flight on one event loop, each on a pooled
keep-alive connection, with the HTTP/1.1 codec of the blocking client.

- ``timeout_seconds`` bounds each call as a whole (waiting for a pooled connection, connect, send, wait,
  read: ``asyncio.timeout``), so a hung or trickling gateway is HBaseUnavailable (``timed_out`` set) in
  time; a long-poll (``poll``, ``receive``) may take its wait on top.
- A link that fails is HBaseUnavailable, or PublishOutcomeUnknown for a publish that was sent. Calls
  safe to repeat are sent again once when a kept-alive connection turns out closed before any answer.
- **Coalescing.** Non-transactional publishes to a topic made while a publish to it is in flight go
  together in the next request (one batch row; each result names its own messages), bounded by bytes and
  count (:mod:`tms_hbase.aio.coalesce`): many tasks publishing one message each cost a request per round
  trip, not one each. A request the gateway refuses as bad input is sent again in halves, so the refusal
  reaches only the publish it concerns; a request whose outcome is unknown is every member's
  PublishOutcomeUnknown.
- **Cancellation.** Cancelling a call raises CancelledError at once and drops its connection (a half-read
  answer never reaches another call). A cancelled ``publish`` leaves the batch stored whole or not at
  all, never in part (the gateway stores a batch as one unit): still queued behind the request in flight,
  it is not stored; once its request is sent, the request runs on for the other publishes in it, and one
  whose publishes were all cancelled is cut short (which of the two, stored or not, is then known only
  when it had not been sent yet; otherwise ``fetch`` shows it, as after PublishOutcomeUnknown).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import TypeVar

from tms_hbase.aio.api import AsyncMessagingService
from tms_hbase.aio.coalesce import GroupOutcome, PublishLanes
from tms_hbase.errors import (
    InvalidArgument,
    PublishOutcomeUnknown,
    TopicNotFound,
)
from tms_hbase.gateway_client import calls, http1
from tms_hbase.gateway_client.aio_consumers import AsyncGatewayConsumer, AsyncGatewaySharedConsumer
from tms_hbase.gateway_client.aio_http1 import AsyncPool
from tms_hbase.gateway_client.aio_operations import AsyncGatewayOperations
from tms_hbase.gateway_client.calls import Reply, Request
from tms_hbase.gateway_client.outcomes import NOT_IDEMPOTENT, Broken, answer_error, link_error
from tms_hbase.model import checks
from tms_hbase.model.isolation import COMMITTED
from tms_hbase.model.message import Message
from tms_hbase.model.published import PublishResult
from tms_hbase.model.record import Record
from tms_hbase.model.subscription import check_name
from tms_hbase.model.topic import TopicId, TopicLike, TopicMetadata
from tms_hbase.model.topic import as_topic as _topic
from tms_hbase.rest import codec as rest
from tms_hbase.tx import Transaction

T = TypeVar("T")


class AsyncGatewayClient(AsyncGatewayOperations):
    """A client of ``tms-gateway`` for asyncio, with the options of
    :class:`~tms_hbase.gateway_client.http.GatewayClient`: ``url`` (default ``$TMS_GATEWAY_URL`` or
    http://127.0.0.1:8080), ``token`` (default ``$TMS_GATEWAY_TOKEN``), ``timeout_seconds`` per call,
    ``media`` (Avro with keys and headers, CDAP's Avro, or JSON),
    ``ca_file`` / ``client_cert`` / ``client_key`` / ``ssl_context`` for https,
    ``pool_size`` kept-alive connections idle at most ``max_idle`` seconds; ``max_connections`` calls
    in flight at once (more wait for a connection, within their timeout).

    Use it from one event loop, as ``async with AsyncGatewayClient(...) as client`` or calling
    :meth:`close`. The operations that are one request each are
    :class:`~tms_hbase.gateway_client.aio_operations.AsyncGatewayOperations`'s (generated from the blocking
    client's); what is this client's own follows.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout_seconds: float = 10.0,
        media: str = rest.AVRO_RECORDS,
        pool_size: int = 8,
        max_connections: int = 100,
        ca_file: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        max_idle: float = 15.0,
    ) -> None:
        s = calls.settings(url, token, timeout_seconds, media, ca_file, client_cert, client_key, ssl_context)
        self.url, self.timeout_seconds, self.media = s.url, s.timeout_seconds, s.media
        self.calls = calls.Calls(s.media)
        self._auth = http1.header_lines(s.auth)
        self._pool = AsyncPool(s.host, s.port, s.ssl_context, pool_size, max_idle, max_connections)
        self._max_idle = max_idle
        # Single publishes to one topic put together while a request to it is in flight (every topic takes
        # shared rows through the gateway, so the lanes never write directly: no recheck).
        self._lanes = PublishLanes(
            self._publish_group, self._publish_one, _own_unknown, checks.DEFAULT_MAX_BATCH_BYTES, 0.0, abandon=True
        )

    async def __aenter__(self) -> AsyncGatewayClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Let the publish requests queued or in flight end, then close the pooled connections."""
        await self._lanes.wait_idle()
        self._pool.close()

    def __repr__(self) -> str:
        return f"AsyncGatewayClient({self.url!r})"

    # -- listing, publishing, fetching and consumers: unlike the blocking client's ----------------

    async def list_topic_metadata(self, namespace: str | None = None) -> list[TopicMetadata]:
        """Like :meth:`list_topics`, with each topic's metadata (one call per topic, all at once)."""
        topics = await self.list_topics(namespace)
        found = await asyncio.gather(*(self._topic_or_none(t) for t in topics))
        return [meta for meta in found if meta is not None]

    async def _topic_or_none(self, topic: TopicId) -> TopicMetadata | None:
        try:
            return await self.get_topic(topic)
        except TopicNotFound:
            return None  # deleted since it was listed

    async def publish(
        self,
        topic: TopicLike,
        payloads: Sequence[bytes | Record],
        tx_write_pointer: int | None = None,
        *,
        ttl_seconds: float | None = None,
        resume: PublishOutcomeUnknown | None = None,
    ) -> PublishResult:
        """As the blocking client's (``resume`` is InvalidArgument: the retry state stays in the gateway),
        but a non-transactional publish goes together with the others made while one to its topic is in
        flight; cancelled: stored whole or not at all (the module's docstring)."""
        if tx_write_pointer is not None or resume is not None:
            return await super().publish(topic, payloads, tx_write_pointer, ttl_seconds=ttl_seconds, resume=resume)
        topic, batch = calls.publish_args(topic, payloads, ttl_seconds, allow_empty=False)
        return await self._lanes.publish(topic, batch, ttl_seconds)

    async def _publish_group(
        self, topic: TopicId, batches: Sequence[tuple[bytes | Record, ...]], ttl: float | None, since: float
    ) -> GroupOutcome:
        """Several publishes' messages as one request, by the deadline from ``since``; refused as bad input,
        a group of several is handed back to be sent again in halves (the refusal may concern one of them)."""
        messages = batches[0] if len(batches) == 1 else [m for batch in batches for m in batch]
        try:
            result = await self.run(self.calls.publish_checked(topic, messages, None, ttl), since=since)
        except InvalidArgument:
            if len(batches) == 1:
                raise
            return GroupOutcome(True, None)
        return GroupOutcome(True, result)

    async def _publish_one(
        self, topic: TopicId, payloads: tuple[bytes | Record, ...], ttl: float | None, since: float
    ) -> PublishResult:
        return await self.run(self.calls.publish_checked(topic, payloads, None, ttl), since=since)

    def fetch(
        self,
        topic: TopicLike,
        start_message: bytes | None = None,
        start_time_ms: int | None = None,
        inclusive: bool = True,
        limit: int | None = None,
        transaction: Transaction | None = None,
    ) -> AsyncIterator[Message]:
        """Messages in order, page by page (``poll`` calls, each capped by the gateway) until a page comes
        back empty or ``limit`` is reached; arguments are checked now, the first page is read at the
        first ``__anext__``."""
        return self._pages(self.calls.fetch(topic, start_message, start_time_ms, inclusive, limit, transaction))

    async def _pages(self, pages: calls.Pages) -> AsyncIterator[Message]:
        while pages.next is not None:
            for message in pages.take(await self.run(pages.next)):
                yield message

    def consumer(
        self,
        topic: TopicLike,
        name: str,
        *,
        max_wait_seconds: float = 5.0,
        batch: int = 100,
        isolation: str = COMMITTED,
    ) -> AsyncGatewayConsumer:
        """The exclusive consumer of a subscription as a gateway consumer session, opened by ``async with``
        (SubscriptionBusy there while another consumer holds it). ``batch``: messages asked for per call;
        ``isolation`` as on the blocking client."""
        return AsyncGatewayConsumer(self, _topic(topic), check_name(name), max_wait_seconds, batch, isolation)

    def shared_consumer(
        self,
        topic: TopicLike,
        name: str,
        *,
        owner: str | None = None,
        max_wait_seconds: float = 5.0,
        isolation: str = COMMITTED,
    ) -> AsyncGatewaySharedConsumer:
        """One consumer of a shared subscription; ``owner`` and ``isolation`` as on the blocking client."""
        return AsyncGatewaySharedConsumer(self, _topic(topic), check_name(name), owner, max_wait_seconds, isolation)

    # -- one HTTP exchange --------------------------------------------------------------------

    async def run(self, request: Request[T], *, pool: AsyncPool | None = None, since: float | None = None) -> T:
        """Carry one request: its decoded 2xx answer, else the TmsError the gateway reported, or
        HBaseUnavailable / PublishOutcomeUnknown for a link that failed or a deadline that passed.
        ``pool``: the connection of a consumer session (:meth:`session_pool`) instead of the shared ones;
        ``since``: the ``time.monotonic()`` the deadline counts from (default: now)."""
        try:
            reply = await self._send(request, pool or self._pool, since)
        finally:
            if request.done is not None:
                request.done()
        if reply.status >= 400:
            raise answer_error(reply, request.topic, request.subscription)
        return request.decode(reply)

    def session_pool(self) -> AsyncPool:
        """One keep-alive connection of its own for a consumer session: its calls reach the same gateway
        worker, which keeps the session's consumer (and what it read ahead) between them."""
        return AsyncPool(self._pool.host, self._pool.port, self._pool.context, 1, self._max_idle, 1)

    async def _send(self, request: Request[object], pool: AsyncPool, since: float | None) -> Reply:
        head = calls.request_head(self._auth, request, self.media)
        waited = 0.0 if since is None else time.monotonic() - since
        deadline = asyncio.get_running_loop().time() + self.timeout_seconds + request.wait - waited
        for attempt in (1, 2):
            try:
                async with asyncio.timeout_at(deadline):
                    conn, reused = await pool.take()
            except TimeoutError as exc:
                broken = Broken("no free connection in time", sent=False, timed_out=True)
                raise link_error(request.what, broken, self.url, self.timeout_seconds) from exc
            try:
                async with asyncio.timeout_at(deadline):
                    if not conn.connected:
                        await conn.connect()
                    response = await conn.exchange(request.method, request.path, head, request.body)
            except BaseException as exc:
                pool.discard(conn)  # cut short (an error, the deadline, a cancellation): never reused
                if not isinstance(exc, (OSError, http1.ProtocolError)):
                    raise  # CancelledError, and the caller's own bugs
                timed_out = isinstance(exc, TimeoutError)
                reason = "timed out" if timed_out else f"{type(exc).__name__}: {exc}"
                broken = Broken(
                    reason, sent=conn.sent, stale=reused and isinstance(exc, http1.STALE), timed_out=timed_out
                )
                # A kept-alive connection the server had closed: the request never arrived. Sent again
                # once, unless running it twice could matter.
                if broken.stale and attempt == 1 and request.what not in NOT_IDEMPOTENT:
                    continue
                raise link_error(request.what, broken, self.url, self.timeout_seconds) from exc
            pool.give_back(conn, response.keep_alive)
            return calls.reply_of(response)
        raise AssertionError("unreachable")


# mypy holds the class to its whole interface: a member missing (abstract) is an error here.
_SERVICE: type[AsyncMessagingService] = AsyncGatewayClient


def _own_unknown(unknown: PublishOutcomeUnknown, first_index: int) -> PublishOutcomeUnknown:
    """A member's own PublishOutcomeUnknown of a shared request whose outcome is unknown (no resume: the retry
    state stays in the gateway)."""
    own = PublishOutcomeUnknown(str(unknown), None)
    own.timed_out = unknown.timed_out
    return own
