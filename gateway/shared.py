"""Shared subscriptions over HTTP (docs/gateway.md, "Shared subscriptions"): fetch a batch of deliveries
(a long-poll), then ack, nack, release or extend them by message id (and the delivery's incarnation,
which fences a settlement of a delivery that ended), and list what is in flight.

**Sessions.** The library's shared consumer settles a delivery only for the consumer that holds it, by
its ``owner`` name (docs/shared.md). Over HTTP that name is a session's: the first ``deliveries`` call
without a ``TMS-Consumer`` header gets a new secret in that header, and the owner is a hash of the
secret and the caller's principal (as for exclusive sessions, so the owner shown by ``pending`` cannot
be used to settle another's deliveries, and a secret presented by another principal names another
owner). Any worker serves any call of a session: the state is in HBase. Each worker keeps the library
consumer of a session between its calls (:class:`gateway.sessions.SharedSessions`), only to save re-reading the
subscription's settings and rescanning its claims; nothing is held in it that HBase does not hold.

A delivery the gateway took for a long-poll whose client went away is not answered; it is delivered
again after its deadline (counted), as for a consumer that crashed.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tms_hbase import TopicId
from tms_hbase.errors import InvalidArgument, NotHeld
from tms_hbase.model.isolation import COMMITTED, check_isolation
from tms_hbase.model.message import DeliveryRef
from tms_hbase.rest import codec as rest
from tms_hbase.rest import shared as rest_shared
from tms_hbase.shared import SharedConsumer

from .auth import CONSUME
from .bodies import query_number, read_body
from .consuming import SUBSCRIPTION, _name, _owner, long_poll
from .errors import client_gone
from .routes import endpoint
from .service import Gateway

DEFAULT_MAX = 10  # deliveries per call without ?max= (as SharedConsumer.receive)
SETTLE_BODY = 1024 * 1024  # the ids of one settle call
MAX_SECRET = 128


def _session(request: Request, *, required: bool) -> tuple[str, str]:
    """The session's secret (a new one when the request has none and may start one) and its owner."""
    secret = request.headers.get(rest.CONSUMER_HEADER)
    if not secret:
        if required:
            raise InvalidArgument(
                f"this call needs the {rest.CONSUMER_HEADER} header the deliveries came with: only the "
                "session that holds a delivery may settle it"
            )
        secret = secrets.token_urlsafe(18)
    elif len(secret) > MAX_SECRET or not secret.isprintable() or " " in secret:
        raise InvalidArgument(f"bad {rest.CONSUMER_HEADER} header: send it back as the gateway gave it")
    return secret, _owner(secret, request.state.principal)


@endpoint(CONSUME)
async def deliveries(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    """``GET .../subscriptions/{s}/deliveries?wait=S&max=N``: up to N deliveries (redeliveries first), as
    soon as there is one, else ``[]`` after S seconds; each held by the session until its deadline.
    ``?isolation=uncommitted``: every message as stored, rolled-back ones included (default ``committed``)."""
    name = _name(request)
    isolation = check_isolation(request.query_params.get("isolation", COMMITTED))
    wait = query_number(request, "wait", float) or 0.0
    if not wait >= 0:
        raise InvalidArgument(f"query parameter wait={wait!r}: expected seconds >= 0")
    count = query_number(request, "max", int)
    count = DEFAULT_MAX if count is None else count
    if count <= 0:
        raise InvalidArgument(f"query parameter max={count}: expected a positive integer")
    count = min(count, gateway.settings.max_poll_messages)
    media = rest.accepted_media(request.headers.get("accept"), request.headers.get("content-type"))
    secret, owner = _session(request, required=False)
    key, cache = (topic, name, owner), gateway.shared_sessions
    consumer = await gateway.run(cache.take, key, isolation)
    try:
        got = await long_poll(
            request, gateway, functools.partial(consumer.receive, count), min(wait, gateway.settings.max_wait)
        )
    finally:
        cache.park(key, consumer, isolation)
    if got is None:
        return client_gone(request)
    data = await gateway.run(rest_shared.encode_deliveries, got, media)
    gateway.metrics.counted("consume", len(got))
    return Response(data, 200, media_type=media, headers={rest.CONSUMER_HEADER: secret})


Settle = Callable[[SharedConsumer, list[DeliveryRef], float | None], list[int]]


def _ack(consumer: SharedConsumer, refs: list[DeliveryRef], seconds: float | None) -> list[int]:
    if seconds is not None:
        raise InvalidArgument("an ack takes no seconds")
    consumer.ack(*refs)
    return []


def _each(step: Callable[[SharedConsumer, DeliveryRef, float | None], int | None]) -> Settle:
    """Apply a one-message step to each delivery (all checked first); NotHeld at the end lists those it
    failed for, as ``ack`` does."""

    def settle(consumer: SharedConsumer, refs: list[DeliveryRef], seconds: float | None) -> list[int]:
        checked, out, failed = consumer.refs_of(refs), [], []
        for ref in checked:
            try:
                result = step(consumer, ref, seconds)
            except NotHeld as exc:
                failed.append(str(exc))
                continue
            if result is not None:
                out.append(result)
        if failed:
            raise NotHeld("; ".join(failed))
        return out

    return settle


def _release(consumer: SharedConsumer, ref: DeliveryRef, seconds: float | None) -> None:
    if seconds is not None:
        raise InvalidArgument("a release takes no seconds (a nack does)")
    consumer.release(ref)


SETTLE: dict[str, Settle] = {
    "ack": _ack,
    "nack": _each(lambda c, i, s: c.nack(i, 0.0 if s is None else s)),
    "release": _each(_release),
    "extend": _each(lambda c, i, s: c.extend(i, s)),
}


def _settler(action: str) -> Callable[[Request], object]:
    settle = SETTLE[action]

    @endpoint(CONSUME)
    async def handler(request: Request, gateway: Gateway, topic: TopicId) -> Response:
        name = _name(request)
        media = rest.media_type(request.headers.get("content-type"))
        secret, owner = _session(request, required=True)
        body = await read_body(request, SETTLE_BODY)
        key, cache = (topic, name, owner), gateway.shared_sessions

        def work() -> bytes:
            settling = rest_shared.decode_settle(body, media)
            consumer = cache.take(key)
            try:
                deadlines = settle(consumer, settling.refs, settling.seconds)
            finally:
                cache.park(key, consumer)
            return rest_shared.encode_deadlines(deadlines, media) if action == "extend" else b""

        data = await gateway.run(work)
        headers = {rest.CONSUMER_HEADER: secret}
        return Response(data, 200, media_type=media if data else None, headers=headers)

    handler.__name__ = handler.__qualname__ = f"shared_{action}"
    return handler


@endpoint(CONSUME)
async def pending(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    """``GET .../subscriptions/{s}/pending[?limit=N]``: the deliveries not settled (MessagingClient.pending)."""
    name, limit = _name(request), query_number(request, "limit", int)
    data = await gateway.run(lambda: rest_shared.encode_pending(gateway.client.pending(topic, name, limit=limit)))
    return Response(data, 200, media_type=rest.JSON)


MESSAGE_ROUTES = [  # matched first, with the other message routes
    Route(SUBSCRIPTION + "/deliveries", deliveries, methods=["GET"]),
    *(Route(f"{SUBSCRIPTION}/{action}", _settler(action), methods=["POST"]) for action in SETTLE),
]
ROUTES = [Route(SUBSCRIPTION + "/pending", pending, methods=["GET"])]
