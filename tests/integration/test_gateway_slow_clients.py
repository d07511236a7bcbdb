"""Slow clients against a real gateway process, over real sockets: a request whose headers or body trickle
in (slowloris) is cut at ``header_timeout``/``body_timeout``, a client gets at most
``max_client_connections`` connections at once, and a long-poll that waits longer than both deadlines
still returns its messages."""

from __future__ import annotations

import base64
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tms_hbase import MessagingClient, TopicId

from ..gateway_server import GatewayProcess, running_gateway

TOPIC = TopicId("slow", "jobs")
BOUNDS = "header_timeout = 1\nbody_timeout = 1\nmax_wait = 60\n"


@pytest.fixture(scope="module")
def gateway(
    hbase_address: str, module_prefix: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    with running_gateway(hbase_address, module_prefix, tmp_path_factory.mktemp("slow"), BOUNDS) as process:
        yield process


def trickle_until_closed(sockets: list[socket.socket], byte: bytes, deadline: float = 120.0) -> list[socket.socket]:
    """Send one ``byte`` to each socket every 0.2 s, as a slow client does, until the gateway closed them all
    or ``deadline`` seconds passed; returns those still open."""
    open_ = list(sockets)
    until = time.monotonic() + deadline
    while open_ and time.monotonic() < until:
        for sock in list(open_):
            try:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable and sock.recv(4096) == b"":
                    open_.remove(sock)
                    continue
                sock.send(byte)
            except OSError:  # reset or broken pipe: closed by the gateway
                open_.remove(sock)
        time.sleep(0.2)
    return open_


def connect(gateway: GatewayProcess, first: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=60)
    sock.sendall(first)
    return sock


def test_slow_headers_and_bodies_are_cut(gateway: GatewayProcess) -> None:
    path = f"/v1/namespaces/{TOPIC.namespace}/topics/{TOPIC.topic}/publish"
    silent = [connect(gateway, b"") for _ in range(5)]  # connect and send nothing
    headers = [connect(gateway, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".encode()) for _ in range(10)]
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    )
    bodies = [connect(gateway, head.encode() + b'{"messages": ["') for _ in range(10)]
    try:
        assert trickle_until_closed(silent + headers, b"a") == []
        assert trickle_until_closed(bodies, b"A") == []
    finally:
        for sock in silent + headers + bodies:
            sock.close()
    assert "did not arrive within 1 s" in gateway.log()


def test_a_long_poll_outlasts_the_deadlines(gateway: GatewayProcess, hbase_address: str, module_prefix: str) -> None:
    with MessagingClient(hbase_address, module_prefix) as client:
        client.create_topic(TOPIC)
        client.create_subscription(TOPIC, "waiting")
        answers: list[httpx.Response] = []
        path = f"/v1/namespaces/{TOPIC.namespace}/topics/{TOPIC.topic}/subscriptions/waiting/messages"

        def long_poll() -> None:
            with httpx.Client(base_url=gateway.url, timeout=120) as http:
                answers.append(http.get(path, params={"wait": 60, "max": 1}))

        poller = threading.Thread(target=long_poll)
        poller.start()
        time.sleep(3)  # longer than both deadlines: the poll is waiting (or, on a slow machine, not started yet)
        client.publish(TOPIC, [b"worth the wait"])
        poller.join(120)
    assert [answer.status_code for answer in answers] == [200]
    assert [base64.b64decode(m["payload"]) for m in answers[0].json()] == [b"worth the wait"]


def test_a_client_gets_so_many_connections_at_once(
    hbase_address: str, module_prefix: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder: Path = tmp_path_factory.mktemp("counted")
    with running_gateway(
        hbase_address, module_prefix, folder, "max_client_connections = 3\nheader_timeout = 300\n"
    ) as gateway:
        held = [connect(gateway, b"") for _ in range(3)]
        try:
            with socket.create_connection(("127.0.0.1", gateway.port), timeout=60) as fourth:
                answer = b""
                while chunk := fourth.recv(4096):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 503 ") and answer.endswith(b"too many connections from this client\n")
            held.pop().close()
            deadline = time.monotonic() + 60
            with httpx.Client(base_url=gateway.url, timeout=60) as http:
                while True:  # once the gateway saw the close, a connection is free again
                    try:
                        if http.get("/health").status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    assert time.monotonic() < deadline, "no connection came free"
                    time.sleep(0.2)
        finally:
            for sock in held:
                sock.close()
