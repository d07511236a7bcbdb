"""GatewayClient: MessagingClient's surface over CDAP's messaging REST API, through ``tms-gateway``.

A program switches between direct access and the gateway by changing one line::

    client = MessagingClient("127.0.0.1:9090", prefix="tms")
    client = GatewayClient("https://gateway:8080", token="...", ca_file="ca.pem")

Errors come back as the same :mod:`tms_hbase.errors` classes (the gateway names the class in a
header), plus NotAuthenticated (401) and NotAuthorized (403). The HTTP client is the
project's own lean HTTP/1.1 connection (:mod:`tms_hbase.gateway_client.http1`), made robust here:
``timeout_seconds`` is a deadline for the whole call (connect, send, wait, read), enforced by a
watchdog thread that shuts the socket down when it passes, so a trickling server cannot stretch a
call; keep-alive connections are pooled and reused, and a pooled connection the server
has closed is detected before use.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlencode, urlsplit

from tms_hbase import errors
from tms_hbase.api import MessagingService
from tms_hbase.consume.subscriptions import Subscription, check_name
from tms_hbase.errors import (
    HBaseUnavailable,
    InvalidArgument,
    PublishOutcomeUnknown,
    SubscriptionAlreadyExists,
    SubscriptionNotFound,
    TmsError,
    TopicAlreadyExists,
    TopicNotFound,
)
from tms_hbase.fetch.reader import Message
from tms_hbase.fetch.stats import Lag, TopicStats
from tms_hbase.gateway_client import http1, rest, rest_shared
from tms_hbase.gateway_client.http_shared import GatewaySharedConsumer
from tms_hbase.model import checks
from tms_hbase.model.published import PublishResult, rollback_detail
from tms_hbase.model.topic import TopicId, TopicLike, TopicMetadata
from tms_hbase.model.topic import as_topic as _topic
from tms_hbase.model.wire import RollbackDetail
from tms_hbase.publish.writer import validate_payloads
from tms_hbase.shared.admin import PendingMessage
from tms_hbase.tx import Transaction, TransactionCodec

URL_ENV = "TMS_GATEWAY_URL"
TOKEN_ENV = "TMS_GATEWAY_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8080"
_AVRO_LIMIT = 2**31 - 1  # ConsumeRequest.limit is an Avro int
# The outcome of a call the gateway may have carried out before the link failed is unknown for these.
_NOT_IDEMPOTENT = frozenset(
    {"create topic", "delete topic", "publish", "store", "create subscription", "delete subscription", "open consumer"}
    | {"receive", "ack", "nack", "release", "extend"}  # a shared consumer's calls
)


class GatewayClient(MessagingService):
    """A client of ``tms-gateway`` with the surface of :class:`tms_hbase.MessagingClient`.

    ``url`` is the gateway (default ``$TMS_GATEWAY_URL`` or http://127.0.0.1:8080); ``token`` the bearer
    token (default ``$TMS_GATEWAY_TOKEN``). ``timeout_seconds`` bounds every call as a whole.
    ``media`` is the body encoding, :data:`tms_hbase.gateway_client.rest.AVRO` (default) or
    :data:`~tms_hbase.gateway_client.rest.JSON`.
    For https: ``ca_file`` verifies the gateway's certificate (default: the system's CAs), and
    ``client_cert``/``client_key`` present a client certificate (mutual TLS); or pass ``ssl_context``.
    Thread-safe; use it as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout_seconds: float = 10.0,
        media: str = rest.AVRO,
        pool_size: int = 8,
        ca_file: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        max_idle: float = 15.0,
    ) -> None:
        self.url = url or os.environ.get(URL_ENV) or DEFAULT_URL
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
            raise InvalidArgument(f"bad gateway URL {self.url!r}: expected http(s)://host:port")
        if media not in (rest.AVRO, rest.JSON):
            raise InvalidArgument(f"media must be {rest.AVRO!r} or {rest.JSON!r}, not {media!r}")
        if not timeout_seconds > 0:
            raise InvalidArgument(f"timeout_seconds must be positive, not {timeout_seconds!r}")
        if parts.scheme == "https" and ssl_context is None:
            ssl_context = ssl.create_default_context(cafile=ca_file)
            if client_cert:
                ssl_context.load_cert_chain(client_cert, client_key)
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        self.timeout_seconds = timeout_seconds
        self.media = media
        self._auth = http1.header_lines({"Authorization": f"Bearer {token}"} if token else {})  # checked once
        port = parts.port or (443 if parts.scheme == "https" else 80)
        self._pool = _Pool(parts.hostname, port, ssl_context if parts.scheme == "https" else None, pool_size, max_idle)

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections."""
        self._pool.close()

    def __repr__(self) -> str:
        return f"GatewayClient({self.url!r})"

    def ping(self) -> None:
        """``GET /health``: returns once the gateway answers that HBase does; HBaseUnavailable otherwise."""
        self._call("ping", "GET", "/health")

    # -- topics -------------------------------------------------------------------------------

    def create_topic(
        self, topic: TopicLike, properties: Mapping[str, str] | None = None, *, exist_ok: bool = False
    ) -> TopicMetadata:
        """``PUT /topics/<t>``: TopicAlreadyExists (409), unless ``exist_ok`` (then the existing topic is
        returned as it is), or InvalidArgument (400), as direct access raises."""
        topic = _topic(topic)
        try:
            body = self._call("create topic", "PUT", rest.topic_path(topic), rest.encode_properties(properties), topic)
        except TopicAlreadyExists:
            if not exist_ok:
                raise
            return self.get_topic(topic)
        return rest.decode_topic(topic.namespace, body)

    def update_topic(
        self, topic: TopicLike, properties: Mapping[str, str], *, expected: TopicMetadata | None = None
    ) -> TopicMetadata:
        """``PUT /topics/<t>/properties`` (replaces them all). ``expected`` is not supported by the REST API."""
        if expected is not None:
            raise InvalidArgument("update_topic(expected=...) is not supported through the gateway")
        topic = _topic(topic)
        path = rest.topic_path(topic, "properties")
        body = self._call("update topic", "PUT", path, rest.encode_properties(properties), topic)
        return rest.decode_topic(topic.namespace, body)

    def get_topic(self, topic: TopicLike) -> TopicMetadata:
        topic = _topic(topic)
        return rest.decode_topic(topic.namespace, self._call("get topic", "GET", rest.topic_path(topic), None, topic))

    def list_topics(self, namespace: str | None = None) -> list[TopicId]:
        """The topics of ``namespace`` (the REST API lists one namespace at a time)."""
        if namespace is None:
            raise InvalidArgument("the gateway lists the topics of one namespace: give list_topics a namespace")
        checks.namespace(namespace)
        names = rest.decode_names(self._call("list topics", "GET", rest.BASE.format(namespace=namespace) + "/topics"))
        return [TopicId(namespace, name) for name in names]

    def list_topic_metadata(self, namespace: str | None = None) -> list[TopicMetadata]:
        """Like :meth:`list_topics`, with each topic's metadata (one call per topic)."""
        result = []
        for topic in self.list_topics(namespace):
            try:
                result.append(self.get_topic(topic))
            except TopicNotFound:
                continue  # deleted since it was listed
        return result

    def delete_topic(self, topic: TopicLike) -> None:
        topic = _topic(topic)
        self._call("delete topic", "DELETE", rest.topic_path(topic), None, topic)

    # -- messages -----------------------------------------------------------------------------

    def publish(
        self,
        topic: TopicLike,
        payloads: Sequence[bytes],
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
        if resume is not None:
            raise InvalidArgument("publish(resume=...) is not supported through the gateway")
        topic = _topic(topic)
        checks.ttl_seconds(ttl_seconds)
        batch = validate_payloads(payloads, 2**63, allow_empty=True)  # the gateway checks emptiness and size
        body = rest.encode_publish(rest.PublishRequest(tx_write_pointer, batch), self.media)
        query = {} if ttl_seconds is None else {"ttl": ttl_seconds}
        path = _with_query(rest.topic_path(topic, "publish"), query)
        reply = self._request("publish", "POST", path, body, topic)
        generation, position = rest.decode_published(reply.published)
        detail = RollbackDetail.from_bytes(reply.body) if reply.body else None
        return PublishResult(topic, generation, position, len(batch), rollback=detail)

    def store(
        self, topic: TopicLike, payloads: Sequence[bytes], tx_write_pointer: int, *, sequence: int | None = None
    ) -> None:
        """``POST /topics/<t>/store``: payloads under a write pointer, invisible until it is published."""
        topic = _topic(topic)
        batch = validate_payloads(payloads, 2**63, allow_empty=True)
        body = rest.encode_publish(rest.PublishRequest(tx_write_pointer, batch), self.media)
        query = {} if sequence is None else {"sequence": sequence}
        self._call("store", "POST", _with_query(rest.topic_path(topic, "store"), query), body, topic)

    def rollback(self, topic: TopicLike, handle: PublishResult | RollbackDetail | bytes) -> None:
        """``POST /topics/<t>/rollback`` with the handle's bytes as the body."""
        topic = _topic(topic)
        data = bytes(rollback_detail(handle))
        self._call("rollback", "POST", rest.topic_path(topic, "rollback"), data, topic, content_type=rest.OCTETS)

    def fetch(
        self,
        topic: TopicLike,
        start_message: bytes | None = None,
        start_time_ms: int | None = None,
        inclusive: bool = True,
        limit: int | None = None,
        transaction: Transaction | None = None,
    ) -> Iterator[Message]:
        """Messages in order, as :meth:`MessagingClient.fetch`: polls ``POST /topics/<t>/poll`` page by page
        (the gateway caps a page), each from the last id, until a page comes back empty or ``limit`` is
        reached. The first page is fetched now, so bad arguments and TopicNotFound raise here."""
        topic = _topic(topic)
        checks.fetch_args(start_message, start_time_ms, inclusive, limit, transaction)
        tx = None if transaction is None else TransactionCodec.encode(transaction)
        start = bytes(start_message) if start_message is not None else start_time_ms
        request = rest.ConsumeRequest(start, inclusive, None if limit is None else min(limit, _AVRO_LIMIT), tx)
        first = self.poll(topic, request)
        return self._pages(topic, first, request, limit)

    def poll(self, topic: TopicId, request: rest.ConsumeRequest) -> list[Message]:
        """One ``poll`` call as CDAP's API defines it (a page of at most the gateway's cap)."""
        topic = _topic(topic)
        path = _with_query(rest.topic_path(topic, "poll"), {"publishTime": "true"})
        body = self._call("poll", "POST", path, rest.encode_consume(request, self.media), topic)
        return rest.decode_messages(body, self.media, publish_time=True)

    def _pages(
        self, topic: TopicId, page: list[Message], request: rest.ConsumeRequest, limit: int | None
    ) -> Iterator[Message]:
        left = limit
        while page:
            if left is not None:
                page = page[:left]
                left -= len(page)
            yield from page
            if left == 0:
                return
            limit_now = None if left is None else min(left, _AVRO_LIMIT)
            request = rest.ConsumeRequest(page[-1].id, False, limit_now, request.transaction)
            page = self.poll(topic, request)

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
    ) -> Subscription:
        """``PUT .../subscriptions/<name>``, as :meth:`MessagingClient.create_subscription` (a shared one
        with its settings); SubscriptionAlreadyExists (409), unless ``exist_ok`` (then the existing
        subscription is returned as it is), and InvalidArgument (400) as direct access raises."""
        topic, name = _topic(topic), check_name(name)
        options: dict[str, object] = {"ack_timeout_seconds": ack_timeout_seconds, "max_deliveries": max_deliveries}
        options |= {"claim_size": claim_size, "dead_letter": dead_letter}
        checks.subscription_options(shared, options)
        if dead_letter is not None:
            options["dead_letter"] = _topic(dead_letter)
        path = rest.subscription_path(topic, name)
        try:
            body = self._sub_call(
                "create subscription", "PUT", path, topic, name, rest_shared.encode_create(start, shared, options)
            )
        except SubscriptionAlreadyExists:
            if not exist_ok:
                raise
            return self.get_subscription(topic, name)
        return rest.decode_subscription(topic, body)

    def get_subscription(self, topic: TopicLike, name: str) -> Subscription:
        topic, name = _topic(topic), check_name(name)
        body = self._sub_call("get subscription", "GET", rest.subscription_path(topic, name), topic, name)
        return rest.decode_subscription(topic, body)

    def list_subscriptions(self, topic: TopicLike) -> list[Subscription]:
        topic = _topic(topic)
        return rest.decode_subscriptions(
            topic, self._call("list subscriptions", "GET", rest.subscription_path(topic), None, topic)
        )

    def delete_subscription(self, topic: TopicLike, name: str, *, force: bool = False) -> None:
        topic, name = _topic(topic), check_name(name)
        path = _with_query(rest.subscription_path(topic, name), {"force": "true"} if force else {})
        self._sub_call("delete subscription", "DELETE", path, topic, name)

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
        topic, name = _topic(topic), check_name(name)
        checks.reset_start(start_message, start_time_ms)
        path = _with_query(rest.subscription_path(topic, name, "reset"), {"force": "true"} if force else {})
        start: bytes | str | int = start_message if start_message is not None else cast(int, start_time_ms)
        body = self._sub_call("reset subscription", "POST", path, topic, name, rest.encode_start(start))
        return rest.decode_subscription(topic, body)

    def release_subscription(self, topic: TopicLike, name: str) -> Subscription:
        """``DELETE .../subscriptions/<name>/consumer?force=true``: take the lease away from whichever
        session (or direct consumer) holds the subscription, keeping its mark; SubscriptionNotFound."""
        topic, name = _topic(topic), check_name(name)
        path = _with_query(rest.subscription_path(topic, name, "consumer"), {"force": "true"})
        self._sub_call("release subscription", "DELETE", path, topic, name)
        return self.get_subscription(topic, name)

    def lag(self, topic: TopicLike, name: str) -> Lag:
        """How far the subscription is behind (from ``GET .../subscriptions/<name>``)."""
        topic, name = _topic(topic), check_name(name)
        return rest.decode_lag(self._sub_call("lag", "GET", rest.subscription_path(topic, name), topic, name))

    def topic_stats(self, topic: TopicLike, *, windows: Sequence[int] | None = None) -> TopicStats:
        """``GET /topics/<t>/stats``: as :meth:`MessagingClient.topic_stats`."""
        topic = _topic(topic)
        checks.windows(windows)
        query = {} if windows is None else {"windows": ",".join(str(w) for w in windows)}
        body = self._call("topic stats", "GET", _with_query(rest.topic_path(topic, "stats"), query), None, topic)
        return rest.decode_stats(topic, body)

    def consumer(
        self, topic: TopicLike, name: str, *, max_wait_seconds: float = 5.0, batch: int = 100
    ) -> GatewayConsumer:
        """The active consumer of a subscription, through a gateway consumer session (docs/gateway.md):
        SubscriptionBusy (409) while another consumer holds it. ``max_wait_seconds``: seconds an iteration waits
        for a new message; ``batch``: messages asked for per call. Options of direct consumers that
        need the process to hold the consumer (transactions, auto-commit, doorbells) are not offered."""
        return GatewayConsumer(self, _topic(topic), check_name(name), max_wait_seconds, batch)

    def pending(self, topic: TopicLike, name: str, *, limit: int | None = None) -> list[PendingMessage]:
        """``GET .../subscriptions/<name>/pending``: a shared subscription's deliveries not settled."""
        topic, name = _topic(topic), check_name(name)
        checks.positive_int("limit", limit, optional=True)
        path = _with_query(rest.subscription_path(topic, name, "pending"), {} if limit is None else {"limit": limit})
        return rest_shared.decode_pending(self._sub_call("pending", "GET", path, topic, name))

    def shared_consumer(
        self, topic: TopicLike, name: str, *, owner: str | None = None, max_wait_seconds: float = 5.0
    ) -> GatewaySharedConsumer:
        """One consumer of a shared subscription through the gateway (:mod:`tms_hbase.gateway_client.http_shared`), with
        the library's ``receive``/``ack``/``nack``/``release``/``extend``. ``owner``: the session's secret,
        to settle its deliveries from another process (default: the gateway makes one at the first
        ``receive``). The library's ``poll_interval_seconds`` and ``reap_interval`` are the gateway's own."""
        return GatewaySharedConsumer(self, _topic(topic), check_name(name), owner, max_wait_seconds)

    def _sub_call(
        self, what: str, method: str, path: str, topic: TopicId, name: str, body: bytes | None = None
    ) -> bytes:
        return self._request(what, method, path, body, topic, content_type=rest.JSON, subscription=name).body

    # -- one HTTP exchange --------------------------------------------------------------------

    def _call(
        self,
        what: str,
        method: str,
        path: str,
        body: bytes | None = None,
        topic: TopicId | None = None,
        *,
        content_type: str | None = None,
    ) -> bytes:
        return self._request(what, method, path, body, topic, content_type=content_type).body

    def _request(
        self,
        what: str,
        method: str,
        path: str,
        body: bytes | None = None,
        topic: TopicId | None = None,
        *,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
        subscription: str | None = None,
        wait: float = 0.0,
    ) -> _Reply:
        """One call: the reply of a 2xx answer, else the TmsError the gateway reported. ``wait``: seconds
        the gateway may hold the call (a long-poll) on top of the client's timeout."""
        head = self._auth
        if body is not None:
            head += _CONTENT_TYPES[content_type or self.media]
        if headers:
            head += http1.header_lines(dict(headers))
        deadline = time.monotonic() + self.timeout_seconds + wait
        for attempt in (1, 2):
            conn, reused = self._pool.take()
            try:
                reply = _exchange(conn, method, path, body, head, deadline)
            except _Broken as broken:
                self._pool.discard(conn)
                # A pooled connection the server closed just as it was reused: the request never
                # arrived. Safe to send again, except where a lost answer would make it run twice.
                if broken.stale and reused and attempt == 1 and what not in _NOT_IDEMPOTENT:
                    continue
                raise self._link_error(what, broken) from broken.__cause__
            self._pool.give_back(conn, reply.keep_alive)
            if reply.status >= 400:
                raise _error(reply, topic, subscription)
            return reply
        raise AssertionError("unreachable")

    def _link_error(self, what: str, broken: _Broken) -> TmsError:
        if not broken.sent:
            err = HBaseUnavailable(f"{what}: cannot reach the gateway at {self.url} ({broken.reason})")
        elif what == "publish":
            reason = "did not answer in time" if broken.timed_out else f"failed ({broken.reason})"
            message = f"publish: the gateway at {self.url} {reason}; the batch may or may not be stored"
            err = PublishOutcomeUnknown(message, None)
        else:
            reason = (
                f"did not answer within {self.timeout_seconds}s" if broken.timed_out else f"failed ({broken.reason})"
            )
            maybe = "; the call may have taken effect" if what in _NOT_IDEMPOTENT else ""
            err = HBaseUnavailable(f"{what}: the gateway at {self.url} {reason}{maybe}")
        err.timed_out = broken.timed_out
        return err


class GatewayConsumer:
    """A consumer session of the gateway with the surface of :class:`tms_hbase.Consumer`: ``poll``,
    iteration, ``commit`` and ``close`` (which gives the lease back; what was delivered and not
    committed is delivered again to the next consumer: at-least-once). Not thread-safe."""

    def __init__(self, client: GatewayClient, topic: TopicId, name: str, max_wait_seconds: float, batch: int) -> None:
        checks.seconds("max_wait_seconds", max_wait_seconds)
        checks.positive_int("batch", batch)
        self.client, self.topic, self.name, self.max_wait_seconds, self.batch = (
            client,
            topic,
            name,
            max_wait_seconds,
            batch,
        )
        self._closed = False
        self._token: str | None = None  # the session, as the gateway's last answer gave it
        reply = self._call("open consumer", "POST", "consumer")
        self._committed = rest.decode_committed(reply.body)
        self._delivered = self._committed

    def __enter__(self) -> GatewayConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GatewayConsumer({self.topic}, {self.name!r}, {self.client.url!r})"

    @property
    def committed(self) -> bytes | None:
        """The subscription's mark as this consumer last committed or found it."""
        return self._committed

    @property
    def delivered(self) -> bytes | None:
        """The id of the last message delivered (what ``commit()`` stores)."""
        return self._delivered

    def poll(self, max_messages: int = 100, timeout_seconds: float = 1.0) -> list[Message]:
        """Up to ``max_messages`` messages in order, as soon as there is one; ``[]`` after ``timeout_seconds``."""
        checks.positive_int("max_messages", max_messages)
        checks.seconds("timeout_seconds", timeout_seconds)
        query = {"wait": timeout_seconds, "max": max_messages, "publishTime": "true"}
        reply = self._call("poll subscription", "GET", "messages", query=query, wait=timeout_seconds)
        got = rest.decode_messages(reply.body, self.client.media, publish_time=True)
        if got:
            self._delivered = got[-1].id
        return got

    def __iter__(self) -> Iterator[Message]:
        """Messages in order; waits up to ``max_wait_seconds`` for the next one, then the iteration ends."""
        while True:
            page = self.poll(self.batch, self.max_wait_seconds)
            if not page:
                return
            for message in page:
                self._delivered = message.id
                yield message

    def commit(self, message: Message | bytes | None = None) -> None:
        """Store the last delivered message (or ``message``, delivered already) as the subscription's
        mark; LeaseLost (409) if the session's lease ran out or was taken over."""
        mark = self._delivered if message is None else message.id if isinstance(message, Message) else message
        if mark is None:
            return
        reply = self._call("commit", "POST", "commit", body=rest.encode_commit(mark))
        self._committed = rest.decode_committed(reply.body)

    def close(self) -> None:
        """Give the lease back (another consumer may start at once). Idempotent; never raises."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(TmsError):
            self._call("close consumer", "DELETE", "consumer")

    def _call(
        self,
        what: str,
        method: str,
        action: str,
        *,
        query: Mapping[str, object] | None = None,
        body: bytes | None = None,
        wait: float = 0.0,
    ) -> _Reply:
        if self._closed and what != "close consumer":
            raise TmsError(f"{self!r} is closed")
        headers = {"Accept": self.client.media}
        if self._token is not None:
            headers[rest.CONSUMER_HEADER] = self._token
        path = _with_query(rest.subscription_path(self.topic, self.name, action), query or {})
        reply = self.client._request(
            what,
            method,
            path,
            body,
            self.topic,
            headers=headers,
            subscription=self.name,
            wait=wait,
            content_type=rest.JSON,
        )
        if reply.consumer:
            self._token = reply.consumer
        return reply


def _with_query(path: str, query: Mapping[str, object]) -> str:
    return f"{path}?{urlencode(query)}" if query else path


# -- errors back from the gateway ----------------------------------------------------------------

_ERRORS: dict[str, type[TmsError]] = {
    name: value
    for name, value in [*vars(errors).items(), ("UnsupportedMediaType", rest.UnsupportedMediaType)]
    if isinstance(value, type) and issubclass(value, TmsError)
}


def _error(reply: _Reply, topic: TopicId | None, subscription: str | None = None) -> TmsError:
    """The TmsError the gateway reported: its class by the error header, else by the status code."""
    message = reply.body.decode("utf-8", "replace").strip() or f"HTTP {reply.status}"
    kind = _ERRORS.get(reply.error_name or "")
    if kind is None:
        fallback = {404: TmsError if topic is None else TopicNotFound, 503: HBaseUnavailable}
        kind = fallback.get(reply.status) or next((k for k, s in rest.STATUS if s == reply.status), TmsError)
    if issubclass(kind, (TopicNotFound, TopicAlreadyExists)) and topic is not None:
        return kind(topic)
    if issubclass(kind, (SubscriptionNotFound, SubscriptionAlreadyExists)) and subscription is not None:
        return kind(topic, subscription)
    if issubclass(kind, PublishOutcomeUnknown):
        return kind(message, None)
    try:
        return kind(message)
    except TypeError:  # a class whose constructor takes more than a message
        return TmsError(message)


# -- the HTTP exchange, under a deadline ---------------------------------------------------------


@dataclass
class _Reply:
    status: int
    body: bytes
    error_name: str | None
    keep_alive: bool
    consumer: str | None = None  # the TMS-Consumer header
    published: str | None = None  # the TMS-Published header


class _Broken(Exception):
    """The link failed. ``sent``: the request may have reached the gateway; ``stale``: a pooled connection
    the server had closed; ``timed_out``: the deadline passed."""

    def __init__(self, reason: str, *, sent: bool = True, stale: bool = False, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.sent, self.stale, self.timed_out = reason, sent, stale, timed_out


_STALE = (http1.ClosedBeforeAnswer, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
# The Content-Type lines of the bodies this client sends, made once.
_CONTENT_TYPES = {media: http1.header_lines({"Content-Type": media}) for media in (rest.AVRO, rest.JSON, rest.OCTETS)}
_ERROR_HEADER, _CONSUMER_HEADER = rest.ERROR_HEADER.lower(), rest.CONSUMER_HEADER.lower()
_PUBLISHED_HEADER = rest.PUBLISHED_HEADER.lower()


def _exchange(
    conn: http1.Connection, method: str, path: str, body: bytes | None, head: bytes, deadline: float
) -> _Reply:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _Broken("deadline passed", sent=False, timed_out=True)
    if conn.sock is None:
        try:  # connect (and the TLS handshake) first: a failure here means nothing was sent
            conn.connect(remaining)
        except OSError as exc:
            raise _Broken(f"{type(exc).__name__}: {exc}", sent=False, timed_out=isinstance(exc, TimeoutError)) from exc
        assert conn.sock is not None
    conn.sock.settimeout(remaining)
    ticket = _WATCHDOG.arm(deadline, conn)  # from here on the watchdog bounds the call
    try:
        response = conn.exchange(method, path, head, body)
    except (OSError, http1.ProtocolError) as exc:
        fired = _WATCHDOG.disarm(ticket)
        if fired or isinstance(exc, TimeoutError):
            raise _Broken("timed out", timed_out=True) from exc
        raise _Broken(f"{type(exc).__name__}: {exc}", stale=isinstance(exc, _STALE)) from exc
    if _WATCHDOG.disarm(ticket):
        raise _Broken("timed out", timed_out=True)
    headers = response.headers
    return _Reply(
        response.status,
        response.body,
        headers.get(_ERROR_HEADER),
        response.keep_alive,
        headers.get(_CONSUMER_HEADER),
        headers.get(_PUBLISHED_HEADER),
    )


class _Watchdog:
    """One daemon thread that shuts down the socket of every call still running at its deadline.

    Waking that thread costs a thread switch (and a GIL hand-over), so a call wakes it only if it is due
    before the thread would look anyway (``_wake_at``); finished calls leave the heap from its top when
    they end, so the thread does not wake for them either."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._live: dict[int, http1.Connection] = {}
        self._fired: set[int] = set()
        self._tickets = itertools.count()
        self._thread: threading.Thread | None = None
        self._wake_at = math.inf  # when the thread looks at the heap next (inf: once woken)

    def arm(self, deadline: float, conn: http1.Connection) -> int:
        with self._cond:
            ticket = next(self._tickets)
            self._live[ticket] = conn
            heapq.heappush(self._heap, (deadline, ticket))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tms-http-deadlines", daemon=True)
                self._thread.start()
            if deadline < self._wake_at:
                self._cond.notify()
            return ticket

    def disarm(self, ticket: int) -> bool:
        """Forget a call; True if its deadline had passed and its socket was shut down."""
        with self._cond:
            self._live.pop(ticket, None)
            heap = self._heap
            while heap and heap[0][1] not in self._live:
                heapq.heappop(heap)
            if ticket in self._fired:
                self._fired.discard(ticket)
                return True
            return False

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        break
                    self._wake_at = self._heap[0][0] if self._heap else math.inf
                    self._cond.wait(None if not self._heap else self._wake_at - now)
                _, ticket = heapq.heappop(self._heap)
                conn = self._live.pop(ticket, None)
                if conn is None:
                    continue
                self._fired.add(ticket)
            sock = conn.sock
            if sock is not None:
                # the plain socket's shutdown (not SSLSocket's): a blocked read or write in the caller returns
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)


_WATCHDOG = _Watchdog()


class _Pool:
    """Idle keep-alive connections to one gateway, newest first; at most ``size`` are kept."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext | None, size: int, max_idle: float) -> None:
        self.host, self.port, self.context = host, port, context
        self.size, self.max_idle = size, max_idle
        self._idle: list[tuple[http1.Connection, float]] = []
        self._lock = threading.Lock()

    def take(self) -> tuple[http1.Connection, bool]:
        """A connection and whether it was used before (a new one connects on first use)."""
        while True:
            with self._lock:
                if not self._idle:
                    break
                conn, since = self._idle.pop()
            if time.monotonic() - since < self.max_idle and not _closed_by_peer(conn):
                return conn, True
            conn.close()
        return http1.Connection(self.host, self.port, self.context), False

    def give_back(self, conn: http1.Connection, keep_alive: bool) -> None:
        with self._lock:
            if keep_alive and len(self._idle) < self.size:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def discard(self, conn: http1.Connection) -> None:
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()


def _closed_by_peer(conn: http1.Connection) -> bool:
    """An idle connection is readable only if the server closed it (or broke the protocol)."""
    if conn.sock is None:
        return True
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
