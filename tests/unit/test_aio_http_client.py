"""AsyncGatewayClient's HTTP layer against the small misbehaving servers of ``test_http_client.py`` (real
sockets on loopback): the same errors as the blocking client for a refused connection, a lost answer,
every garbage answer and error answers; the same framings read; deadlines against hung and trickling
servers; connections the server closed are not reused for a publish; bad arguments fail before any
request."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest

from tms_hbase.errors import (
    BatchTooLarge,
    HBaseUnavailable,
    InvalidArgument,
    NotAuthenticated,
    PublishOutcomeUnknown,
    TmsError,
    TopicAlreadyExists,
    TopicNotFound,
)
from tms_hbase.gateway_client.aio import AsyncGatewayClient

from . import test_http_client
from .test_http_client import (
    FRAMINGS,
    GARBAGE,
    PUBLISHED,
    TOPIC_JSON,
    T,
    after_one_answer,
    answer,
    hang_then_answer,
    read_request,
    respond,
    trickle_then_answer,
)

serve = test_http_client.serve  # the fixture of small loopback servers, shared


def run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(main(), debug=True)


async def opened(call: Callable[[], Awaitable[object]]) -> None:
    """:func:`test_http_client.opened` for asyncio: await ``call`` until it succeeds."""
    deadline = time.monotonic() + 120
    while True:
        try:
            await call()
            return
        except HBaseUnavailable:
            if time.monotonic() > deadline:
                raise


def test_a_hung_server_is_a_timeout_within_the_deadline(serve: Callable) -> None:
    server = serve(after_one_answer(lambda conn: hang_then_answer(conn, server.stop)))  # then a topic, LIVENESS s later

    async def main() -> None:
        async with AsyncGatewayClient(server.url, timeout_seconds=1.0) as client:
            await opened(lambda: client.get_topic(T))
            with pytest.raises(HBaseUnavailable, match=r"did not answer within 1\.0s") as caught:
                await client.get_topic(T)
            assert caught.value.timed_out

    run(main)


def test_a_trickling_server_cannot_stretch_a_call(serve: Callable) -> None:
    published = b"HTTP/1.1 200 OK\r\nTMS-Published: 1:42\r\nContent-Length: 0\r\n\r\n"  # after LIVENESS seconds
    server = serve(after_one_answer(lambda conn: trickle_then_answer(conn, server.stop, published)))

    async def main() -> None:
        async with AsyncGatewayClient(server.url, timeout_seconds=1.5) as client:
            await opened(lambda: client.get_topic(T))
            with pytest.raises(PublishOutcomeUnknown) as caught:
                await client.publish(T, [b"x"])
            assert caught.value.timed_out

    run(main)


def test_a_refused_connection_is_unavailable_not_an_unknown_outcome() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"

    async def main() -> None:
        async with AsyncGatewayClient(url, timeout_seconds=5) as client:
            with pytest.raises(HBaseUnavailable, match="cannot reach") as caught:
                await client.publish(T, [b"x"])  # nothing was sent, so nothing can have been stored
            assert not isinstance(caught.value, PublishOutcomeUnknown)

    run(main)


def test_a_publish_without_an_answer_has_an_unknown_outcome(serve: Callable) -> None:
    server = serve(lambda conn: read_request(conn))  # reads the publish, closes without answering

    async def main() -> None:
        async with AsyncGatewayClient(server.url, timeout_seconds=5) as client:
            with pytest.raises(PublishOutcomeUnknown, match="may or may not"):
                await client.publish(T, [b"x"])

    run(main)


def test_a_read_is_sent_again_once_on_a_kept_alive_connection_closed_unanswered(serve: Callable) -> None:
    def handler(conn: socket.socket) -> None:  # answers a connection's first request, closes at its second
        read_request(conn)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        conn.sendall(head % len(TOPIC_JSON) + TOPIC_JSON + b"")
        read_request(conn)

    server = serve(handler)

    async def main() -> None:
        async with AsyncGatewayClient(server.url, timeout_seconds=5) as client:
            await client.get_topic(T)
            await client.get_topic(T)  # lost on the kept-alive connection: sent again on a new one
            assert server.connections == 2
            with pytest.raises(PublishOutcomeUnknown):  # never sent twice: its outcome is unknown
                await client.publish(T, [b"x"])
            assert server.connections == 2

    run(main)


def test_a_connection_the_server_closed_is_not_reused_for_a_publish(serve: Callable) -> None:
    server = serve(respond("200 OK", PUBLISHED, close=True))

    async def main() -> None:
        async with AsyncGatewayClient(server.url, timeout_seconds=10) as client:
            for count, payload in enumerate([b"one", b"two", b"three"], 1):
                assert (await client.publish(T, [payload])).position == 42
                await asyncio.to_thread(server.wait_closed, count)

    run(main)
    assert server.connections == 3


def test_a_kept_alive_connection_is_reused(serve: Callable) -> None:
    server = serve(respond("200 OK", PUBLISHED))

    async def main() -> None:
        async with AsyncGatewayClient(server.url, timeout_seconds=10) as client:
            for _ in range(5):
                assert (await client.publish(T, [b"x"])).position == 42

    run(main)
    assert server.connections == 1


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        ("409 Conflict", {"TMS-Error": "TopicAlreadyExists"}, TopicAlreadyExists),
        ("413 Payload Too Large", {"TMS-Error": "BatchTooLarge"}, BatchTooLarge),
        ("401 Unauthorized", {"TMS-Error": "NotAuthenticated"}, NotAuthenticated),
        ("404 Not Found", {}, TopicNotFound),
        ("503 Service Unavailable", {}, HBaseUnavailable),
        ("502 Bad Gateway", {}, TmsError),
    ],
)
def test_errors_map_back_to_the_library_classes(serve: Callable, status: str, headers: dict, expected: type) -> None:
    server = serve(respond(status, headers, b"what went wrong\n"))

    async def main() -> None:
        async with AsyncGatewayClient(server.url, timeout_seconds=10) as client:
            with pytest.raises(expected) as caught:
                await client.publish(T, [b"x"])
            assert type(caught.value) is expected
            if expected is TopicNotFound:
                assert caught.value.topic == T

    run(main)


@pytest.mark.parametrize(("raw", "reason"), GARBAGE)
def test_a_garbage_answer_is_a_clear_error(serve: Callable, raw: bytes, reason: str) -> None:
    server = serve(answer(raw))

    async def main() -> None:
        async with AsyncGatewayClient(server.url, timeout_seconds=5) as client:
            with pytest.raises(HBaseUnavailable, match=f"ProtocolError: .*{reason}") as caught:
                await client.get_topic(T)
            assert not caught.value.timed_out
            with pytest.raises(PublishOutcomeUnknown, match=reason):  # the publish may have been carried out
                await client.publish(T, [b"x"])

    run(main)


@pytest.mark.parametrize("raw", FRAMINGS)
def test_answers_in_any_framing_are_read(serve: Callable, raw: bytes) -> None:
    server = serve(answer(raw))

    async def main() -> None:
        async with AsyncGatewayClient(server.url, timeout_seconds=5) as client:
            assert (await client.get_topic(T)).topic == T

    run(main)


def test_a_publish_answer_without_where_it_went_is_an_error(serve: Callable) -> None:
    server = serve(respond("200 OK", {"TMS-Published": "1:x"}))

    async def main() -> None:
        async with AsyncGatewayClient(server.url, timeout_seconds=10) as client:
            with pytest.raises(InvalidArgument, match="TMS-Published"):
                await client.publish(T, [b"x"])

    run(main)


def test_bad_arguments_raise_before_any_request(serve: Callable) -> None:
    server = serve(respond("200 OK"))

    async def main() -> None:
        async with AsyncGatewayClient(server.url, timeout_seconds=10) as client:
            for call in (
                lambda: client.publish(T, "not a list"),  # type: ignore[arg-type]
                lambda: client.publish(T, [b"x"], resume=object()),  # type: ignore[arg-type]
                lambda: client.fetch(T, start_message=b"x", start_time_ms=1),
                lambda: client.fetch(T, limit=0),
                lambda: client.list_topics(),
                lambda: client.update_topic(T, {}, expected=object()),  # type: ignore[arg-type]
                lambda: client.rollback(T, "text"),  # type: ignore[arg-type]
                lambda: client.consumer(T, "svc", max_wait_seconds=-1),
                lambda: client.shared_consumer(T, "svc", owner="has space"),
            ):
                with pytest.raises(ValueError):
                    result = call()
                    if asyncio.iscoroutine(result):
                        await result

    run(main)
    assert server.connections == 0
    with pytest.raises(ValueError, match="bad gateway URL"):
        AsyncGatewayClient("ftp://host")
    with pytest.raises(InvalidArgument, match="control character"):
        AsyncGatewayClient("http://127.0.0.1:1", token="secret\r\nX-Admin: yes")
