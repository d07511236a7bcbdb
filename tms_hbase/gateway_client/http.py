"""GatewayClient: MessagingClient's surface over CDAP's messaging REST API, through ``tms-gateway``.

A program switches between direct access and the gateway by changing one line::

    client = MessagingClient("127.0.0.1:9090", prefix="tms")
    client = GatewayClient("https://gateway:8080", token="...", ca_file="ca.pem")

Errors come back as the same :mod:`tms_hbase.errors` classes (the gateway names the class in a
header), plus NotAuthenticated (401) and NotAuthorized (403). What each call checks, sends and decodes
is :mod:`tms_hbase.gateway_client.calls`, shared with the asyncio client; this module carries the
requests. The HTTP client is the project's own lean HTTP/1.1 connection
(:mod:`tms_hbase.gateway_client.http1`), made robust here: ``timeout_seconds`` is a deadline for the whole
call (connect, send, wait, read), enforced by a watchdog thread that shuts the socket down when it
passes, so a trickling server cannot stretch a call; keep-alive connections are pooled and reused, and a
pooled connection the server has closed is detected before use.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import TypeVar

from tms_hbase.api import MessagingService, SubscriptionConsumer
from tms_hbase.errors import TmsError, TopicNotFound
from tms_hbase.gateway_client import calls, http1, sessions
from tms_hbase.gateway_client.calls import Reply, Request
from tms_hbase.gateway_client.http_shared import GatewaySharedConsumer
from tms_hbase.gateway_client.operations import GatewayOperations
from tms_hbase.gateway_client.outcomes import NOT_IDEMPOTENT, Broken, answer_error, link_error
from tms_hbase.model import checks
from tms_hbase.model.isolation import COMMITTED
from tms_hbase.model.message import Message
from tms_hbase.model.subscription import check_name
from tms_hbase.model.topic import TopicId, TopicLike, TopicMetadata
from tms_hbase.model.topic import as_topic as _topic
from tms_hbase.rest import codec as rest
from tms_hbase.tx import Transaction

T = TypeVar("T")


class GatewayClient(GatewayOperations):
    """A client of ``tms-gateway`` with the surface of :class:`tms_hbase.MessagingClient`.

    ``url`` is the gateway (default ``$TMS_GATEWAY_URL`` or http://127.0.0.1:8080); ``token`` the bearer
    token (default ``$TMS_GATEWAY_TOKEN``). ``timeout_seconds`` bounds every call as a whole.
    ``media`` is the body encoding: :data:`~tms_hbase.rest.codec.AVRO_RECORDS` (default: Avro with keys and
    headers), :data:`~tms_hbase.rest.codec.JSON` (keys and headers included) or
    :data:`tms_hbase.rest.codec.AVRO` (CDAP's schemas, as CDAP's clients send them: no keys or headers).
    For https: ``ca_file`` verifies the gateway's certificate (default: the system's CAs), and
    ``client_cert``/``client_key`` present a client certificate (mutual TLS); or pass ``ssl_context``.
    Thread-safe; use it as a context manager or call :meth:`close`.

    The operations that are one request each are :class:`~tms_hbase.gateway_client.operations.GatewayOperations`'s
    (the asyncio client's are generated from them); what is this client's own follows.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout_seconds: float = 10.0,
        media: str = rest.AVRO_RECORDS,
        pool_size: int = 8,
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
        self._pool = _Pool(s.host, s.port, s.ssl_context, pool_size, max_idle)
        self._max_idle = max_idle

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections."""
        self._pool.close()

    def __repr__(self) -> str:
        return f"GatewayClient({self.url!r})"

    # -- listing, fetching and consumers: unlike the asyncio client's ------------------------------

    def list_topic_metadata(self, namespace: str | None = None) -> list[TopicMetadata]:
        """Like :meth:`list_topics`, with each topic's metadata (one call per topic)."""
        result = []
        for topic in self.list_topics(namespace):
            try:
                result.append(self.get_topic(topic))
            except TopicNotFound:
                continue  # deleted since it was listed
        return result

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
        pages = self.calls.fetch(topic, start_message, start_time_ms, inclusive, limit, transaction)
        assert pages.next is not None
        return self._pages(pages, pages.take(self.run(pages.next)))

    def _pages(self, pages: calls.Pages, page: list[Message]) -> Iterator[Message]:
        while True:
            yield from page
            if pages.next is None:
                return
            page = pages.take(self.run(pages.next))

    def consumer(
        self,
        topic: TopicLike,
        name: str,
        *,
        max_wait_seconds: float = 5.0,
        batch: int = 100,
        isolation: str = COMMITTED,
    ) -> GatewayConsumer:
        """The active consumer of a subscription, through a gateway consumer session (docs/gateway.md):
        SubscriptionBusy (409) while another consumer holds it. ``max_wait_seconds``: seconds an iteration waits
        for a new message; ``batch``: messages asked for per call. Options of direct consumers that
        need the process to hold the consumer (transactions, auto-commit, doorbells) are not offered.
        ``isolation``: "committed" (committed messages only, the default) or "uncommitted" (every message
        as stored), the REST call's ``?isolation=``."""
        return GatewayConsumer(self, _topic(topic), check_name(name), max_wait_seconds, batch, isolation)

    def shared_consumer(
        self,
        topic: TopicLike,
        name: str,
        *,
        owner: str | None = None,
        max_wait_seconds: float = 5.0,
        isolation: str = COMMITTED,
    ) -> GatewaySharedConsumer:
        """One consumer of a shared subscription through the gateway (:mod:`tms_hbase.gateway_client.http_shared`), with
        the library's ``receive``/``ack``/``nack``/``release``/``extend``. ``owner``: the session's secret,
        to settle its deliveries from another process (default: the gateway makes one at the first
        ``receive``). The library's ``poll_interval_seconds`` and ``reap_interval`` are the gateway's own.
        ``isolation`` as :meth:`consumer`."""
        return GatewaySharedConsumer(self, _topic(topic), check_name(name), owner, max_wait_seconds, isolation)

    # -- one HTTP exchange --------------------------------------------------------------------

    def run(self, request: Request[T], *, pool: _Pool | None = None) -> T:
        """Carry one request: its decoded 2xx answer, else the TmsError the gateway reported or
        HBaseUnavailable / PublishOutcomeUnknown for a link that failed. ``request.wait``: seconds the
        gateway may hold the call (a long-poll) on top of the client's timeout. ``pool``: the connection
        of a consumer session (:meth:`session_pool`) instead of the shared ones."""
        try:
            reply = self._send(request, pool or self._pool)
        finally:
            if request.done is not None:
                request.done()
        if reply.status >= 400:
            raise answer_error(reply, request.topic, request.subscription)
        return request.decode(reply)

    def session_pool(self) -> _Pool:
        """One keep-alive connection of its own for a consumer session: its calls reach the same gateway
        worker, which keeps the session's consumer (and what it read ahead) between them."""
        return _Pool(self._pool.host, self._pool.port, self._pool.context, 1, self._max_idle)

    def _send(self, request: Request[object], pool: _Pool) -> Reply:
        head = calls.request_head(self._auth, request, self.media)
        deadline = time.monotonic() + self.timeout_seconds + request.wait
        for attempt in (1, 2):
            conn, reused = pool.take()
            try:
                reply, keep_alive = _exchange(conn, request.method, request.path, request.body, head, deadline)
            except Broken as broken:
                pool.discard(conn)
                # A pooled connection the server closed just as it was reused: the request never
                # arrived. Safe to send again, except where a lost answer would make it run twice.
                if broken.stale and reused and attempt == 1 and request.what not in NOT_IDEMPOTENT:
                    continue
                raise link_error(request.what, broken, self.url, self.timeout_seconds) from broken.__cause__
            pool.give_back(conn, keep_alive)
            return reply
        raise AssertionError("unreachable")


# mypy holds the class to its whole interface: a member missing (abstract) is an error here.
_SERVICE: type[MessagingService] = GatewayClient


class GatewayConsumer(SubscriptionConsumer):
    """A consumer session of the gateway with the surface of :class:`tms_hbase.Consumer`: ``poll``,
    iteration, ``commit`` and ``close`` (which gives the lease back; what was delivered and not
    committed is delivered again to the next consumer: at-least-once). Its calls go over one connection of
    its own (:meth:`GatewayClient.session_pool`), closed with it. Not thread-safe."""

    def __init__(
        self,
        client: GatewayClient,
        topic: TopicId,
        name: str,
        max_wait_seconds: float,
        batch: int,
        isolation: str = COMMITTED,
    ) -> None:
        checks.seconds("max_wait_seconds", max_wait_seconds)
        checks.positive_int("batch", batch)
        self.client, self.topic, self.name, self.batch = client, topic, name, batch
        self.max_wait_seconds = max_wait_seconds
        self._session = sessions.ConsumerSession(client.calls, topic, name, isolation)
        self._pool = client.session_pool()
        try:
            client.run(self._session.open(), pool=self._pool)
        except BaseException:
            self._pool.close()
            raise

    def __enter__(self) -> GatewayConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GatewayConsumer({self.topic}, {self.name!r}, {self.client.url!r})"

    @property
    def committed(self) -> bytes | None:
        """The subscription's mark as this consumer last committed or found it."""
        return self._session.committed

    @property
    def delivered(self) -> bytes | None:
        """The id of the last message delivered (what ``commit()`` stores)."""
        return self._session.delivered

    def poll(self, max_messages: int = 100, timeout_seconds: float = 1.0, *, commit: bool = False) -> list[Message]:
        """Up to ``max_messages`` messages in order, as soon as there is one; ``[]`` after ``timeout_seconds``.
        ``commit``: first store the last delivered message as the mark, in the same HTTP call (one round
        trip a page instead of two): once this returns the mark is stored; LeaseLost (409) and nothing
        delivered if the session's lease is gone."""
        checks.seconds("timeout_seconds", timeout_seconds)
        return self.client.run(self._session.poll(max_messages, timeout_seconds, commit), pool=self._pool)

    def __iter__(self) -> Iterator[Message]:
        """Messages in order; waits up to ``max_wait_seconds`` for the next one, then the iteration ends."""
        while True:
            page = self.poll(self.batch, self.max_wait_seconds)
            if not page:
                return
            for message in page:
                self._session.delivered = message.id
                yield message

    def commit(self, message: Message | bytes | None = None) -> None:
        """Store the last delivered message (or ``message``, delivered already) as the subscription's
        mark; LeaseLost (409) if the session's lease ran out or was taken over."""
        request = self._session.commit(message)
        if request is not None:
            self.client.run(request, pool=self._pool)

    def close(self) -> None:
        """Give the lease back (another consumer may start at once). Idempotent; never raises."""
        request = self._session.close()
        if request is not None:
            with contextlib.suppress(TmsError):
                self.client.run(request, pool=self._pool)
        self._pool.close()


_CONSUMER: type[SubscriptionConsumer] = GatewayConsumer  # as _SERVICE


# -- the HTTP exchange, under a deadline ---------------------------------------------------------


def _exchange(
    conn: http1.Connection, method: str, path: str, body: bytes | None, head: bytes, deadline: float
) -> tuple[Reply, bool]:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise Broken("deadline passed", sent=False, timed_out=True)
    if conn.sock is None:
        try:  # connect (and the TLS handshake) first: a failure here means nothing was sent
            conn.connect(remaining)
        except OSError as exc:
            raise Broken(f"{type(exc).__name__}: {exc}", sent=False, timed_out=isinstance(exc, TimeoutError)) from exc
        assert conn.sock is not None
    conn.sock.settimeout(remaining)
    ticket = _WATCHDOG.arm(deadline, conn)  # from here on the watchdog bounds the call
    try:
        response = conn.exchange(method, path, head, body)
    except (OSError, http1.ProtocolError) as exc:
        fired = _WATCHDOG.disarm(ticket)
        if fired or isinstance(exc, TimeoutError):
            raise Broken("timed out", timed_out=True) from exc
        raise Broken(f"{type(exc).__name__}: {exc}", stale=isinstance(exc, http1.STALE)) from exc
    if _WATCHDOG.disarm(ticket):
        raise Broken("timed out", timed_out=True)
    return calls.reply_of(response), response.keep_alive


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
