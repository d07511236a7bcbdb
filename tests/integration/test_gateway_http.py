"""The gateway's HTTP/1.1 layer over raw sockets, on a real one-worker gateway (one library call at a time,
a 1 s keep-alive) against the real HBase: what any HTTP client relies on, whatever serves the requests.

Malformed requests are 400 and the connection closes (one cut off after its head is logged as a client
gone, 499, not as a server error); one connection carries many requests, one after
another and pipelined (answered in order); ``Expect: 100-continue`` is answered before the body is sent;
chunked bodies are published like any other; a client that stalls in the middle of its body holds up no
other caller (not even the one library call this gateway makes at a time), publishes nothing and is
logged as a client gone; an idle
connection is closed after ``keep_alive`` seconds; a long-poll whose client disconnects ends at once and
leaves its consumer session where it was.
"""

from __future__ import annotations

import base64
import json
import socket
import time
import uuid
from collections.abc import Iterator
from typing import BinaryIO

import httpx
import pytest

from tms_hbase import MessagingClient, TopicId

from ..gateway_server import GatewayProcess, module_gateway
from ..waiting import wait_for
from .test_gateway_consumer_limits import gauge
from .test_gateway_subscriptions import CONSUMER, sub_url

KEEP_ALIVE = 1.0
CONFIG = f"workers = 1\nthreads = 1\nkeep_alive = {KEEP_ALIVE}\n"


gateway = module_gateway(CONFIG)


@pytest.fixture
def topic(direct: MessagingClient) -> TopicId:
    t = TopicId(f"n{uuid.uuid4().hex[:10]}", "http")
    direct.create_topic(t)
    return t


@pytest.fixture
def conn(gateway: GatewayProcess) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as sock:
        yield sock


def publish_request(t: TopicId, payloads: list[bytes], *, extra: str = "") -> bytes:
    body = json.dumps({"messages": [base64.b64encode(p).decode() for p in payloads]}).encode()
    head = (
        f"POST /v1/namespaces/{t.namespace}/topics/{t.topic}/publish HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    )
    return head.encode() + body


def read_response(stream: BinaryIO) -> tuple[int, dict[str, str], bytes]:
    """One response (status, headers with lower-case names, body) from ``stream``: Content-Length bodies,
    which is what the gateway sends."""
    status_line = stream.readline()
    assert status_line.startswith(b"HTTP/1.1 "), f"not a response: {status_line!r}"
    headers = {}
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = stream.read(int(headers.get("content-length", "0")))
    return int(status_line.split()[1]), headers, body


def closed_by_peer(sock: socket.socket) -> bool:
    """True once the server has closed the connection (whatever it still sent is read and dropped)."""
    try:
        while chunk := sock.recv(65536):
            del chunk
    except (ConnectionResetError, BrokenPipeError):
        pass
    return True


def published(direct: MessagingClient, t: TopicId) -> list[bytes]:
    return [m.payload for m in direct.fetch(t)]


def test_malformed_requests_are_400_and_close_the_connection(gateway: GatewayProcess, topic: TopicId) -> None:
    path = f"/v1/namespaces/{topic.namespace}/topics/{topic.topic}/publish"
    for request in (
        b"NOT AN HTTP REQUEST\r\n\r\n",
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n".encode(),
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\nzz\r\n".encode(),
    ):
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as sock:
            sock.sendall(request)
            status, _headers, _body = read_response(sock.makefile("rb"))
            assert status == 400, request
            assert closed_by_peer(sock)
    # a request cut off by its bad chunk after its head is a client gone (499), not a server error
    wait_for(lambda: f'"POST {path}" 499' in gateway.log(), "the cut-off request's access line")
    assert "Traceback" not in gateway.log()


def test_one_connection_carries_many_requests_in_turn_and_pipelined(
    conn: socket.socket, topic: TopicId, direct: MessagingClient
) -> None:
    stream = conn.makefile("rb")
    one_by_one = [f"m{i}".encode() for i in range(40)]
    for payload in one_by_one:
        conn.sendall(publish_request(topic, [payload]))
        status, headers, _body = read_response(stream)
        assert status == 200 and headers["tms-published"]
    pipelined = [f"p{i}".encode() for i in range(20)]
    conn.sendall(b"".join(publish_request(topic, [p]) for p in pipelined))  # all sent before any answer is read
    positions = []
    for _ in pipelined:
        status, headers, _body = read_response(stream)
        assert status == 200
        positions.append(headers["tms-published"])
    assert len(set(positions)) == len(pipelined)  # twenty answers, one per request
    assert published(direct, topic) == one_by_one + pipelined  # every one stored, in the order sent
    # the same connection still serves an ordinary call
    conn.sendall(
        f"GET /v1/namespaces/{topic.namespace}/topics/{topic.topic} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    )
    status, _headers, body = read_response(stream)
    assert status == 200 and json.loads(body)["name"] == topic.topic


def test_expect_100_continue_is_answered_before_the_body_is_sent(
    conn: socket.socket, topic: TopicId, direct: MessagingClient
) -> None:
    request = publish_request(topic, [b"after 100"], extra="Expect: 100-continue\r\n")
    head, _, body = request.partition(b"\r\n\r\n")
    conn.sendall(head + b"\r\n\r\n")
    stream = conn.makefile("rb")
    assert stream.readline() == b"HTTP/1.1 100 Continue\r\n"
    assert stream.readline() == b"\r\n"
    conn.sendall(body)
    status, _headers, _body = read_response(stream)
    assert status == 200
    assert published(direct, topic) == [b"after 100"]


def test_a_chunked_body_is_published(conn: socket.socket, topic: TopicId, direct: MessagingClient) -> None:
    body = json.dumps({"messages": [base64.b64encode(b"chunked %d" % i).decode() for i in range(3)]}).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i : i + 7]), body[i : i + 7]) for i in range(0, len(body), 7))
    head = (
        f"POST /v1/namespaces/{topic.namespace}/topics/{topic.topic}/publish HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    conn.sendall(head.encode() + chunks[: len(chunks) // 2])
    conn.sendall(chunks[len(chunks) // 2 :] + b"0\r\n\r\n")
    status, _headers, _body = read_response(conn.makefile("rb"))
    assert status == 200
    assert published(direct, topic) == [b"chunked 0", b"chunked 1", b"chunked 2"]


def test_a_client_stalled_mid_body_holds_up_nobody_and_publishes_nothing(
    gateway: GatewayProcess, http: httpx.Client, direct: MessagingClient
) -> None:
    stalled_topic, other = (TopicId(f"n{uuid.uuid4().hex[:10]}", name) for name in ("stalled", "other"))
    direct.create_topic(stalled_topic)
    direct.create_topic(other)
    request = publish_request(stalled_topic, [b"never complete"])
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as stalled:
        stalled.sendall(request[: len(request) - 10])  # the head and most of the body, then nothing
        for i in range(5):  # this gateway makes one library call at a time: a stalled request holds none
            body = json.dumps({"messages": [base64.b64encode(b"other %d" % i).decode()]})
            response = http.post(  # held up by the stalled request, it would time out
                f"/v1/namespaces/{other.namespace}/topics/{other.topic}/publish",
                content=body,
                headers={"Content-Type": "application/json"},
            )
            assert response.status_code == 200, response.text
    assert published(direct, other) == [b"other %d" % i for i in range(5)]
    # the stalled request ended with its connection: logged as a client gone, nothing of it was stored
    path = f"/v1/namespaces/{stalled_topic.namespace}/topics/{stalled_topic.topic}/publish"
    line = wait_for(
        lambda: next((ln for ln in gateway.log().splitlines() if f'"POST {path}"' in ln), None),
        "the stalled request's access line",
    )
    assert " 499 " in line and "error=ClientDisconnected" in line, line
    assert "Traceback" not in gateway.log()
    assert published(direct, stalled_topic) == []


def test_an_idle_connection_is_closed_after_keep_alive(conn: socket.socket, topic: TopicId) -> None:
    conn.sendall(publish_request(topic, [b"then idle"]))
    stream = conn.makefile("rb")
    assert read_response(stream)[0] == 200
    idle_since = time.monotonic()
    assert stream.read(1) == b""  # the server closes it; the read ends then
    assert time.monotonic() - idle_since >= KEEP_ALIVE * 0.5  # kept open while idle, not closed at once


def test_a_long_poll_whose_client_disconnects_leaves_its_session_where_it_was(
    gateway: GatewayProcess, http: httpx.Client, topic: TopicId, direct: MessagingClient
) -> None:
    """The long-poll ends at once (its slot freed, logged 499) and delivers nothing: the session's next call
    with the header it had gets what came after, nothing skipped, nothing repeated."""
    assert http.put(sub_url(topic, "svc")).status_code == 200
    direct.publish(topic, [b"a", b"b"])
    first = http.get(sub_url(topic, "svc", "messages"), params={"max": 10})
    assert [base64.b64decode(m["payload"]) for m in first.json()] == [b"a", b"b"]
    session = first.headers[CONSUMER]
    path = sub_url(topic, "svc", "messages") + "?wait=30"
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{CONSUMER}: {session}\r\n\r\n".encode())
        wait_for(lambda: gauge(http, "tms_gateway_long_polls") == 1, "the long-poll to wait")
    wait_for(lambda: gauge(http, "tms_gateway_long_polls") == 0, "the gone client's long-poll to end", 15)
    line = wait_for(
        lambda: next((ln for ln in gateway.log().splitlines() if f'"GET {path}"' in ln), None),
        "the long-poll's access line",
    )
    assert " 499 " in line and "error=ClientDisconnected" in line, line
    direct.publish(topic, [b"c"])
    after = http.get(sub_url(topic, "svc", "messages"), params={"max": 10}, headers={CONSUMER: session})
    assert after.status_code == 200, after.text
    assert [base64.b64decode(m["payload"]) for m in after.json()] == [b"c"]
