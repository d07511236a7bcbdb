"""GatewayClient's HTTP layer against small misbehaving servers on loopback (real sockets): a hung server
and a trickling one stay within the whole-call deadline, a keep-alive connection the server closed is not
reused for a publish, and errors map back to the library's classes by header or status."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tms_hbase import TopicId
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
from tms_hbase.gateway_client import http1
from tms_hbase.gateway_client.http import GatewayClient

from ..waiting import wait_for

T = TopicId("ns", "t")


class Server:
    """Runs ``handler(connection)`` for every connection to a loopback port, each in a thread."""

    def __init__(self, handler: Callable[[socket.socket], None]) -> None:
        self.handler = handler
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = self.closed = 0
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            self.handler(conn)
        self.closed += 1

    def wait_closed(self, count: int, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while self.closed < count:
            assert time.monotonic() < deadline, "the server did not close the connection"
            time.sleep(0.01)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[socket.socket], None]], Server]]:
    servers: list[Server] = []

    def start(handler: Callable[[socket.socket], None]) -> Server:
        servers.append(Server(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def read_request(conn: socket.socket) -> bytes:
    """One request (head and Content-Length body); b"" if the client closed the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lengths = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    length = lengths[0] if lengths else 0
    while len(body) < length:
        body += conn.recv(65536)
    return head


PUBLISHED = {"TMS-Published": "1:42"}  # where the gateway says a publish went


def test_a_publish_answer_without_where_it_went_is_an_error(serve: Callable) -> None:
    server = serve(respond("200 OK", {"TMS-Published": "1:x"}))
    with GatewayClient(server.url, timeout_seconds=10) as client, pytest.raises(InvalidArgument, match="TMS-Published"):
        client.publish(T, [b"x"])


def respond(status: str, headers: dict[str, str] | None = None, body: bytes = b"", close: bool = False):
    """A handler answering every request on a connection the same way (then closing it, if ``close``)."""

    def handler(conn: socket.socket) -> None:
        while read_request(conn):
            lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}"]
            lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
            conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            if close:  # without "Connection: close": the client believes it may reuse the connection
                return

    return handler


TOPIC_JSON = b'{"name":"t","properties":{},"generation":1}'


# A misbehaving server below keeps it up this long, then answers properly: a client that waited for that
# answer instead of cutting the call at its own deadline gets a topic, not an error (the test fails at any load).
LIVENESS = 120.0
TOPIC_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(TOPIC_JSON) + TOPIC_JSON


def hang_then_answer(conn: socket.socket, stop: threading.Event) -> None:
    """Read a request, say nothing for LIVENESS seconds, then answer a topic."""
    read_request(conn)
    if not stop.wait(LIVENESS):
        conn.sendall(TOPIC_ANSWER)


def after_one_answer(handler: Callable[[socket.socket], None]) -> Callable[[socket.socket], None]:
    """A handler that answers a connection's first request with a topic, then hands the kept-alive connection
    to ``handler``: its fault hits a call whose connection is open, not one still connecting (on a loaded
    machine, connecting alone may outlast a short timeout)."""

    def run(conn: socket.socket) -> None:
        if read_request(conn):
            conn.sendall(TOPIC_ANSWER)
            handler(conn)

    return run


def opened(call: Callable[[], object]) -> None:
    """Make ``call`` until it succeeds: the call that opens a connection to an :func:`after_one_answer`
    server (one timed out on a loaded machine drops its connection; the next opens another)."""
    wait_for(lambda: call() or True, "a call that opens the connection", 120, ignore=(HBaseUnavailable,))


def trickle_then_answer(
    conn: socket.socket, stop: threading.Event, answer: bytes = TOPIC_ANSWER, arrived: threading.Semaphore | None = None
) -> None:
    """Read a request (then release ``arrived``) and send ``answer``, its status line followed by a padding
    header of blanks, one every 0.2 s for LIVENESS seconds: every read succeeds well within any per-read timeout."""
    read_request(conn)
    if arrived is not None:
        arrived.release()
    status, _, rest = answer.partition(b"\r\n")
    conn.sendall(status + b"\r\nX-Padding: ")
    for _ in range(int(LIVENESS / 0.2)):
        if stop.wait(0.2):
            return
        conn.sendall(b" ")
    conn.sendall(b"\r\n" + rest)


def test_a_hung_server_is_a_timeout_within_the_deadline(serve: Callable) -> None:
    server = serve(after_one_answer(lambda conn: hang_then_answer(conn, server.stop)))
    with GatewayClient(server.url, timeout_seconds=1.0) as client:
        opened(lambda: client.get_topic(T))
        with pytest.raises(HBaseUnavailable, match=r"did not answer within 1\.0s") as caught:
            client.get_topic(T)
    assert caught.value.timed_out


def test_a_short_deadline_is_kept_while_a_longer_call_is_in_flight(serve: Callable) -> None:
    """The deadline thread is woken only for a call due before every other one: a trickling answer to a
    short call must still be cut at its own deadline, not at the long call's (an hour away)."""
    arrived = threading.Semaphore(0)

    def slow_call(client: GatewayClient) -> None:
        with contextlib.suppress(TmsError):
            client.get_topic(T)

    server = serve(lambda conn: trickle_then_answer(conn, server.stop, arrived=arrived))
    with (
        GatewayClient(server.url, timeout_seconds=3600.0) as slow,
        GatewayClient(server.url, timeout_seconds=1.0) as fast,
    ):
        threading.Thread(target=slow_call, args=(slow,), daemon=True).start()
        assert arrived.acquire(timeout=60), "the long call did not reach the server"
        with pytest.raises(HBaseUnavailable) as caught:
            fast.get_topic(T)
        assert caught.value.timed_out


def test_a_refused_connection_is_unavailable_not_an_unknown_outcome() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    with (
        GatewayClient(url, timeout_seconds=5) as client,
        pytest.raises(HBaseUnavailable, match="cannot reach") as caught,
    ):
        client.publish(T, [b"x"])  # nothing was sent, so nothing can have been stored
    assert not isinstance(caught.value, PublishOutcomeUnknown)


def test_a_publish_without_an_answer_has_an_unknown_outcome(serve: Callable) -> None:
    server = serve(lambda conn: read_request(conn))  # reads the publish, closes without answering
    with (
        GatewayClient(server.url, timeout_seconds=5) as client,
        pytest.raises(PublishOutcomeUnknown, match="may or may not"),
    ):
        client.publish(T, [b"x"])


def test_a_trickling_server_cannot_stretch_a_call(serve: Callable) -> None:
    server = serve(after_one_answer(lambda conn: trickle_then_answer(conn, server.stop)))
    with GatewayClient(server.url, timeout_seconds=1.5) as client:
        opened(lambda: client.get_topic(T))
        with pytest.raises(HBaseUnavailable, match=r"did not answer within 1\.5s") as caught:
            client.get_topic(T)
    assert caught.value.timed_out


def test_a_connection_the_server_closed_is_not_reused(serve: Callable) -> None:
    server = serve(respond("200 OK", PUBLISHED, close=True))
    with GatewayClient(server.url, timeout_seconds=10) as client:
        for count, payload in enumerate([b"one", b"two", b"three"], 1):
            client.publish(T, [payload])
            # The server closes each connection after answering. The next publish must not be sent on
            # it (losing its answer would make the outcome unknown) but on a new connection.
            server.wait_closed(count)
    assert server.connections == 3


def test_a_kept_alive_connection_is_reused(serve: Callable) -> None:
    server = serve(respond("200 OK", PUBLISHED))
    with GatewayClient(server.url, timeout_seconds=10) as client:
        for _ in range(5):
            assert client.publish(T, [b"x"]).position == 42
    assert server.connections == 1


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        ("409 Conflict", {"TMS-Error": "TopicAlreadyExists"}, TopicAlreadyExists),
        ("413 Payload Too Large", {"TMS-Error": "BatchTooLarge"}, BatchTooLarge),
        ("401 Unauthorized", {"TMS-Error": "NotAuthenticated"}, NotAuthenticated),
        ("404 Not Found", {}, TopicNotFound),  # no header (a proxy's answer): by status
        ("503 Service Unavailable", {}, HBaseUnavailable),
        ("502 Bad Gateway", {}, TmsError),
        ("400 Bad Request", {"TMS-Error": "SomethingElse"}, ValueError),  # unknown names: by status
    ],
)
def test_errors_map_back_to_the_library_classes(serve: Callable, status: str, headers: dict, expected: type) -> None:
    server = serve(respond(status, headers, b"what went wrong\n"))
    with GatewayClient(server.url, timeout_seconds=10) as client, pytest.raises(expected) as caught:
        client.publish(T, [b"x"])
    if expected is TopicNotFound:
        assert caught.value.topic == T
    elif expected not in (TopicAlreadyExists,):
        assert "what went wrong" in str(caught.value)


def test_bad_arguments_raise_before_any_request(serve: Callable) -> None:
    server = serve(respond("200 OK"))
    with GatewayClient(server.url, timeout_seconds=10) as client:
        for call in (
            lambda: client.publish(T, "not a list"),
            lambda: client.publish(T, [b"x"], resume=object()),
            lambda: client.fetch(T, start_message=b"x", start_time_ms=1),
            lambda: client.fetch(T, limit=0),
            lambda: client.list_topics(),
            lambda: client.update_topic(T, {}, expected=object()),
            lambda: client.rollback(T, "text"),
        ):
            with pytest.raises(ValueError):
                call()
    assert server.connections == 0
    with pytest.raises(ValueError, match="bad gateway URL"):
        GatewayClient("ftp://host")


def answer(raw: bytes, close: bool = True) -> Callable[[socket.socket], None]:
    """A handler answering every request with ``raw`` bytes as they are (then closing, if ``close``)."""

    def handler(conn: socket.socket) -> None:
        while read_request(conn):
            conn.sendall(raw)
            if close:
                return

    return handler


# Answers that are not HTTP/1.1 this client reads, and the ProtocolError's reason (the asyncio client's too).
GARBAGE = [
    (b"garbage\r\n\r\n", "not an HTTP/1.1 status line"),
    (b"HTTP/1.1 2000 OK\r\n\r\n", "not an HTTP/1.1 status line"),
    (b"HTTP/1.1 200 OK\r\nX-" + b"a" * 70_000 + b"\r\n\r\n", "header line over 65536 bytes"),
    (b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", "more than 100 headers"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "bad header line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "5 bytes before the end of the body"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported Transfer-Encoding"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", "longer than its size"),
    (b"HTTP/1.1 200 OK\r\nContent-Len", "inside a header line"),
]


@pytest.mark.parametrize(("raw", "reason"), GARBAGE)
def test_a_garbage_answer_is_a_clear_error(serve: Callable, raw: bytes, reason: str) -> None:
    server = serve(answer(raw))
    with GatewayClient(server.url, timeout_seconds=5) as client:
        with pytest.raises(HBaseUnavailable, match=f"ProtocolError: .*{reason}") as caught:
            client.get_topic(T)
        assert not caught.value.timed_out
        with pytest.raises(PublishOutcomeUnknown, match=reason):  # the publish may have been carried out
            client.publish(T, [b"x"])


# A topic's answer in each framing this client reads (the asyncio client's too).
FRAMINGS = [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\n" + TOPIC_JSON[:5] + b"\r\n"
    b"%x\r\n" % (len(TOPIC_JSON) - 5) + TOPIC_JSON[5:] + b"\r\n0\r\nTrailer: x\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(TOPIC_JSON) + TOPIC_JSON,
    b"HTTP/1.0 200 OK\r\n\r\n" + TOPIC_JSON,  # no framing: the body ends with the connection
]


@pytest.mark.parametrize("raw", FRAMINGS)
def test_answers_in_any_framing_are_read(serve: Callable, raw: bytes) -> None:
    server = serve(answer(raw))
    with GatewayClient(server.url, timeout_seconds=5) as client:
        assert client.get_topic(T).topic == T


def test_an_http_1_0_answer_closes_the_connection(serve: Callable) -> None:
    body = TOPIC_JSON
    server = serve(answer(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body, close=False))
    with GatewayClient(server.url, timeout_seconds=5) as client:
        for _ in range(3):
            client.get_topic(T)
    assert server.connections == 3  # HTTP/1.0 without keep-alive: a new connection for each call


def test_a_token_cannot_smuggle_headers() -> None:
    with pytest.raises(ValueError, match="control character"):
        GatewayClient("http://127.0.0.1:1", token="secret\r\nX-Admin: yes")


@pytest.mark.parametrize(
    ("host", "port", "tls", "line"),
    [
        ("127.0.0.1", 8080, False, b"Host: 127.0.0.1:8080\r\n"),
        ("gateway", 80, False, b"Host: gateway\r\n"),
        ("gateway", 443, True, b"Host: gateway\r\n"),
        ("::1", 8080, False, b"Host: [::1]:8080\r\n"),
        ("bücher.example", 8080, False, b"Host: xn--bcher-kva.example:8080\r\n"),
    ],
)
def test_the_host_header_names_the_gateway_as_http_wants(host: str, port: int, tls: bool, line: bytes) -> None:
    context = ssl.create_default_context() if tls else None
    assert http1.Connection(host, port, context).host_line == line


def test_an_ack_noted_before_anything_was_received_is_refused_as_one_that_waits() -> None:
    with GatewayClient("http://127.0.0.1:1") as client, client.shared_consumer(TopicId("n", "t"), "s") as consumer:
        for wait in (True, False):
            with pytest.raises(InvalidArgument, match="received nothing yet"):
                consumer.ack(b"\x00" * 20, wait=wait)
