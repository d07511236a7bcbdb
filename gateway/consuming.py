"""The consumer's calls: subscriptions under ``/v1/namespaces/{namespace}/topics/{topic}/subscriptions``
and ``GET .../topics/{topic}/stats`` (docs/gateway.md, "Subscriptions").

**Consumer sessions over stateless HTTP.** A subscription has one active consumer, whose lease lives in
HBase (:mod:`tms_hbase.consume.lease`). Each ``messages``/``commit`` call opens the library consumer (or takes
up the one this worker parked after the session's last call, :mod:`.sessions`), uses it and parks it
without renewing its lease, which keeps the lease in HBase for ``consumer_lease`` seconds at least (a call
renews it only when less is left). The caller
gets the session back in the ``TMS-Consumer`` header, ``<secret>~<last delivered id, hex>``, and sends
it with its next call, which any worker can serve: the lease's owner is derived from the secret and the
caller's principal (so the owner shown by ``GET .../subscriptions/{s}`` cannot be used to take a session
over), and the consumer resumes after the last message delivered. A call without the header opens a new
session: 409 SubscriptionBusy while another session (or direct consumer) holds the lease; a session
whose lease ran out is 409 LeaseLost. Commits store the last delivered message (or an earlier one named
in the body); whatever was delivered but not committed when a session ends (released, or its lease ran
out) is delivered again to the next consumer: at-least-once.

**Long-polls** wait in slices of :data:`SLICE` seconds among the long-poll waits (``Gateway.wait``,
at most ``long_polls`` at once, apart from the library calls publishes take), and end at once when the
worker is told to stop.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tms_hbase import ConsumerSession, TopicId
from tms_hbase.consume.consumer import Consumer
from tms_hbase.errors import InvalidArgument, SubscriptionBusy
from tms_hbase.model.isolation import COMMITTED, check_isolation
from tms_hbase.model.rows import RowSlice
from tms_hbase.model.subscription import check_name
from tms_hbase.rest import codec as rest
from tms_hbase.rest import shared as rest_shared

from .auth import CONSUME, PUBLISH
from .bodies import query_flag, query_number, read_body
from .errors import client_gone
from .routes import TOPIC, endpoint
from .service import Gateway
from .sessions import Key, lease_length

SUBSCRIPTIONS = TOPIC + "/subscriptions"
SUBSCRIPTION = SUBSCRIPTIONS + "/{subscription}"
SLICE = 0.5  # seconds a long-poll waits at a time (then it checks whether the worker stops)
T = TypeVar("T")
DEFAULT_MAX = 100  # messages per call without ?max=
SMALL_BODY = 64 * 1024  # create, reset and commit bodies are a few bytes


# -- subscriptions -------------------------------------------------------------------------------


@endpoint(CONSUME)
async def create_subscription(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    """``PUT .../subscriptions/{s}`` with ``{"start": "earliest" | "latest" | ms}`` (none: earliest), and
    for a shared one ``"shared": true`` and its settings (a dead-letter topic needs the ``publish``
    action on it); 409 if it exists."""
    name = _name(request)
    body = await read_body(request, SMALL_BODY)
    create = rest_shared.decode_create(body)
    target = create.options.get("dead_letter")
    if isinstance(target, TopicId):
        gateway.guard.check(request.state.principal, target.namespace, target.topic, PUBLISH)
    sub = await gateway.run(
        lambda: gateway.client.create_subscription(topic, name, create.start, shared=create.shared, **create.options)
    )
    return _json(rest.encode_subscription(sub))


@endpoint(CONSUME)
async def list_subscriptions(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    return _json(rest.encode_subscriptions(await gateway.run(gateway.client.list_subscriptions, topic)))


@endpoint(CONSUME)
async def get_subscription(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    """The subscription with its committed mark, active consumer and lag."""
    name = _name(request)

    def work() -> bytes:
        sub = gateway.client.get_subscription(topic, name)
        return rest.encode_subscription(sub, gateway.client.lag(topic, name))

    return _json(await gateway.run(work))


@endpoint(CONSUME)
async def delete_subscription(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    """409 SubscriptionBusy while a consumer holds it, unless ``?force=true``."""
    name, force = _name(request), query_flag(request, "force")
    await gateway.run(lambda: gateway.client.delete_subscription(topic, name, force=force))
    return Response(status_code=200)


@endpoint(CONSUME)
async def reset_subscription(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    """``POST .../reset`` with ``{"start": "earliest" | "latest" | ms | "<base64 id>"}``: the next message
    delivered is that one; 409 while a consumer holds it, unless ``?force=true``."""
    name, force = _name(request), query_flag(request, "force")
    body = await read_body(request, SMALL_BODY)

    def work() -> bytes:
        start = rest.decode_start(body, ids=True)
        if isinstance(start, int):
            sub = gateway.client.reset_subscription(topic, name, start_time_ms=start, force=force)
        else:
            sub = gateway.client.reset_subscription(topic, name, start, force=force)
        return rest.encode_subscription(sub)

    return _json(await gateway.run(work))


# -- consuming -----------------------------------------------------------------------------------


@endpoint(CONSUME)
async def messages(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    """``GET .../messages?wait=S&max=N``: up to N messages after the session's last delivered one, as
    soon as there is one, else ``[]`` after S seconds (at most the ``max_wait`` setting). The body is CDAP's
    Message array in the media type ``Accept`` names (``?publishTime=true`` as for ``poll``).
    ``?commit=true`` (with the session's header): first store the last message delivered to the session,
    as ``POST .../commit`` does, in the same call; an answer (its ``TMS-Committed`` header: the mark, hex)
    means it is stored; an error delivers no page (LeaseLost: nothing was stored either).
    ``?isolation=uncommitted``: every message as stored, rolled-back ones included (default ``committed``:
    committed messages only)."""
    name = _name(request)
    isolation = check_isolation(request.query_params.get("isolation", COMMITTED))
    commit_first = query_flag(request, "commit")
    wait = query_number(request, "wait", float)
    wait = 0.0 if wait is None else wait
    if not wait >= 0:
        raise InvalidArgument(f"query parameter wait={wait!r}: expected seconds >= 0")
    count = query_number(request, "max", int)
    count = DEFAULT_MAX if count is None else count
    if count <= 0:
        raise InvalidArgument(f"query parameter max={count}: expected a positive integer")
    size = min(count, gateway.settings.max_poll_messages)
    with_time = query_flag(request, "publishTime")
    media = rest.accepted_media(request.headers.get("accept"), request.headers.get("content-type"))
    caller = _caller(request, required=commit_first)
    wait = min(wait, gateway.settings.max_wait)
    limit = gateway.settings.max_poll_bytes  # a page stops after the message that reaches it
    headers: dict[str, str] = {}

    def answer(consumer: Consumer, got: list[RowSlice]) -> tuple[bytes, str, Callable[[], None] | None]:
        """The page encoded straight from the stored rows' slices, the session's header and, when the page
        had messages, what starts reading the session's next batch ahead once the page is sent; the
        consumer is parked for the session's next call (after that read)."""
        token = caller.token(consumer)
        sent = None
        if got:
            sent = gateway.sessions.read_ahead(_key(topic, name, caller), consumer, gateway.run)
        else:
            _put_back(gateway, topic, name, caller, consumer, True)
        gateway.metrics.counted("consume", sum(map(len, got)))
        return rest.encode_rows(got, media, publish_time=with_time), token, sent

    def at_once() -> tuple[Consumer, tuple[bytes, str, Callable[[], None] | None] | None]:
        """Open the session's consumer and take what is there without waiting: a page that is there is
        answered in this same library call (the common case of a consumer behind the tail); else
        the consumer is handed to the long-poll."""
        consumer = _open(gateway, topic, name, caller, size, writes=commit_first, isolation=isolation)
        try:
            if commit_first:
                _store(consumer, None)
                headers[rest.COMMITTED_HEADER] = (consumer.committed or b"").hex()
            if 0 < consumer.buffered < size:  # read ahead for a smaller page: a full page if it is there
                consumer.read_ahead()
            got = consumer.poll_rows(size, 0.0, max_bytes=limit)  # (max_messages, wait)
        except BaseException:
            _put_back(gateway, topic, name, caller, consumer, False)
            raise
        return consumer, answer(consumer, got) if got or not wait else None

    await _settled(gateway, topic, name, caller)
    consumer, answered = await gateway.run(at_once)
    if answered is None:
        done = False
        try:
            got = await long_poll(request, gateway, functools.partial(consumer.poll_rows, size, max_bytes=limit), wait)
            done = got is not None
        finally:
            if not done:
                with anyio.CancelScope(shield=True):
                    await gateway.run(_put_back, gateway, topic, name, caller, consumer, False)
        if got is None:  # the client went away: nobody reads this, and the session resumes where its header says
            return client_gone(request)
        answered = await gateway.run(answer, consumer, got)
    data, headers[rest.CONSUMER_HEADER], sent = answered
    return _Page(data, media, headers, sent)


@endpoint(CONSUME)
async def commit(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    """``POST .../commit`` with the session's ``TMS-Consumer`` header: store the last message delivered
    to it (or the one ``{"id": "<base64>"}`` names, delivered already) as the committed mark."""
    name = _name(request)
    caller = _caller(request, required=True)
    body = await read_body(request, SMALL_BODY)
    await _settled(gateway, topic, name, caller)

    def work() -> Consumer:
        mark = rest.decode_commit(body)
        consumer = _open(gateway, topic, name, caller, 1, writes=True)
        done = False
        try:
            _store(consumer, mark)
            done = True
        finally:
            _put_back(gateway, topic, name, caller, consumer, done)
        return consumer

    return _session_response(caller, await gateway.run(work))


def _store(consumer: Consumer, mark: bytes | None) -> None:
    """Commit ``mark`` (None: the last message delivered) with the session's consumer: a compare-and-set
    under the lease, LeaseLost if it is gone; with nothing to store, refused all the same then."""
    before = consumer.committed
    consumer.commit(mark)
    if consumer.committed == before:
        consumer.confirm()


@endpoint(CONSUME)
async def open_consumer(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    """``POST .../consumer``: start a session now (409 SubscriptionBusy if another consumer holds it)."""
    name = _name(request)
    caller = _caller(request, required=False, new=True)

    def work() -> Consumer:
        consumer = _open(gateway, topic, name, caller, 1)
        _put_back(gateway, topic, name, caller, consumer, True)
        return consumer

    return _session_response(caller, await gateway.run(work))


@endpoint(CONSUME)
async def close_consumer(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    """``DELETE .../consumer`` with the session's header: give the lease back, so another consumer can
    start at once (from the committed mark; what was delivered and not committed comes again).

    ``DELETE .../consumer?force=true`` needs no header: it releases whichever session (or direct consumer)
    holds the subscription, which then gets LeaseLost; for a client that lost its session's header (a
    curl user who did not keep it), as ``reset``/``delete`` with ``force`` take a held subscription."""
    name = _name(request)
    if query_flag(request, "force") and not request.headers.get(rest.CONSUMER_HEADER):
        await gateway.run(_release, gateway, topic, name)
        return Response(status_code=200)
    caller = _caller(request, required=True, release=True)
    await _settled(gateway, topic, name, caller)
    await gateway.run(lambda: _open(gateway, topic, name, caller, 1).close())
    return Response(status_code=200)


def _release(gateway: Gateway, topic: TopicId, name: str) -> None:
    """Give back the subscription's lease, whoever holds it (its mark stays)."""
    holder = gateway.client.get_subscription(topic, name).owner
    if holder is not None:
        gateway.sessions.drop_owner(holder)  # a consumer this worker parked for that session: not taken up again
    gateway.client.release_subscription(topic, name)


@endpoint(None)
async def stats(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    """``GET .../topics/{t}/stats[?windows=60,300]``: MessagingClient.topic_stats (any action on the
    topic may read it)."""
    text = request.query_params.get("windows")
    try:
        windows = None if text is None else [int(w) for w in text.split(",")]
    except ValueError:
        raise InvalidArgument(f"query parameter windows={text!r}: expected seconds, comma-separated") from None
    return _json(rest.encode_stats(await gateway.run(lambda: gateway.client.topic_stats(topic, windows=windows))))


# -- sessions ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Caller:
    """A request's consumer session: the secret of its ``TMS-Consumer`` header, the library session it
    stands for (its lease owner is a hash of the secret and the principal) and whether it resumes one."""

    secret: str
    session: ConsumerSession
    resume: bool

    def token(self, consumer: Consumer) -> str:
        """The header value for the session's next call: the secret and the last message delivered."""
        delivered = consumer.delivered
        return f"{self.secret}~{'' if delivered is None else delivered.hex()}"


def _caller(request: Request, *, required: bool, new: bool = False, release: bool = False) -> _Caller:
    """The session of the request's ``TMS-Consumer`` header; without one (or with ``new``) a new one."""
    token = None if new else request.headers.get(rest.CONSUMER_HEADER)
    principal = request.state.principal
    if not token:
        if required:
            hint = " (or add ?force=true to release whichever session holds the subscription)" if release else ""
            raise InvalidArgument(f"this call needs the {rest.CONSUMER_HEADER} header of the session's last call{hint}")
        secret = secrets.token_urlsafe(18)
        return _Caller(secret, ConsumerSession(_owner(secret, principal), None), resume=False)
    secret, sep, delivered = token.rpartition("~")
    try:
        mark = bytes.fromhex(delivered) if delivered else None
    except ValueError:
        sep = ""
    if not sep or not secret:
        raise InvalidArgument(f"bad {rest.CONSUMER_HEADER} header: send it back as the gateway gave it")
    return _Caller(secret, ConsumerSession(_owner(secret, principal), mark), resume=True)


def _owner(secret: str, principal: str) -> str:
    digest = hashlib.sha256(f"{principal}\0{secret}".encode()).hexdigest()[:24]
    return f"gateway:{principal}:{digest}"


async def long_poll(
    request: Request, gateway: Gateway, take: Callable[[float], list[T]], wait: float
) -> list[T] | None:
    """What ``take(seconds)`` returns (it waits at most that long), tried in slices of at most SLICE
    seconds among the long-poll waits until it returns something or ``wait`` has passed, so a
    stopping worker answers; None as soon as the client disconnects (a slice running ends first, a
    wait for a long-poll slot at once), so a client that went away
    frees its slot. Exclusive pages and shared deliveries both wait this way."""

    async def slices() -> list[T]:
        deadline = time.monotonic() + wait
        while True:
            left = max(0.0, deadline - time.monotonic())
            got = await gateway.wait(take, min(left, SLICE))
            if got or left <= SLICE or gateway.stopping.is_set():
                return got

    gateway.metrics.long_polls.inc()
    waiting = asyncio.ensure_future(slices())
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((waiting, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        waiting.cancel()  # nothing if it is done
        await asyncio.wait((waiting, gone))
        gateway.metrics.long_polls.dec()
    return None if waiting.cancelled() else waiting.result()


async def _disconnected(request: Request) -> None:
    """Returns when the client closes the connection (the request has no body left to read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _key(topic: TopicId, name: str, caller: _Caller) -> Key:
    return topic, name, caller.session.owner


async def _settled(gateway: Gateway, topic: TopicId, name: str, caller: _Caller) -> None:
    """Wait for the session's read-ahead, if one runs, so that the call takes its consumer up."""
    if caller.resume:
        await gateway.sessions.settle(_key(topic, name, caller))


def _open(
    gateway: Gateway,
    topic: TopicId,
    name: str,
    caller: _Caller,
    batch: int,
    *,
    writes: bool = False,
    isolation: str | None = None,
) -> Consumer:
    """The session's library consumer, reading ``batch`` messages at a time: the one this worker parked
    after the session's last call if it can be taken up (:mod:`.sessions`; ``writes``: the call writes
    under the lease, whose compare-and-set fails if it is gone, so taking it up needs no read) and reads
    with ``isolation`` (None: any), else opened from HBase (a detached consumer's read-ahead is read again)."""
    if caller.resume:
        consumer = gateway.sessions.take(_key(topic, name, caller), caller.session.delivered, confirm=not writes)
        if consumer is not None and isolation not in (None, consumer.isolation):
            consumer.detach()  # its read-ahead was read with the other isolation: resume from HBase
            consumer = None
        if consumer is not None:
            consumer.batch = batch
            return consumer
    try:
        return gateway.client.consumer(
            topic,
            name,
            max_wait_seconds=0.0,
            lease_seconds=lease_length(gateway.settings.consumer_lease),
            batch=batch,
            session=caller.session if caller.resume else None,
            owner=None if caller.resume else caller.session.owner,
            rows=True,
            isolation=isolation or COMMITTED,
        )
    except SubscriptionBusy as busy:
        if caller.resume:
            raise
        raise SubscriptionBusy(  # a new session: say how to go on, for a client that lost its header
            f"{busy}; to go on with your own session, send the {rest.CONSUMER_HEADER} header its last answer "
            f"carried; to release the subscription from whoever holds it, DELETE .../subscriptions/{name}/"
            "consumer?force=true"
        ) from None


def _put_back(gateway: Gateway, topic: TopicId, name: str, caller: _Caller, consumer: Consumer, keep: bool) -> None:
    """After a call: park the consumer for the session's next call (``keep``), else detach it (the lease
    stays in HBase; a call that failed leaves nothing behind in this worker)."""
    if keep:
        gateway.sessions.park(_key(topic, name, caller), consumer)
    else:
        consumer.detach()


class _Page(Response):
    """A page of a session's messages; once it is sent (or sending failed) ``sent`` starts reading the
    session's next batch ahead."""

    def __init__(self, data: bytes, media: str, headers: dict[str, str], sent: Callable[[], None] | None) -> None:
        super().__init__(data, 200, media_type=media, headers=headers)
        self.sent = sent

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.sent is not None:
                self.sent()


def _session_response(caller: _Caller, consumer: Consumer) -> Response:
    token = caller.token(consumer)
    body = rest.encode_committed(token, consumer.committed)
    return Response(body, 200, media_type=rest.JSON, headers={rest.CONSUMER_HEADER: token})


def _name(request: Request) -> str:
    return check_name(request.path_params["subscription"])


def _json(data: bytes) -> Response:
    return Response(data, 200, media_type=rest.JSON)


MESSAGE_ROUTES = [  # matched first, as routes.MESSAGE_ROUTES
    Route(SUBSCRIPTION + "/messages", messages, methods=["GET"]),
    Route(SUBSCRIPTION + "/commit", commit, methods=["POST"]),
]
ROUTES = [
    Route(TOPIC + "/stats", stats, methods=["GET"]),
    Route(SUBSCRIPTIONS, list_subscriptions, methods=["GET"]),
    Route(SUBSCRIPTION, get_subscription, methods=["GET"]),
    Route(SUBSCRIPTION, create_subscription, methods=["PUT"]),
    Route(SUBSCRIPTION, delete_subscription, methods=["DELETE"]),
    Route(SUBSCRIPTION + "/reset", reset_subscription, methods=["POST"]),
    Route(SUBSCRIPTION + "/consumer", open_consumer, methods=["POST"]),
    Route(SUBSCRIPTION + "/consumer", close_consumer, methods=["DELETE"]),
]
