"""Shared subscriptions through the real gateway process (2 workers) on loopback against the real HBase:
the endpoints driven by httpx in both encodings (bodies checked against schemas written out here),
``GatewayClient.shared_consumer`` side by side with the library's, sessions across workers, bad input
and the rules of a gateway with tokens."""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import time
import uuid
from pathlib import Path

import fastavro
import httpx
import pytest

from tms_hbase import DeadLetter, MessagingClient, NotHeld, TopicId
from tms_hbase.errors import InvalidArgument, SubscriptionNotFound
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.model.message_id import MessageId

from ..gateway_server import TMS_GATEWAY, GatewayProcess, module_gateway, running_gateway
from .test_gateway import AVRO, JSON, assert_error, topic_url

CONSUMER = "tms-consumer"
DELIVERIES = {
    "type": "array",
    "items": {
        "type": "record",
        "name": "Delivery",
        "fields": [
            {"name": "id", "type": "bytes"},
            {"name": "payload", "type": "bytes"},
            {"name": "publishTime", "type": "long"},
            {"name": "deliveries", "type": "int"},
            {"name": "deadline", "type": "long"},
            {"name": "incarnation", "type": "long"},
        ],
    },
}
SETTLE = {  # as written before deliveries carried incarnations: still read (settled by session only)
    "type": "record",
    "name": "SettleRequest",
    "fields": [
        {"name": "ids", "type": {"type": "array", "items": "bytes"}},
        {"name": "seconds", "type": ["null", "double"], "default": None},
    ],
}
FENCED_SETTLE = {
    "type": "record",
    "name": "SettleRequest",
    "fields": [
        {"name": "ids", "type": {"type": "array", "items": "bytes"}},
        {"name": "seconds", "type": ["null", "double"], "default": None},
        {"name": "incarnations", "type": {"type": "array", "items": "long"}},
    ],
}
DEADLINES = {"type": "array", "items": "long"}


gateway = module_gateway("workers = 2\nthreads = 2\nmax_poll_messages = 50\n")


@pytest.fixture
def topic(direct: MessagingClient) -> TopicId:
    """A topic of this test's own holding five messages, a..e, with a shared subscription ``work``."""
    t = TopicId(f"n{uuid.uuid4().hex[:10]}", "jobs")
    direct.create_topic(t)
    direct.publish(t, [b"a", b"b", b"c", b"d", b"e"])
    direct.create_subscription(t, "work", shared=True, ack_timeout_seconds=30)
    return t


def url(t: TopicId, name: str = "work", action: str = "") -> str:
    return topic_url(t.namespace, t.topic, "subscriptions") + f"/{name}" + (f"/{action}" if action else "")


def _avro(schema: object, record: object) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, record)
    return out.getvalue()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class Wire:
    """Bodies of the shared endpoints in one media type, built independently of the gateway's codecs."""

    def __init__(self, media: str) -> None:
        self.media = media

    def deliveries(self, response: httpx.Response) -> list[dict]:
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == self.media
        if self.media == AVRO:
            buffer = io.BytesIO(response.content)
            records = fastavro.schemaless_reader(buffer, DELIVERIES, None)
            assert buffer.tell() == len(response.content)
            return list(records)  # type: ignore[arg-type]
        return [
            {**r, "id": base64.b64decode(r["id"]), "payload": base64.b64decode(r["payload"])} for r in response.json()
        ]

    def settle(self, ids: list[bytes], seconds: float | None = None) -> bytes:
        if self.media == AVRO:
            return _avro(SETTLE, {"ids": ids, "seconds": seconds})
        return json.dumps({"ids": [_b64(i) for i in ids], "seconds": seconds}).encode()

    def deadlines(self, response: httpx.Response) -> list[int]:
        assert response.status_code == 200, response.text
        if self.media == AVRO:
            return list(fastavro.schemaless_reader(io.BytesIO(response.content), DEADLINES, None))  # type: ignore[arg-type]
        return response.json()

    def post(
        self, http: httpx.Client, t: TopicId, action: str, session: str | None, ids: list[bytes], seconds=None
    ) -> httpx.Response:
        headers = {"Content-Type": self.media} | ({CONSUMER: session} if session else {})
        return http.post(url(t, action=action), content=self.settle(ids, seconds), headers=headers)


@pytest.fixture(params=[AVRO, JSON], ids=["avro", "json"])
def wire(request: pytest.FixtureRequest) -> Wire:
    return Wire(request.param)


def fetch(http: httpx.Client, wire: Wire, t: TopicId, session: str | None, **query: object) -> tuple[list[dict], str]:
    headers = {"Accept": wire.media} | ({CONSUMER: session} if session else {})
    response = http.get(url(t, action="deliveries"), params=query, headers=headers)
    return wire.deliveries(response), response.headers[CONSUMER]


# -- the endpoints -------------------------------------------------------------------------------


def test_fetch_ack_nack_release_extend_in_both_encodings(
    http: httpx.Client, wire: Wire, topic: TopicId, direct: MessagingClient
) -> None:
    got, session = fetch(http, wire, topic, None, max=2)
    assert [d["payload"] for d in got] == [b"a", b"b"] and [d["deliveries"] for d in got] == [1, 1]
    now = direct.hbase_clock.now_ms()
    assert all(now < d["deadline"] <= now + 31_000 for d in got)
    other, other_session = fetch(http, wire, topic, None, max=2)  # another session: other messages
    assert [d["payload"] for d in other] == [b"c", b"d"] and other_session != session
    a, b = got[0]["id"], got[1]["id"]

    extended = wire.post(http, topic, "extend", session, [a], 100)
    (deadline,) = wire.deadlines(extended)
    assert deadline >= direct.hbase_clock.now_ms() + 99_000
    assert {p.id: p.deadline for p in direct.pending(topic, "work")}[a] == deadline
    assert wire.post(http, topic, "ack", session, [a]).status_code == 200
    assert wire.post(http, topic, "nack", session, [b], 0).status_code == 200
    again, session = fetch(http, wire, topic, session, max=5)  # the nacked one again, counted
    if len(again) < 2:  # (it comes first once a reap saw it, within the reap interval)
        more, session = fetch(http, wire, topic, session, max=5, wait=3)
        again += more
    again.sort(key=lambda d: d["payload"])
    assert [(d["payload"], d["deliveries"]) for d in again] == [(b"b", 2), (b"e", 1)]
    assert wire.post(http, topic, "release", session, [again[1]["id"]]).status_code == 200
    back, _ = fetch(http, wire, topic, session, max=5)
    assert [(d["payload"], d["deliveries"]) for d in back] == [(b"e", 1)]  # a release does not count

    pending = http.get(url(topic, action="pending")).json()
    assert sorted(p["deliveries"] for p in pending) == [1, 1, 1, 2]
    state = http.get(url(topic)).json()
    assert state["shared"]["acknowledged"] == 1 and state["shared"]["inFlight"] == 4
    assert state["shared"]["ackTimeout"] == 30


def test_a_session_settles_on_whichever_worker_answers(gateway: GatewayProcess, topic: TopicId) -> None:
    """Each call on a new connection, so either worker may serve it (each keeps its own copy of the
    session's consumer): extended three times and acknowledged, every message once."""
    session, done = None, []
    while len(done) < 5:
        headers = {CONSUMER: session} if session else {}
        response = httpx.get(gateway.url + url(topic, action="deliveries"), params={"max": 1}, headers=headers)
        assert response.status_code == 200, response.text
        session = response.headers[CONSUMER]
        for d in response.json():
            for action in ("extend", "extend", "extend", "ack"):
                settled = httpx.post(
                    gateway.url + url(topic, action=action), headers={CONSUMER: session}, json={"ids": [d["id"]]}
                )
                assert settled.status_code == 200, settled.text
            done.append(base64.b64decode(d["payload"]))
    assert done == [b"a", b"b", b"c", b"d", b"e"]


def test_bad_input_is_refused_and_changes_nothing(
    http: httpx.Client, wire: Wire, topic: TopicId, direct: MessagingClient
) -> None:
    got, session = fetch(http, wire, topic, None, max=2)
    _, foreign = fetch(http, wire, topic, None, max=1)  # holds c
    a = got[0]["id"]
    never = bytes(MessageId(MessageId.decode(a).generation, 10**6, 0))  # an id of the topic, never delivered
    c = direct.pending(topic, "work")[2].id
    deadlines = {p.id: p.deadline for p in direct.pending(topic, "work")}
    for ids, why in (([never], "never delivered"), ([c], "not held by this consumer")):
        response = wire.post(http, topic, "ack", session, ids)
        assert_error(response, 409, "NotHeld")
        assert why in response.text
    assert_error(wire.post(http, topic, "ack", foreign, [a]), 409, "NotHeld")  # another session's
    for response in (
        wire.post(http, topic, "ack", None, [a]),  # which session?
        wire.post(http, topic, "ack", session, []),
        wire.post(http, topic, "ack", session, [b"not an id"]),
        wire.post(http, topic, "ack", session, [a], 5),  # an ack takes no seconds
        wire.post(http, topic, "release", session, [a], 5),
        wire.post(http, topic, "nack", session, [a], -1),
        wire.post(http, topic, "extend", session, [a], float("inf")),
        wire.post(http, topic, "extend", session, [a], 1e300),  # held for ever once its holder dies
        wire.post(http, topic, "extend", session, [a], 7 * 86400 + 1),  # longer than an ack timeout may be
        wire.post(http, topic, "nack", session, [a], 1e300),
        http.post(url(topic, action="ack"), headers={CONSUMER: session, "Content-Type": wire.media}, content=b"\xff"),
        http.get(url(topic, action="deliveries"), params={"max": 0}),
        http.get(url(topic, action="deliveries"), params={"wait": -1}),
        http.get(url(topic, action="pending"), params={"limit": 0}),
        http.put(url(topic, "s2"), json={"shared": True, "ackTimeout": 0}),
        http.put(url(topic, "s2"), json={"shared": True, "maxDeliveries": 0}),
        http.put(url(topic, "s2"), json={"shared": True, "claimSize": "big"}),
        http.put(url(topic, "s2"), json={"ackTimeout": 30}),  # needs shared
        http.put(url(topic, "s2"), json={"shared": "yes"}),
        http.put(url(topic, "s2"), json={"shared": True, "deadLetter": 7}),
        http.put(url(topic, "s2"), json={"shared": True, "deadLetter": f"{topic.namespace}:{topic.topic}"}),
        http.get(url(topic, "s2x", "deliveries"), headers={CONSUMER: "bad secret"}),
    ):
        assert_error(response, 400, "InvalidArgument")
    assert_error(http.put(url(topic, "s2"), json={"shared": True, "deadLetter": "nope:missing"}), 404, "TopicNotFound")
    assert [s.name for s in direct.list_subscriptions(topic)] == ["work"]  # nothing created
    assert [(p.state, p.deliveries) for p in direct.pending(topic, "work")] == [("held", 1)] * 3  # nothing settled
    assert {p.id: p.deadline for p in direct.pending(topic, "work")} == deadlines  # nor extended
    # an exclusive subscription has no deliveries; a missing one is 404
    direct.create_subscription(topic, "solo")
    assert_error(http.get(url(topic, "solo", "deliveries")), 400, "InvalidArgument")
    assert_error(http.get(url(topic, "nope", "deliveries")), 404, "SubscriptionNotFound")
    missing = http.post(url(topic, "nope", "ack"), headers={CONSUMER: session}, json={"ids": [_b64(a)]})
    assert_error(missing, 404, "SubscriptionNotFound")


def test_expired_reset_and_deleted(http: httpx.Client, topic: TopicId, direct: MessagingClient) -> None:
    direct.create_subscription(topic, "fast", shared=True, ack_timeout_seconds=0.5)
    response = http.get(url(topic, "fast", "deliveries"), params={"max": 1})
    session, first = response.headers[CONSUMER], response.json()[0]
    time.sleep(0.8)
    expired = http.post(url(topic, "fast", "ack"), headers={CONSUMER: session}, json={"ids": [first["id"]]})
    assert_error(expired, 409, "NotHeld")
    assert "deadline passed" in expired.text
    again = http.get(url(topic, "fast", "deliveries"), params={"max": 1}, headers={CONSUMER: session}).json()
    assert again[0]["id"] == first["id"] and again[0]["deliveries"] == 2  # redelivered, counted
    direct.reset_subscription(topic, "fast", "earliest")
    after_reset = http.post(url(topic, "fast", "ack"), headers={CONSUMER: session}, json={"ids": [first["id"]]})
    assert_error(after_reset, 409, "NotHeld")
    direct.delete_subscription(topic, "fast")
    gone = http.post(url(topic, "fast", "ack"), headers={CONSUMER: session}, json={"ids": [first["id"]]})
    assert_error(gone, 404, "SubscriptionNotFound")


def test_a_settlement_of_a_delivery_that_ended_is_refused_with_409(
    http: httpx.Client, wire: Wire, topic: TopicId, direct: MessagingClient
) -> None:
    """One session gets a message, lets its deadline pass and gets it again: a settlement naming the first
    delivery (its incarnation) is 409 NotHeld and counted; the second delivery is untouched and settles."""
    direct.create_subscription(topic, "fast", shared=True, ack_timeout_seconds=0.5)
    (first,), session = _fetch_fast(http, wire, topic)
    time.sleep(0.8)
    (second,), _ = _fetch_fast(http, wire, topic, session)
    assert (second["id"], second["deliveries"]) == (first["id"], 2)
    assert second["incarnation"] not in (first["incarnation"], 0)
    extend = _fenced(wire, [second["id"]], [second["incarnation"]], 60.0)
    assert http.post(url(topic, "fast", "extend"), content=extend, headers=_head(wire, session)).status_code == 200
    for action in ("ack", "nack", "extend", "release"):
        late = _fenced(wire, [first["id"]], [first["incarnation"]])
        refused = http.post(url(topic, "fast", action), content=late, headers=_head(wire, session))
        assert_error(refused, 409, "NotHeld")
        assert "delivered again" in refused.text
    (held,) = direct.pending(topic, "fast")
    assert (held.state, held.deliveries) == ("held", 2)  # nothing changed
    stats = direct.get_subscription(topic, "fast").shared
    assert stats is not None and stats.late_acks == 4
    ack = _fenced(wire, [second["id"]], [second["incarnation"]])
    assert http.post(url(topic, "fast", "ack"), content=ack, headers=_head(wire, session)).status_code == 200
    assert direct.pending(topic, "fast") == []
    assert direct.get_subscription(topic, "fast").shared.acknowledged == 1  # type: ignore[union-attr]


def _fetch_fast(http: httpx.Client, wire: Wire, t: TopicId, session: str | None = None) -> tuple[list[dict], str]:
    headers = {"Accept": wire.media} | ({CONSUMER: session} if session else {})
    response = http.get(url(t, "fast", "deliveries"), params={"max": 1, "wait": 10}, headers=headers)
    return wire.deliveries(response), response.headers[CONSUMER]


def _fenced(wire: Wire, ids: list[bytes], incarnations: list[int], seconds: float | None = None) -> bytes:
    if wire.media == AVRO:
        return _avro(FENCED_SETTLE, {"ids": ids, "seconds": seconds, "incarnations": incarnations})
    return json.dumps({"ids": [_b64(i) for i in ids], "seconds": seconds, "incarnations": incarnations}).encode()


def _head(wire: Wire, session: str) -> dict[str, str]:
    return {"Content-Type": wire.media, CONSUMER: session}


@pytest.mark.parametrize("media", [AVRO, JSON])
def test_gateway_client_refuses_a_settlement_of_a_delivery_that_ended(
    gateway: GatewayProcess, topic: TopicId, direct: MessagingClient, media: str
) -> None:
    direct.create_subscription(topic, "fast", shared=True, ack_timeout_seconds=0.5)
    with GatewayClient(gateway.url, media=media) as client, client.shared_consumer(topic, "fast") as consumer:
        (first,) = consumer.receive(1, 10)
        time.sleep(0.8)
        (second,) = consumer.receive(1, 10)
        assert (second.id, second.deliveries) == (first.id, 2) and second.incarnation != first.incarnation
        consumer.extend(second, 60)
        with pytest.raises(NotHeld, match="delivered again"):
            consumer.ack(first)
        consumer.ack(second)
    stats = direct.get_subscription(topic, "fast").shared
    assert stats is not None and (stats.acknowledged, stats.late_acks) == (1, 1)


# -- GatewayClient -------------------------------------------------------------------------------


@pytest.mark.parametrize("media", [AVRO, JSON])
def test_gateway_client_has_the_shared_consumers_surface(
    gateway: GatewayProcess, topic: TopicId, direct: MessagingClient, media: str
) -> None:
    dead = TopicId(topic.namespace, "dead")
    with GatewayClient(gateway.url, media=media) as client:
        client.create_topic(dead)
        sub = client.create_subscription(
            topic, "gw", shared=True, ack_timeout_seconds=20, max_deliveries=2, dead_letter=dead
        )
        assert sub.name == "gw"
        stats = client.get_subscription(topic, "gw").shared
        assert stats is not None and (stats.waiting, stats.max_deliveries, stats.dead_letter) == (5, 2, dead)
        with (
            client.shared_consumer(topic, "gw", max_wait_seconds=1.0) as consumer,
            direct.shared_consumer(topic, "gw") as lib,
        ):
            batch = consumer.receive(max_messages=3, timeout_seconds=5)
            assert [d.payload for d in batch] == [b"a", b"b", b"c"]
            assert sorted(consumer.held) == sorted(d.id for d in batch)
            with pytest.raises(NotHeld):
                lib.ack(batch[0])  # the library's consumer does not hold it
            assert consumer.extend(batch[0], 60) >= direct.hbase_clock.now_ms() + 59_000
            consumer.ack(batch[0])
            consumer.nack(batch[1], delay_seconds=0)
            consumer.release(batch[2])
            with pytest.raises(NotHeld):
                consumer.ack(batch[0])  # settled already
            with pytest.raises(InvalidArgument):
                consumer.nack(batch[1], delay_seconds=-1)
            rest = list(consumer)  # redeliveries first, within a reap interval: compared as a set
            assert sorted((d.payload, d.deliveries) for d in rest) == [(b"b", 2), (b"c", 1), (b"d", 1), (b"e", 1)]
            assert [p.id for p in client.pending(topic, "gw")] == [p.id for p in direct.pending(topic, "gw")]
            resumed = client.shared_consumer(topic, "gw", owner=consumer.owner)  # another process, same session
            resumed.ack(*[d for d in rest if d.payload != b"b"])
            (b,) = [d for d in rest if d.payload == b"b"]
            assert [p.id for p in client.pending(topic, "gw")] == [b.id]
            consumer.nack(b)
        assert client.pending(topic, "gw")[0].state == "released"
        with client.shared_consumer(topic, "gw", max_wait_seconds=2.0) as late:
            assert list(late) == []  # a third delivery of b would pass max_deliveries = 2: a dead letter
        assert [DeadLetter.of(m).payload for m in direct.fetch(dead)] == [b"b"]
        with pytest.raises(SubscriptionNotFound):
            client.shared_consumer(topic, "nope").receive(1, 0)


# -- tokens and rules ----------------------------------------------------------------------------


def _token(name: str) -> tuple[str, str]:
    out = subprocess.run([TMS_GATEWAY, "--new-token", name], capture_output=True, text=True, timeout=60, check=True)
    token = re.search(r"^# (\S{40,})$", out.stdout, re.M).group(1)  # type: ignore[union-attr]
    return token, out.stdout[out.stdout.index("[[tokens]]") :]


def test_rules_apply_to_shared_consumption(
    hbase_address: str, module_prefix: str, tmp_path: Path, direct: MessagingClient, topic: TopicId
) -> None:
    """``consume`` is needed for every shared call (fetch, ack, pending); a dead-letter topic needs
    ``publish`` on it; a session presented by another principal holds nothing."""
    worker, worker_entry = _token("worker")
    other, other_entry = _token("other")
    writer, writer_entry = _token("writer")
    ns = topic.namespace
    config = f"""workers = 1
{worker_entry}
{other_entry}
{writer_entry}
[[rules]]
principal = "worker"
namespace = "{ns}"
topics = "jobs"
actions = ["consume"]

[[rules]]
principal = "other"
namespace = "{ns}"
topics = "*"
actions = ["consume"]

[[rules]]
principal = "writer"
namespace = "{ns}"
topics = "*"
actions = ["publish"]
"""
    direct.create_topic(TopicId(ns, "dead"))
    with running_gateway(hbase_address, module_prefix, tmp_path, config) as gw:
        as_worker = {"Authorization": f"Bearer {worker}"}
        fetched = httpx.get(gw.url + url(topic, action="deliveries"), params={"max": 1}, headers=as_worker)
        assert fetched.status_code == 200, fetched.text
        session, first = fetched.headers[CONSUMER], fetched.json()[0]
        ack = {"ids": [first["id"]]}
        for token in (writer,):
            headers = {"Authorization": f"Bearer {token}", CONSUMER: session}
            assert_error(httpx.post(gw.url + url(topic, action="ack"), headers=headers, json=ack), 403, "NotAuthorized")
            assert_error(httpx.get(gw.url + url(topic, action="deliveries"), headers=headers), 403, "NotAuthorized")
            assert_error(httpx.get(gw.url + url(topic, action="pending"), headers=headers), 403, "NotAuthorized")
        stolen = httpx.post(
            gw.url + url(topic, action="ack"), headers={"Authorization": f"Bearer {other}", CONSUMER: session}, json=ack
        )
        assert_error(stolen, 409, "NotHeld")  # the same secret, another principal: another owner
        assert_error(httpx.post(gw.url + url(topic, action="ack"), json=ack), 401, "NotAuthenticated")
        create = {"shared": True, "deadLetter": f"{ns}:dead"}
        refused = httpx.put(gw.url + url(topic, "dl"), headers=as_worker, json=create)
        assert_error(refused, 403, "NotAuthorized")  # may not publish to the dead-letter topic
        mine = httpx.post(gw.url + url(topic, action="ack"), headers=as_worker | {CONSUMER: session}, json=ack)
        assert mine.status_code == 200, mine.text
    assert [s.name for s in direct.list_subscriptions(topic)] == ["work"]
    assert direct.get_subscription(topic, "work").shared.acknowledged == 1  # type: ignore[union-attr]


def test_a_key_ordered_subscription_through_the_rest_api(http: httpx.Client, gateway: GatewayProcess) -> None:
    """``"ordering": "key"`` makes a key-ordered shared subscription (shown in its numbers); on an exclusive
    one, or any other ordering, 400 and nothing is created; the gateway client passes it."""
    t = TopicId(f"n{uuid.uuid4().hex[:10]}", "orders")
    with GatewayClient(gateway.url) as client:
        client.create_topic(t)
        for bad in ({"ordering": "key"}, {"shared": True, "ordering": "fifo"}, {"shared": True, "ordering": 1}):
            assert_error(http.put(url(t, "s"), json=bad), 400, "InvalidArgument")
        with pytest.raises(InvalidArgument):
            client.create_subscription(t, "s", ordering="key")
        assert client.list_subscriptions(t) == []
        created = http.put(url(t, "s"), json={"shared": True, "ordering": "key"})
        assert created.status_code in (200, 201), created.text
        assert http.get(url(t, "s")).json()["shared"]["ordering"] == "key"
        client.create_subscription(t, "s2", shared=True, ordering="key")
        shared = client.get_subscription(t, "s2").shared
        assert shared is not None and shared.ordering == "key"
        plain = client.create_subscription(t, "s3", shared=True)
        assert plain.name == "s3" and client.get_subscription(t, "s3").shared.ordering is None  # type: ignore[union-attr]
