"""The endpoints: CDAP's messaging REST API under ``/v1/namespaces/{namespace}``, plus ``/health`` and ``/metrics``.

Every ``/v1`` endpoint is wrapped by :func:`endpoint`, which authenticates the caller, checks the names
and the action against the rules, and turns any TmsError into its one-line response. Bodies are decoded,
the library is called and responses encoded in one library call on the worker's event loop
(:meth:`Gateway.run`: at most ``threads`` at once, each run to its end even if its request is cancelled).
Extensions to CDAP's API are query parameters, so its bodies stay exactly as specified:
``publish?ttl=SECONDS`` (per-message TTL), ``store?sequence=N`` (deterministic payload keys) and
``poll?publishTime=true`` (Avro responses with publish times).

The consumer's subscription calls and the topic's stats are in :mod:`gateway.consuming`, wrapped with
the same :func:`endpoint`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from itertools import islice

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tms_hbase import TopicId, TopicMetadata
from tms_hbase.errors import InvalidArgument, TmsError
from tms_hbase.model.published import PublishResult
from tms_hbase.rest import codec as rest
from tms_hbase.tx import TransactionCodec

from .auth import ADMIN, CONSUME, PUBLISH
from .bodies import query_flag, query_number, read_body
from .errors import client_gone, error_response
from .service import Gateway

TOPICS = rest.BASE + "/topics"
TOPIC = TOPICS + "/{topic}"
Handler = Callable[[Request, Gateway, TopicId], Awaitable[Response]]


def endpoint(action: str | None) -> Callable[[Handler], Callable[[Request], Awaitable[Response]]]:
    """Authenticate (401), check the names (400) and ``action`` on the path's topic (403; None: any
    action), then run the handler; a TmsError from any step becomes its response, a client that went
    away while its body was read is :func:`~.errors.client_gone`."""

    def wrap(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        @functools.wraps(handler)
        async def run(request: Request) -> Response:
            gateway: Gateway = request.app.state.gateway
            try:
                principal = _authenticate(request, gateway)
                topic = TopicId(request.path_params["namespace"], request.path_params["topic"])
                gateway.guard.check(principal, topic.namespace, topic.topic, action)
                return await handler(request, gateway, topic)
            except TmsError as error:
                return error_response(request, error)
            except ClientDisconnect:
                return client_gone(request)

        return run

    return wrap


def _authenticate(request: Request, gateway: Gateway) -> str:
    """The caller's principal (NotAuthenticated: 401), noted for the access log."""
    principal = gateway.guard.principal(request.headers.get("authorization"))
    request.state.principal = principal
    return principal


# -- topics --------------------------------------------------------------------------------------


@endpoint(ADMIN)
async def create_topic(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    body = await read_body(request, gateway.max_body_bytes)

    def work() -> TopicMetadata:
        properties = rest.decode_properties(body)
        gateway.client.admin.require_installation()  # 503 on a prefix without one: the gateway never creates tables
        return gateway.client.create_topic(topic, properties)

    return _json(rest.encode_topic(await gateway.run(work)))


@endpoint(ADMIN)
async def update_topic(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    body = await read_body(request, gateway.max_body_bytes)
    meta = await gateway.run(lambda: gateway.client.update_topic(topic, rest.decode_properties(body)))
    return _json(rest.encode_topic(meta))


@endpoint(None)
async def get_topic(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    return _json(rest.encode_topic(await gateway.run(gateway.client.get_topic, topic)))


@endpoint(ADMIN)
async def delete_topic(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    await gateway.run(gateway.client.delete_topic, topic)
    return Response(status_code=200)


async def list_topics(request: Request) -> Response:
    """The namespace's topics the caller has any action on (all of them without rules)."""
    gateway: Gateway = request.app.state.gateway
    try:
        principal = _authenticate(request, gateway)
        namespace = TopicId(request.path_params["namespace"], "x").namespace  # checks the name
        gateway.guard.check_namespace(principal, namespace)
        topics = await gateway.run(gateway.client.list_topics, namespace)
    except TmsError as error:
        return error_response(request, error)
    visible = [t for t in topics if gateway.guard.allows(principal, t.namespace, t.topic, None)]
    return _json(rest.encode_names(visible))


# -- messages ------------------------------------------------------------------------------------


@endpoint(PUBLISH)
async def store(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    sequence = query_number(request, "sequence", int)
    media = rest.media_type(request.headers.get("content-type"))
    body = await read_body(request, gateway.max_body_bytes)

    def work() -> int:
        publish = rest.decode_publish(body, media)
        if publish.transaction_write_pointer is None:
            raise InvalidArgument("a store request needs its transactionWritePointer")
        gateway.client.store(topic, publish.messages, publish.transaction_write_pointer, sequence=sequence)
        return len(publish.messages)

    gateway.metrics.counted("store", await gateway.run(work))
    return Response(status_code=200)


@endpoint(PUBLISH)
async def publish(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    ttl = query_number(request, "ttl", float)
    media = rest.media_type(request.headers.get("content-type"))
    body = await read_body(request, gateway.max_body_bytes)

    def work() -> PublishResult:
        publish = rest.decode_publish(body, media)
        return gateway.client.publish(topic, publish.messages, publish.transaction_write_pointer, ttl_seconds=ttl)

    result = await gateway.run(work)
    gateway.metrics.counted("publish", result.count)
    # CDAP's API: empty for a non-transactional publish, else the opaque handle rollback takes as is; where
    # the batch went is a header, so CDAP's clients read the body they expect
    handle = b"" if result.rollback is None else bytes(result.rollback)
    headers = {rest.PUBLISHED_HEADER: rest.encode_published(result.generation, result.position)}
    return Response(handle, 200, headers=headers, media_type=rest.OCTETS if handle else None)


@endpoint(PUBLISH)
async def rollback(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    body = await read_body(request, gateway.max_body_bytes)  # the publish response as is, any Content-Type
    await gateway.run(gateway.client.rollback, topic, body)
    return Response(status_code=200)


@endpoint(CONSUME)
async def poll(request: Request, gateway: Gateway, topic: TopicId) -> Response:
    """Messages from ``startFrom``, at most ``limit`` and the gateway's caps; with a transaction, up to the
    first message of a transaction it cannot see yet (the library stops there, keeping order)."""
    with_time = query_flag(request, "publishTime")
    media = rest.media_type(request.headers.get("content-type"))
    body = await read_body(request, gateway.max_body_bytes)
    cap, max_bytes = gateway.settings.max_poll_messages, gateway.settings.max_poll_bytes

    def work() -> tuple[int, bytes]:
        consume = rest.decode_consume(body, media)
        start = consume.start_from
        tx = None if consume.transaction is None else TransactionCodec.decode(consume.transaction)
        limit = cap if consume.limit is None or consume.limit > cap else consume.limit  # <= 0: the library refuses
        messages = gateway.client.fetch(
            topic,
            start_message=start if isinstance(start, bytes) else None,
            start_time_ms=start if isinstance(start, int) else None,
            inclusive=consume.inclusive,
            limit=limit,
            transaction=tx,
        )
        page, size = [], 0
        for message in islice(messages, limit):
            page.append(message)
            size += len(message.id) + len(message.payload)
            if size >= max_bytes:
                break
        return len(page), rest.encode_messages(page, media, publish_time=with_time)

    count, data = await gateway.run(work)
    gateway.metrics.counted("poll", count)
    return Response(data, 200, media_type=media)


# -- operations ----------------------------------------------------------------------------------


async def health(request: Request) -> Response:
    """200 with a small JSON report once HBase answers; 503 otherwise."""
    gateway: Gateway = request.app.state.gateway
    try:
        await gateway.ping()
    except TmsError as error:
        return error_response(request, error)
    return JSONResponse({"status": "ok", "hbase": gateway.settings.thrift, "worker": os.getpid()})


async def metrics(request: Request) -> Response:
    data, content_type = request.app.state.gateway.metrics.render()
    return PlainTextResponse(data, headers={"Content-Type": content_type})


def _json(data: bytes) -> Response:
    return Response(data, 200, media_type=rest.JSON)


# The calls that carry messages are matched first: Starlette tries the routes in order, a regular
# expression each, and these are nearly all the traffic.
MESSAGE_ROUTES = [
    Route(TOPIC + "/publish", publish, methods=["POST"]),
    Route(TOPIC + "/poll", poll, methods=["POST"]),
    Route(TOPIC + "/store", store, methods=["POST"]),
    Route(TOPIC + "/rollback", rollback, methods=["POST"]),
]
ROUTES = [
    Route("/health", health, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
    Route(TOPICS, list_topics, methods=["GET"]),
    Route(TOPIC, get_topic, methods=["GET"]),
    Route(TOPIC, create_topic, methods=["PUT"]),
    Route(TOPIC, delete_topic, methods=["DELETE"]),
    Route(TOPIC + "/properties", update_topic, methods=["PUT"]),
]
