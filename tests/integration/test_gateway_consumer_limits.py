"""Consumer sessions through a real one-worker gateway (one long-poll thread, a 2,500-byte page limit, a
2 s consumer lease) on loopback against the real HBase: pages capped by bytes, a long-poll whose client
closes its socket frees its slot at once, and a session's consumer kept open between its calls without
keeping its lease alive."""

from __future__ import annotations

import base64
import re
import socket
import uuid
from pathlib import Path

import httpx
import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.gateway_client.http import GatewayClient

from ..gateway_server import GatewayProcess, module_gateway, running_gateway
from ..waiting import wait_for
from .test_gateway_subscriptions import CONSUMER, LEASE, sub_url

MAX_POLL_BYTES = 2500
MAX_WAIT = 3600.0  # the longest long-poll: one that outlived its client would hold the slot an hour
CONFIG = (
    f"workers = 1\nthreads = 2\nlong_polls = 1\nconsumer_lease = {LEASE}\nmax_poll_bytes = {MAX_POLL_BYTES}\n"
    f"max_wait = {MAX_WAIT}\n"
)


gateway = module_gateway(CONFIG)


@pytest.fixture
def topic(direct: MessagingClient) -> TopicId:
    t = TopicId(f"n{uuid.uuid4().hex[:10]}", "orders")
    direct.create_topic(t)
    return t


def gauge(http: httpx.Client, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", http.get("/metrics").text, re.MULTILINE)
    assert found, f"no {name} in /metrics"
    return float(found.group(1))


def page(http: httpx.Client, t: TopicId, session: str | None, **query: object) -> tuple[list[bytes], str]:
    headers = {CONSUMER: session} if session else {}
    response = http.get(sub_url(t, "svc", "messages"), params=query, headers=headers)
    assert response.status_code == 200, response.text
    return [base64.b64decode(m["payload"]) for m in response.json()], response.headers[CONSUMER]


def test_a_page_stops_at_max_poll_bytes_with_at_least_one_message(
    http: httpx.Client, topic: TopicId, direct: MessagingClient
) -> None:
    sizes = [1000, 1000, 1000, 5000, 1000]
    direct.publish(topic, [bytes([i]) * size for i, size in enumerate(sizes)])
    http.put(sub_url(topic, "svc"))
    pages, session = [], None
    while True:
        got, session = page(http, topic, session, max=10)
        if not got:
            break
        pages.append([len(p) for p in got])
    # ids are 20 bytes: the first page passes 2,500 bytes with its third message; the 5,000-byte one
    # comes alone; nothing is skipped or repeated
    assert pages == [[1000, 1000, 1000], [5000], [1000]]


def test_a_long_poll_whose_client_went_away_frees_its_slot(http: httpx.Client, gateway: GatewayProcess) -> None:
    """The gateway has one long-poll thread: a waiting long-poll whose client closed its socket must give it
    up at once (not after its hour here), so the next long-poll gets it."""
    quiet = [TopicId(f"n{uuid.uuid4().hex[:10]}", "idle") for _ in range(2)]
    for t in quiet:
        http.put(f"/v1/namespaces/{t.namespace}/topics/{t.topic}")
        http.put(sub_url(t, "svc"))
    host, port = "127.0.0.1", gateway.port
    with socket.create_connection((host, port), timeout=10) as sock:
        path = sub_url(quiet[0], "svc", "messages") + f"?wait={MAX_WAIT:.0f}"
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        wait_for(lambda: gauge(http, "tms_gateway_long_polls") == 1, "the long-poll to wait", 60)
    # the socket is closed: the client is gone
    wait_for(lambda: gauge(http, "tms_gateway_long_polls") == 0, "the gone client's long-poll to end", 120)
    response = http.get(sub_url(quiet[1], "svc", "messages"), params={"wait": 1})
    assert response.status_code == 200 and response.json() == []


def test_a_session_is_served_by_its_parked_consumer_and_its_lease_still_runs_out(
    hbase_address: str, module_prefix: str, tmp_path: Path, topic: TopicId, direct: MessagingClient
) -> None:
    """On a gateway of its own, so that this session is the only one its worker keeps."""
    with (
        running_gateway(hbase_address, module_prefix, tmp_path, CONFIG) as gateway,
        httpx.Client(base_url=gateway.url, timeout=60) as http,
    ):
        check_parked_session(http, topic, direct)


def check_parked_session(http: httpx.Client, topic: TopicId, direct: MessagingClient) -> None:
    direct.publish(topic, [b"a", b"b", b"c", b"d", b"e"])
    http.put(sub_url(topic, "svc"))
    got, session = page(http, topic, None, max=2)
    assert got == [b"a", b"b"]
    assert gauge(http, "tms_gateway_consumer_sessions") == 1  # kept open in the worker
    got, session = page(http, topic, session, max=2)
    assert got == [b"c", b"d"]
    commit = http.post(sub_url(topic, "svc", "commit"), headers={CONSUMER: session})
    assert commit.status_code == 200 and gauge(http, "tms_gateway_consumer_sessions") == 1
    # the client goes away without closing: a parked consumer does not renew its lease, so a new session
    # gets the subscription once the lease runs out, from the committed mark
    busy = http.get(sub_url(topic, "svc", "messages"))
    assert busy.status_code == 409 and busy.headers["tms-error"] == "SubscriptionBusy"
    answers: list[httpx.Response] = []

    def taken_over() -> bool:
        answers.append(http.get(sub_url(topic, "svc", "messages"), params={"max": 10}))
        return answers[-1].status_code != 409

    wait_for(taken_over, "the parked session's lease to run out", 10 * LEASE)
    assert [base64.b64decode(m["payload"]) for m in answers[-1].json()] == [b"e"]
    stale = http.get(sub_url(topic, "svc", "messages"), headers={CONSUMER: session})
    assert stale.status_code == 409 and stale.headers["tms-error"] == "LeaseLost"


def test_each_gateway_consumer_calls_over_a_connection_of_its_own(
    gateway: GatewayProcess, topic: TopicId, direct: MessagingClient
) -> None:
    """GatewayClient's consumers keep one connection each, apart from the pooled ones the client's other calls
    share, so that a session's calls reach the worker that keeps its consumer (and what it read ahead):
    two consumers of one client polled in turn, with other calls between, each on its own client port
    (the access log shows it), and each getting every message once, in order."""
    direct.publish(topic, [b"a", b"b", b"c"])
    pages: dict[str, list[bytes]] = {"one": [], "two": []}
    with GatewayClient(gateway.url, timeout_seconds=60) as client:
        for name in pages:
            client.create_subscription(topic, name)
        with client.consumer(topic, "one") as one, client.consumer(topic, "two") as two:
            for _ in range(3):
                for name, consumer in (("one", one), ("two", two)):
                    pages[name] += [m.payload for m in consumer.poll(max_messages=1, timeout_seconds=5)]
                    client.get_topic(topic)  # a pooled connection's call in between
                    consumer.commit()
    assert pages == {"one": [b"a", b"b", b"c"], "two": [b"a", b"b", b"c"]}
    ports: dict[str, set[str]] = {"one": set(), "two": set(), "other": set()}
    for line in gateway.log().splitlines():
        found = re.search(rf'127\.0\.0\.1:(\d+) "\w+ /v1/namespaces/{topic.namespace}/topics/orders(\S*)', line)
        if found:
            port, rest = found.groups()
            call = re.match(r"/subscriptions/(one|two)/(messages|commit|consumer)", rest)
            ports[call.group(1) if call else "other"].add(port)
    assert len(ports["one"]) == 1 and len(ports["two"]) == 1, ports
    assert ports["one"] != ports["two"] and not (ports["one"] | ports["two"]) & ports["other"], ports
