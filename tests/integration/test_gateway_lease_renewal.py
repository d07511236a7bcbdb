"""How a gateway consumer session keeps its lease, through a real one-worker gateway on loopback against
the real HBase: a page call renews the lease only once it needs it (not a compare-and-set on every call),
a session that keeps calling never loses its lease, and a session whose lease was taken away elsewhere (by
another worker or a direct client) is refused at its very next call, its commit changing nothing."""

from __future__ import annotations

import base64
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tms_hbase import MessagingClient, TopicId

from ..gateway_server import module_gateway, running_gateway
from .test_gateway import assert_error
from .test_gateway_subscriptions import CONSUMER, sub_url

LONG_LEASE = 30.0  # this module's gateway: a page call must not renew the lease for its first 10 s
SHORT_LEASE = 6.0  # the keep-alive test's own gateway


gateway = module_gateway(f"workers = 1\nthreads = 2\nconsumer_lease = {LONG_LEASE}\n")


@pytest.fixture
def topic(direct: MessagingClient) -> TopicId:
    """A topic of this test's own holding ten messages, m0..m9."""
    t = TopicId(f"n{uuid.uuid4().hex[:10]}", "orders")
    direct.create_topic(t)
    direct.publish(t, [b"m%d" % i for i in range(10)])
    return t


def page(http: httpx.Client, t: TopicId, session: str | None) -> tuple[list[tuple[bytes, bytes]], str]:
    """One ``GET .../messages?max=1`` (JSON): the (id, payload) pairs and the session to go on with."""
    headers = {"Accept": "application/json"} | ({CONSUMER: session} if session else {})
    response = http.get(sub_url(t, "svc", "messages"), params={"max": 1}, headers=headers)
    assert response.status_code == 200, response.text
    got = [(base64.b64decode(m["id"]), base64.b64decode(m["payload"])) for m in response.json()]
    return got, response.headers[CONSUMER]


def test_a_page_call_renews_the_lease_only_when_it_needs_it(
    http: httpx.Client, topic: TopicId, direct: MessagingClient
) -> None:
    """The lease cell's expiry is rewritten by every renewal (on HBase's clock, in ms): calls made within
    a third of the lease after the session took it leave it as it was. Renewing on every call, as a
    compare-and-set per call, would move it each time."""
    http.put(sub_url(topic, "svc"))
    taken = time.monotonic()  # before the lease is written: the gateway's own count starts later
    got, session = page(http, topic, None)
    expires = direct.get_subscription(topic, "svc").lease_expires
    assert got[0][1] == b"m0" and expires is not None
    for i in range(1, 4):
        got, session = page(http, topic, session)
        assert got[0][1] == b"m%d" % i
        if time.monotonic() - taken < LONG_LEASE / 3:
            assert direct.get_subscription(topic, "svc").lease_expires == expires, f"call {i} renewed the lease"
    # a commit is a write under the lease: it renews it too
    assert http.post(sub_url(topic, "svc", "commit"), headers={CONSUMER: session}).status_code == 200
    committed = direct.get_subscription(topic, "svc")
    assert committed.position == got[0][0]
    assert committed.lease_expires is not None and committed.lease_expires > expires


def test_a_session_whose_lease_was_taken_away_elsewhere_is_refused_at_its_next_call(
    http: httpx.Client, topic: TopicId, direct: MessagingClient
) -> None:
    """The session's consumer stays parked in the worker, its lease fresh, while a direct client releases
    the subscription (as a force release through another worker does): the next page is 409 LeaseLost, and
    so is a commit, whether it would move the mark or not, which changes nothing."""
    http.put(sub_url(topic, "svc"))
    got, session = page(http, topic, None)
    assert http.post(sub_url(topic, "svc", "commit"), headers={CONSUMER: session}).status_code == 200
    mark = got[0][0]
    got, session = page(http, topic, session)
    direct.release_subscription(topic, "svc")
    again = http.post(sub_url(topic, "svc", "commit"), headers={CONSUMER: session}, json={"id": b64(mark)})
    assert_error(again, 409, "LeaseLost")  # the mark is there already: nothing to write, refused all the same

    for call in ("commit", "messages"):
        got, session = page(http, topic, None)  # a new session, from the committed mark
        assert [payload for _, payload in got] == [b"m1"]
        direct.release_subscription(topic, "svc")
        if call == "commit":
            answer = http.post(sub_url(topic, "svc", "commit"), headers={CONSUMER: session})
        else:
            answer = http.get(sub_url(topic, "svc", "messages"), headers={CONSUMER: session})
        assert_error(answer, 409, "LeaseLost")
        assert direct.get_subscription(topic, "svc").position == mark  # nothing changed


def test_a_session_kept_alive_by_calls_never_loses_its_lease(
    hbase_address: str, module_prefix: str, tmp_path: Path, topic: TopicId, direct: MessagingClient
) -> None:
    """Calls a little apart, then a pause of most of the lease, again and again: each pause is shorter than
    the lease after the call before it, so the session keeps the lease throughout and no other consumer gets
    it. (A lease renewed only every third of ``consumer_lease`` and running ``consumer_lease`` from that
    renewal would run out during the second pause.) The pauses are the client being idle, the point of the
    test, not waits for a condition."""
    config = f"workers = 1\nthreads = 2\nconsumer_lease = {SHORT_LEASE}\n"
    with (
        running_gateway(hbase_address, module_prefix, tmp_path, config) as gateway,
        httpx.Client(base_url=gateway.url, timeout=60) as http,
    ):
        http.put(sub_url(topic, "svc"))
        got, session = page(http, topic, None)
        payloads = [payload for _, payload in got]
        for _ in range(2):
            time.sleep(0.3 * SHORT_LEASE)  # past a quarter of the lease's length: not renewed by the next call
            got, session = page(http, topic, session)
            payloads += [payload for _, payload in got]
            time.sleep(0.8 * SHORT_LEASE)  # idle, for less than the lease after the last call
            assert_error(http.get(sub_url(topic, "svc", "messages")), 409, "SubscriptionBusy")  # still held
            got, session = page(http, topic, session)
            payloads += [payload for _, payload in got]
        assert payloads == [b"m%d" % i for i in range(5)]  # in order, each once: the session never lost its lease


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
