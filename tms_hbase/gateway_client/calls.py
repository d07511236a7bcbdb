"""Every call of the gateway's Python clients as data, without I/O: what the blocking
:class:`~tms_hbase.gateway_client.http.GatewayClient` and the asyncio
:class:`~tms_hbase.gateway_client.aio.AsyncGatewayClient` send and how they read the answer.

A method of :class:`Calls` checks its arguments (with :mod:`tms_hbase.model.checks`, before anything is
sent), encodes the request and returns it as a :class:`Request` whose ``decode`` turns the gateway's
:class:`Reply` into the method's result. The two clients only carry requests over their own connections
(the split of h11 and httpx, or of redis-py's sync and asyncio clients), so they cannot drift apart in
what they check, send, return or raise. The consumers' sessions are built the same way
(:mod:`tms_hbase.gateway_client.sessions`). The settings both take (URL, token, TLS, media, timeout) are
checked here too (:func:`settings`).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast
from urllib.parse import urlencode, urlsplit

from tms_hbase import tracing
from tms_hbase.errors import InvalidArgument, PublishOutcomeUnknown
from tms_hbase.gateway_client import http1
from tms_hbase.model import checks
from tms_hbase.model.checks import validate_payloads
from tms_hbase.model.message import Message
from tms_hbase.model.published import PublishResult, rollback_detail
from tms_hbase.model.record import Batch, Record
from tms_hbase.model.requests import ConsumeRequest, PublishRequest
from tms_hbase.model.stats import Lag, TopicStats
from tms_hbase.model.subscription import PendingMessage, Subscription, check_name
from tms_hbase.model.topic import TopicId, TopicLike, TopicMetadata
from tms_hbase.model.topic import as_topic as _topic
from tms_hbase.model.wire import RollbackDetail
from tms_hbase.rest import codec as rest
from tms_hbase.rest import shared as rest_shared
from tms_hbase.tx import Transaction, TransactionCodec

URL_ENV = "TMS_GATEWAY_URL"
TOKEN_ENV = "TMS_GATEWAY_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8080"
AVRO_LIMIT = 2**31 - 1  # ConsumeRequest.limit is an Avro int

T = TypeVar("T")
R = TypeVar("R", covariant=True)


@dataclass(frozen=True)
class Reply:
    """A 2xx answer of the gateway (an error answer becomes a TmsError: :mod:`.outcomes`)."""

    status: int
    body: bytes
    error_name: str | None = None  # the TMS-Error header
    consumer: str | None = None  # the TMS-Consumer header
    published: str | None = None  # the TMS-Published header
    committed: str | None = None  # the TMS-Committed header


@dataclass(frozen=True)
class Request(Generic[R]):
    """One HTTP request and how to read its answer. ``what`` names the call in errors (and decides
    whether it may be sent twice: :data:`.outcomes.NOT_IDEMPOTENT`); ``content_type`` None is the
    client's media; ``wait`` is how long the gateway may hold it (a long-poll), on top of the timeout."""

    what: str
    method: str
    path: str
    decode: Callable[[Reply], R]
    body: bytes | None = None
    topic: TopicId | None = None
    subscription: str | None = None
    content_type: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    wait: float = 0.0
    done: Callable[[], None] | None = None  # run after the call whatever its outcome


@dataclass(frozen=True)
class Settings:
    """A gateway client's checked settings."""

    url: str
    host: str
    port: int
    ssl_context: ssl.SSLContext | None  # None: plain http
    auth: dict[str, str]  # the Authorization header, or nothing
    timeout_seconds: float
    media: str


def settings(
    url: str | None,
    token: str | None,
    timeout_seconds: float,
    media: str,
    ca_file: str | None,
    client_cert: str | None,
    client_key: str | None,
    ssl_context: ssl.SSLContext | None,
) -> Settings:
    """The settings of a gateway client (defaults from ``$TMS_GATEWAY_URL`` and ``$TMS_GATEWAY_TOKEN``);
    InvalidArgument for a bad URL, media or timeout, or a token that would break the header."""
    url = url or os.environ.get(URL_ENV) or DEFAULT_URL
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise InvalidArgument(f"bad gateway URL {url!r}: expected http(s)://host:port")
    if media not in (*rest.AVROS, rest.JSON):
        raise InvalidArgument(f"media must be {rest.AVRO!r}, {rest.AVRO_RECORDS!r} or {rest.JSON!r}, not {media!r}")
    if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, (int, float)) or not timeout_seconds > 0:
        raise InvalidArgument(f"timeout_seconds must be positive, not {timeout_seconds!r}")
    if parts.scheme == "https" and ssl_context is None:
        ssl_context = ssl.create_default_context(cafile=ca_file)
        if client_cert:
            ssl_context.load_cert_chain(client_cert, client_key)
    token = token if token is not None else os.environ.get(TOKEN_ENV)
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    http1.header_lines(auth)  # a control character (a line break) in the token: InvalidArgument now
    port = parts.port or (443 if parts.scheme == "https" else 80)
    context = ssl_context if parts.scheme == "https" else None
    return Settings(url, parts.hostname, port, context, auth, float(timeout_seconds), media)


# The Content-Type lines of the bodies the clients send, made once; the answer headers they read.
_CONTENT_TYPES = {media: http1.header_lines({"Content-Type": media}) for media in (*rest.AVROS, rest.JSON, rest.OCTETS)}
_ERROR_HEADER, _CONSUMER_HEADER = rest.ERROR_HEADER.lower(), rest.CONSUMER_HEADER.lower()
_PUBLISHED_HEADER, _COMMITTED_HEADER = rest.PUBLISHED_HEADER.lower(), rest.COMMITTED_HEADER.lower()


def request_head(auth: bytes, request: Request[object], media: str) -> bytes:
    """The header lines of ``request`` after its request line and Host (``auth``: the client's
    Authorization line, from :func:`http1.header_lines`)."""
    head = auth
    if request.body is not None:
        head += _CONTENT_TYPES[request.content_type or media]
    if request.headers:
        head += http1.header_lines(dict(request.headers))
    return head


def reply_of(response: http1.Response) -> Reply:
    headers = response.headers
    return Reply(
        response.status,
        response.body,
        headers.get(_ERROR_HEADER),
        headers.get(_CONSUMER_HEADER),
        headers.get(_PUBLISHED_HEADER),
        headers.get(_COMMITTED_HEADER),
    )


def publish_args(
    topic: TopicLike, payloads: Sequence[bytes | Record], ttl_seconds: float | None, *, allow_empty: bool
) -> tuple[TopicId, Batch]:
    """A publish's topic and messages, checked at the call (InvalidArgument); their size is the gateway's to check."""
    topic = _topic(topic)
    checks.ttl_seconds(ttl_seconds)
    return topic, validate_payloads(tracing.created(str(topic), payloads), 2**63, allow_empty=allow_empty)


def with_query(path: str, query: Mapping[str, object]) -> str:
    return f"{path}?{urlencode(query)}" if query else path


def _body(reply: Reply) -> bytes:
    return reply.body


def nothing(reply: Reply) -> None:
    """The decoder of a call that answers nothing to return."""
    return None


class Calls:
    """The requests of the messaging interface (:class:`tms_hbase.api.MessagingService`) in one media."""

    def __init__(self, media: str) -> None:
        self.media = media

    def ping(self) -> Request[None]:
        return Request("ping", "GET", "/health", nothing)

    # -- topics -------------------------------------------------------------------------------

    def create_topic(self, topic: TopicLike, properties: Mapping[str, str] | None) -> Request[TopicMetadata]:
        topic = _topic(topic)
        body = rest.encode_properties(properties)
        return Request("create topic", "PUT", rest.topic_path(topic), _topic_of(topic), body, topic)

    def update_topic(
        self, topic: TopicLike, properties: Mapping[str, str], expected: TopicMetadata | None
    ) -> Request[TopicMetadata]:
        if expected is not None:
            raise InvalidArgument("update_topic(expected=...) is not supported through the gateway")
        topic = _topic(topic)
        path = rest.topic_path(topic, "properties")
        return Request("update topic", "PUT", path, _topic_of(topic), rest.encode_properties(properties), topic)

    def get_topic(self, topic: TopicLike) -> Request[TopicMetadata]:
        topic = _topic(topic)
        return Request("get topic", "GET", rest.topic_path(topic), _topic_of(topic), topic=topic)

    def list_topics(self, namespace: str | None) -> Request[list[TopicId]]:
        if namespace is None:
            raise InvalidArgument("the gateway lists the topics of one namespace: give list_topics a namespace")
        checks.namespace(namespace)

        def decode(reply: Reply) -> list[TopicId]:
            return [TopicId(namespace, name) for name in rest.decode_names(reply.body)]

        return Request("list topics", "GET", rest.BASE.format(namespace=namespace) + "/topics", decode)

    def delete_topic(self, topic: TopicLike) -> Request[None]:
        topic = _topic(topic)
        return Request("delete topic", "DELETE", rest.topic_path(topic), nothing, topic=topic)

    # -- messages -----------------------------------------------------------------------------

    def publish(
        self,
        topic: TopicLike,
        payloads: Sequence[bytes | Record],
        tx_write_pointer: int | None,
        ttl_seconds: float | None,
        resume: PublishOutcomeUnknown | None,
    ) -> Request[PublishResult]:
        """The PublishResult comes from the ``TMS-Published`` header (generation and position) and, with a
        write pointer, the rollback handle in the body. ``resume`` cannot be honoured over HTTP (the retry
        state stays in the gateway): InvalidArgument rather than a silent second copy."""
        if resume is not None:
            raise InvalidArgument("publish(resume=...) is not supported through the gateway")
        topic, batch = publish_args(topic, payloads, ttl_seconds, allow_empty=True)
        return self.publish_checked(topic, batch, tx_write_pointer, ttl_seconds)

    def publish_checked(
        self, topic: TopicId, batch: Sequence[bytes | Record], tx_write_pointer: int | None, ttl_seconds: float | None
    ) -> Request[PublishResult]:
        """:meth:`publish` of messages checked already (several publishes' put together, by the asyncio client)."""
        body = rest.encode_publish(PublishRequest(tx_write_pointer, batch), self.media)
        query = {} if ttl_seconds is None else {"ttl": ttl_seconds}

        def decode(reply: Reply) -> PublishResult:
            generation, position = rest.decode_published(reply.published)
            detail = RollbackDetail.from_bytes(reply.body) if reply.body else None
            return PublishResult(topic, generation, position, len(batch), rollback=detail)

        return Request("publish", "POST", with_query(rest.topic_path(topic, "publish"), query), decode, body, topic)

    def store(
        self, topic: TopicLike, payloads: Sequence[bytes | Record], tx_write_pointer: int, sequence: int | None
    ) -> Request[None]:
        topic = _topic(topic)
        batch = validate_payloads(tracing.created(str(topic), payloads), 2**63, allow_empty=True)
        body = rest.encode_publish(PublishRequest(tx_write_pointer, batch), self.media)
        path = with_query(rest.topic_path(topic, "store"), {} if sequence is None else {"sequence": sequence})
        return Request("store", "POST", path, nothing, body, topic)

    def rollback(self, topic: TopicLike, handle: PublishResult | RollbackDetail | bytes) -> Request[None]:
        topic = _topic(topic)
        data = bytes(rollback_detail(handle))
        path = rest.topic_path(topic, "rollback")
        return Request("rollback", "POST", path, nothing, data, topic, content_type=rest.OCTETS)

    def fetch(
        self,
        topic: TopicLike,
        start_message: bytes | None,
        start_time_ms: int | None,
        inclusive: bool,
        limit: int | None,
        transaction: Transaction | None,
    ) -> Pages:
        """A fetch page by page (``poll`` calls, each capped by the gateway), arguments checked now."""
        topic = _topic(topic)
        checks.fetch_args(start_message, start_time_ms, inclusive, limit, transaction)
        tx = None if transaction is None else TransactionCodec.encode(transaction)
        start = bytes(start_message) if start_message is not None else start_time_ms
        request = ConsumeRequest(start, inclusive, None if limit is None else min(limit, AVRO_LIMIT), tx)
        return Pages(self, topic, request, limit)

    def poll(self, topic: TopicId, request: ConsumeRequest) -> Request[list[Message]]:
        """One ``poll`` call as CDAP's API defines it (a page of at most the gateway's cap)."""
        topic = _topic(topic)
        path = with_query(rest.topic_path(topic, "poll"), {"publishTime": "true"})
        body = rest.encode_consume(request, self.media)
        return Request("poll", "POST", path, self._messages, body, topic)

    def _messages(self, reply: Reply) -> list[Message]:
        return rest.decode_messages(reply.body, self.media, publish_time=True)

    # -- subscriptions ------------------------------------------------------------------------

    def create_subscription(
        self,
        topic: TopicLike,
        name: str,
        start: str | int,
        shared: bool,
        options: dict[str, object],
    ) -> Request[Subscription]:
        """``options``: the shared subscription's settings by their library names (``ack_timeout_seconds``,
        ``max_deliveries``, ``dead_letter``, ``claim_size``, ``ordering``), None where not given."""
        topic, name = _topic(topic), check_name(name)
        checks.subscription_options(shared, options)
        if options.get("dead_letter") is not None:
            options = {**options, "dead_letter": _topic(cast(TopicLike, options["dead_letter"]))}
        body = rest_shared.encode_create(start, shared, options)
        return self._sub("create subscription", "PUT", rest.subscription_path(topic, name), topic, name, body)

    def get_subscription(self, topic: TopicLike, name: str) -> Request[Subscription]:
        topic, name = _topic(topic), check_name(name)
        return self._sub("get subscription", "GET", rest.subscription_path(topic, name), topic, name)

    def list_subscriptions(self, topic: TopicLike) -> Request[list[Subscription]]:
        topic = _topic(topic)

        def decode(reply: Reply) -> list[Subscription]:
            return rest.decode_subscriptions(topic, reply.body)

        return Request("list subscriptions", "GET", rest.subscription_path(topic), decode, topic=topic)

    def delete_subscription(self, topic: TopicLike, name: str, force: bool) -> Request[None]:
        topic, name = _topic(topic), check_name(name)
        path = with_query(rest.subscription_path(topic, name), {"force": "true"} if force else {})
        return self._sub("delete subscription", "DELETE", path, topic, name, decode=nothing)

    def reset_subscription(
        self,
        topic: TopicLike,
        name: str,
        start_message: bytes | str | None,
        start_time_ms: int | None,
        force: bool,
    ) -> Request[Subscription]:
        topic, name = _topic(topic), check_name(name)
        checks.reset_start(start_message, start_time_ms)
        path = with_query(rest.subscription_path(topic, name, "reset"), {"force": "true"} if force else {})
        start: bytes | str | int = start_message if start_message is not None else cast(int, start_time_ms)
        return self._sub("reset subscription", "POST", path, topic, name, rest.encode_start(start))

    def release_subscription(self, topic: TopicLike, name: str) -> Request[None]:
        """Takes the lease from whichever session (or direct consumer) holds it; the caller then reads the
        subscription back (:meth:`get_subscription`)."""
        topic, name = _topic(topic), check_name(name)
        path = with_query(rest.subscription_path(topic, name, "consumer"), {"force": "true"})
        return self._sub("release subscription", "DELETE", path, topic, name, decode=nothing)

    def lag(self, topic: TopicLike, name: str) -> Request[Lag]:
        topic, name = _topic(topic), check_name(name)
        path = rest.subscription_path(topic, name)
        return self._sub("lag", "GET", path, topic, name, decode=lambda reply: rest.decode_lag(reply.body))

    def topic_stats(self, topic: TopicLike, windows: Sequence[int] | None) -> Request[TopicStats]:
        topic = _topic(topic)
        checks.windows(windows)
        query = {} if windows is None else {"windows": ",".join(str(w) for w in windows)}
        path = with_query(rest.topic_path(topic, "stats"), query)

        def decode(reply: Reply) -> TopicStats:
            return rest.decode_stats(topic, reply.body)

        return Request("topic stats", "GET", path, decode, topic=topic)

    def pending(self, topic: TopicLike, name: str, limit: int | None) -> Request[list[PendingMessage]]:
        topic, name = _topic(topic), check_name(name)
        checks.positive_int("limit", limit, optional=True)
        path = with_query(rest.subscription_path(topic, name, "pending"), {} if limit is None else {"limit": limit})
        return self._sub("pending", "GET", path, topic, name, decode=lambda r: rest_shared.decode_pending(r.body))

    def _sub(
        self,
        what: str,
        method: str,
        path: str,
        topic: TopicId,
        name: str,
        body: bytes | None = None,
        decode: Callable[[Reply], T] | None = None,
    ) -> Request[T]:
        """A call on one subscription (JSON; a 404 is SubscriptionNotFound); by default it answers the
        subscription."""
        if decode is None:

            def subscription(reply: Reply) -> Subscription:
                return rest.decode_subscription(topic, reply.body)

            decode = cast(Callable[[Reply], T], subscription)
        return Request(what, method, path, decode, body, topic, name, content_type=rest.JSON)


def _topic_of(topic: TopicId) -> Callable[[Reply], TopicMetadata]:
    def decode(reply: Reply) -> TopicMetadata:
        return rest.decode_topic(topic.namespace, reply.body)

    return decode


class Pages:
    """Where a fetch stands: :attr:`next` is the poll that gets the next page, None once a page came
    back empty or ``limit`` messages were delivered; :meth:`take` cuts a page to the limit."""

    def __init__(self, calls: Calls, topic: TopicId, request: ConsumeRequest, limit: int | None) -> None:
        self.calls, self.topic, self.left = calls, topic, limit
        self.next: Request[list[Message]] | None = calls.poll(topic, request)
        self._transaction = request.transaction

    def take(self, page: list[Message]) -> list[Message]:
        """The messages of ``page`` to deliver; prepares :attr:`next`."""
        if self.left is not None:
            page = page[: self.left]
            self.left -= len(page)
        if not page or self.left == 0:
            self.next = None
        else:
            limit = None if self.left is None else min(self.left, AVRO_LIMIT)
            self.next = self.calls.poll(self.topic, ConsumeRequest(page[-1].id, False, limit, self._transaction))
        return page
