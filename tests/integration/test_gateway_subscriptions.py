"""Subscriptions through the real gateway process (2 workers, 2 library threads each, a 2 s consumer
lease) on loopback against the real HBase, driven by httpx (bodies checked against CDAP's own
schemas) and by ``GatewayClient`` side by side with the direct consumer."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.errors import SubscriptionBusy, TmsError
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.rest import codec as rest

from ..gateway_server import GatewayProcess, gateway_env, module_gateway, running_gateway
from ..waiting import wait_for
from .test_gateway import AVRO, JSON, Wire, assert_error, topic_url

LEASE = 6.0  # consumer_lease of this module's gateway: the longest a loaded machine stalls a client between requests
CONSUMER = "tms-consumer"


MAX_WAIT = 3600.0  # the longest long-poll: one that waited out its wait would outlast LIVENESS
LIVENESS = 300.0  # what comes soon (a long-poll's answer, a publish, a shutdown) comes within this at any load
gateway = module_gateway(
    f"workers = 2\nthreads = 2\nconsumer_lease = {LEASE}\nmax_poll_messages = 50\nmax_wait = {MAX_WAIT}\n"
)


@pytest.fixture
def topic(direct: MessagingClient) -> TopicId:
    """A topic of this test's own holding five messages, a..e."""
    t = TopicId(f"n{uuid.uuid4().hex[:10]}", "orders")
    direct.create_topic(t)
    direct.publish(t, [b"a", b"b", b"c"])
    direct.publish(t, [b"d", b"e"])
    return t


@pytest.fixture(params=[AVRO, JSON], ids=["avro", "json"])
def wire(request: pytest.FixtureRequest) -> Wire:
    return Wire(request.param)


def sub_url(t: TopicId, name: str = "", action: str = "") -> str:
    return topic_url(t.namespace, t.topic, "subscriptions") + "".join(f"/{p}" for p in (name, action) if p)


def messages(
    http: httpx.Client, wire: Wire, t: TopicId, name: str, session: str | None, **query: object
) -> tuple[list[bytes], str]:
    """One ``GET .../messages`` in ``wire``'s media type: the payloads and the session to go on with."""
    headers = {"Accept": wire.media} | ({"TMS-Consumer": session} if session else {})
    response = http.get(sub_url(t, name, "messages"), params=query, headers=headers)
    got = [payload for _, payload in wire.messages(response)]
    return got, response.headers[CONSUMER]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- the endpoints -------------------------------------------------------------------------------


def test_subscription_endpoints(http: httpx.Client, wire: Wire, topic: TopicId, direct: MessagingClient) -> None:
    assert http.put(sub_url(topic, "svc"), json={"start": "earliest"}).status_code == 200
    assert http.put(sub_url(topic, "late"), json={"start": "latest"}).status_code == 200
    assert_error(http.put(sub_url(topic, "svc"), json={"start": "earliest"}), 409, "SubscriptionAlreadyExists")
    assert [s["name"] for s in http.get(sub_url(topic)).json()] == ["late", "svc"]
    state = http.get(sub_url(topic, "svc")).json()
    assert (state["position"], state["owner"], state["lag"]["messages"]) == (None, None, 5)

    got, session = messages(http, wire, topic, "svc", None, max=2)
    assert got == [b"a", b"b"]
    assert_error(http.get(sub_url(topic, "svc", "messages")), 409, "SubscriptionBusy")  # one consumer at a time
    got, session = messages(http, wire, topic, "svc", session, max=10)
    assert got == [b"c", b"d", b"e"]
    ids = [m.id for m in direct.fetch(topic)]
    committed = http.post(sub_url(topic, "svc", "commit"), headers={"TMS-Consumer": session}, json={"id": b64(ids[3])})
    assert committed.status_code == 200, committed.text
    assert committed.json()["committed"] == b64(ids[3])
    state = http.get(sub_url(topic, "svc")).json()
    assert (state["position"], state["lag"]["messages"]) == (b64(ids[3]), 1)
    assert state["owner"].startswith("gateway:anonymous:")
    assert direct.get_subscription(topic, "svc").position == ids[3]
    assert http.delete(sub_url(topic, "svc", "consumer"), headers={"TMS-Consumer": session}).status_code == 200
    assert http.get(sub_url(topic, "svc")).json()["owner"] is None

    stats = http.get(topic_url(topic.namespace, topic.topic, "stats")).json()
    assert (stats["name"], stats["messages"], stats["published"]) == ("orders", 5, 5)
    assert {s["name"]: s["lag"]["messages"] for s in stats["subscriptions"]} == {"late": 0, "svc": 1}

    reset = http.post(sub_url(topic, "svc", "reset"), json={"start": b64(ids[1])})
    assert reset.status_code == 200 and reset.json()["position"] == b64(ids[0])
    assert messages(http, wire, topic, "svc", None, max=1)[0] == [b"b"]
    assert_error(http.delete(sub_url(topic, "svc")), 409, "SubscriptionBusy")  # its consumer's lease is live
    assert http.delete(sub_url(topic, "svc"), params={"force": "true"}).status_code == 200
    assert_error(http.get(sub_url(topic, "svc")), 404, "SubscriptionNotFound")
    assert [s.name for s in direct.list_subscriptions(topic)] == ["late"]


def test_messages_in_both_encodings_carry_cdaps_message_array(http: httpx.Client, topic: TopicId) -> None:
    """The same messages as ``poll`` gives, in the media type ``Accept`` asks for (JSON by default)."""
    http.put(sub_url(topic, "svc"))
    response = http.get(sub_url(topic, "svc", "messages"), params={"max": 5})
    assert response.headers["content-type"] == JSON  # no Accept: JSON, as curl gets it
    as_json = Wire(JSON).messages(response)
    http.post(sub_url(topic, "svc", "reset"), params={"force": "true"}, json={"start": "earliest"})
    avro = Wire(AVRO).messages(http.get(sub_url(topic, "svc", "messages"), params={"max": 5}, headers={"Accept": AVRO}))
    polled = Wire(JSON).messages(http.post(topic_url(topic.namespace, topic.topic, "poll"), json={}))
    assert as_json == avro == polled


def test_unknown_names_and_bad_requests(http: httpx.Client, topic: TopicId) -> None:
    http.put(sub_url(topic, "svc"))
    missing = TopicId(topic.namespace, "missing")
    for response in (
        http.get(sub_url(topic, "nope")),
        http.get(sub_url(topic, "nope", "messages")),
        http.post(sub_url(topic, "nope", "consumer")),
        http.post(sub_url(topic, "nope", "reset"), json={"start": "earliest"}),
        http.delete(sub_url(topic, "nope")),
    ):
        assert_error(response, 404, "SubscriptionNotFound")
    assert_error(http.get(sub_url(missing, "svc")), 404, "TopicNotFound")
    assert_error(http.get(topic_url(missing.namespace, missing.topic, "stats")), 404, "TopicNotFound")
    for response in (
        http.get(sub_url(topic, "svc", "messages"), params={"max": 0}),
        http.get(sub_url(topic, "svc", "messages"), params={"wait": -1}),
        http.get(sub_url(topic, "svc", "messages"), params={"wait": "soon"}),
        http.get(sub_url(topic, "svc", "messages"), headers={"TMS-Consumer": "no-separator"}),
        http.post(sub_url(topic, "svc", "commit")),  # which session?
        http.put(sub_url(topic, "bad.name")),
        http.put(sub_url(topic, "other"), json={"start": "yesterday"}),
        http.post(sub_url(topic, "svc", "reset"), json={"start": 1, "extra": 2}),
        http.post(sub_url(topic, "svc", "reset"), json={"start": 10**27}),  # past any Avro long
        http.put(sub_url(topic, "other"), json={"start": 10**27}),
        http.put(sub_url(topic, "other"), content=b"[" * 20_000 + b"]" * 20_000),  # nested too deep
        http.delete(sub_url(topic, "svc", "consumer")),  # which session? (or ?force=true)
    ):
        assert_error(response, 400, "InvalidArgument")
    # a session that was never this subscription's, or that another principal presents, is not resumed
    assert_error(http.get(sub_url(topic, "svc", "messages"), headers={"TMS-Consumer": "forged~"}), 409, "LeaseLost")
    assert http.get(sub_url(topic, "svc")).json()["position"] is None  # nothing changed


# -- consumer sessions ---------------------------------------------------------------------------


def test_a_caller_who_lost_the_session_header_can_release_the_lease(http: httpx.Client, topic: TopicId) -> None:
    """curl without keeping the TMS-Consumer header: the second call is busy, says how to go on, and
    DELETE .../consumer?force=true (no header) releases the lease at once."""
    http.put(sub_url(topic, "svc"))
    first = http.get(sub_url(topic, "svc", "messages"), params={"max": 2}, headers={"Accept": JSON})
    assert [base64.b64decode(m["payload"]) for m in first.json()] == [b"a", b"b"]
    busy = http.get(sub_url(topic, "svc", "messages"), headers={"Accept": JSON})
    assert_error(busy, 409, "SubscriptionBusy")
    assert "TMS-Consumer" in busy.text and "consumer?force=true" in busy.text
    assert_error(http.delete(sub_url(topic, "svc", "consumer")), 400, "InvalidArgument")
    released = http.delete(sub_url(topic, "svc", "consumer"), params={"force": "true"})
    assert released.status_code == 200, released.text
    assert http.get(sub_url(topic, "svc")).json()["owner"] is None
    again = http.get(sub_url(topic, "svc", "messages"), headers={"Accept": JSON})  # no wait for the lease
    assert [base64.b64decode(m["payload"]) for m in again.json()] == [b"a", b"b", b"c", b"d", b"e"]  # not committed
    lost = http.get(sub_url(topic, "svc", "messages"), headers={CONSUMER: first.headers[CONSUMER]})
    assert_error(lost, 409, "LeaseLost")  # the released session is over
    assert http.delete(sub_url(topic, "svc", "consumer"), params={"force": "true"}).status_code == 200
    assert http.delete(sub_url(topic, "svc", "consumer"), params={"force": "true"}).status_code == 200  # idempotent


@pytest.fixture
def two_workers(hbase_address: str, module_prefix: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway of this test's own with 2 workers (one of them is stopped) on the module's installation, with
    a lease long enough to outlive a worker's shutdown on a loaded machine."""
    config = "workers = 2\nthreads = 2\nconsumer_lease = 60\n"
    with running_gateway(hbase_address, module_prefix, tmp_path, config) as process:
        yield process


def _local_port(response: httpx.Response) -> int:
    """The client-side port of the connection that carried ``response`` (one connection: one worker)."""
    return response.extensions["network_stream"].get_extra_info("client_addr")[1]


def _stop_worker(gateway: GatewayProcess, pid: int, timeout: float = 60.0) -> None:
    """SIGTERM one worker of ``gateway`` (a child of its process) and wait until it has exited."""
    stat = Path(f"/proc/{pid}/stat")
    assert int(stat.read_text().rsplit(")", 1)[1].split()[1]) == gateway.proc.pid, f"{pid} is not a gateway worker"
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":  # exited, not reaped yet
                return
        except FileNotFoundError:
            return
        assert time.monotonic() < deadline, f"worker {pid} did not stop within {timeout}s:\n{gateway.log()}"
        time.sleep(0.05)


def test_a_session_goes_on_on_another_worker(two_workers: GatewayProcess, topic: TopicId) -> None:
    """A session begun on one worker goes on on another: the worker that served its first calls (and keeps its
    consumer parked) is stopped, so every later call is served by a worker that never saw the session. In order,
    each message once. (Which worker the kernel hands a new connection to is not promised, so it is not relied on.)"""
    url = two_workers.url + sub_url(topic, "svc", "messages")
    with httpx.Client(timeout=60) as first:  # one keep-alive connection, so one worker serves all its calls
        assert first.put(two_workers.url + sub_url(topic, "svc")).is_success
        session, got, ports = None, [], set()
        for _ in range(2):
            response = first.get(url, params={"max": 1}, headers={"TMS-Consumer": session} if session else {})
            assert response.status_code == 200, response.text
            got += [base64.b64decode(m["payload"]) for m in response.json()]
            session = response.headers[CONSUMER]
            ports.add(_local_port(response))
        health = first.get(two_workers.url + "/health")
        ports.add(_local_port(health))
        assert len(ports) == 1, "the calls should have shared one connection"
        served = health.json()["worker"]
    assert got == [b"a", b"b"]
    _stop_worker(two_workers, served)

    while len(got) < 5:
        with httpx.Client(timeout=60) as other:  # a new connection: the stopped worker cannot take it
            response = other.get(url, params={"max": 1}, headers={"TMS-Consumer": session})
            assert response.status_code == 200, response.text
            got += [base64.b64decode(m["payload"]) for m in response.json()]
            session = response.headers[CONSUMER]
            health = other.get(two_workers.url + "/health")
            assert _local_port(health) == _local_port(response)
            assert health.json()["worker"] != served
    assert got == [b"a", b"b", b"c", b"d", b"e"]


def test_long_poll_returns_as_soon_as_a_message_is_published(
    http: httpx.Client, wire: Wire, topic: TopicId, direct: MessagingClient
) -> None:
    http.put(sub_url(topic, "svc"), json={"start": "latest"})
    started = time.monotonic()
    assert messages(http, wire, topic, "svc", None, wait=1)[0] == []  # nothing new: empty after the wait
    assert time.monotonic() - started >= 1.0
    http.post(sub_url(topic, "svc", "reset"), params={"force": "true"}, json={"start": "latest"})

    answer: dict[str, object] = {}

    def long_poll() -> None:  # an hour's wait: only the publish can end it within LIVENESS
        answer["got"] = messages(http, wire, topic, "svc", None, wait=MAX_WAIT, max=10)[0]

    poller = threading.Thread(target=long_poll, daemon=True)
    poller.start()
    wait_for(lambda: direct.get_subscription(topic, "svc").owner is not None, "the long-poll's consumer", 30)
    direct.publish(topic, [b"now"])
    poller.join(LIVENESS)
    assert answer.get("got") == [b"now"], "the long-poll did not answer when the message came"


def test_long_polls_do_not_starve_publishes(http: httpx.Client, gateway: GatewayProcess, topic: TopicId) -> None:
    """More long-polls than the gateway has library threads (2 per worker) wait while publishes go on
    (a long-poll holding a library thread for its whole wait, an hour here, would hold these publishes past
    the HTTP client's 60 s timeout); the publishes then end the long-polls."""
    names = [f"s{i}" for i in range(6)]
    for name in names:
        http.put(sub_url(topic, name), json={"start": "latest"})
    polls = [
        threading.Thread(
            target=httpx.get,
            args=(gateway.url + sub_url(topic, n, "messages"),),
            kwargs={"params": {"wait": MAX_WAIT}, "timeout": LIVENESS},
            daemon=True,
        )
        for n in names
    ]
    for poll in polls:
        poll.start()
    body = {"messages": [b64(b"x")]}
    for _ in range(4):
        assert http.post(topic_url(topic.namespace, topic.topic, "publish"), json=body).status_code == 200
    for poll in polls:
        poll.join(LIVENESS)
    assert not any(poll.is_alive() for poll in polls), "a long-poll did not answer when the messages came"


def test_commit_then_a_new_consumer_resumes_after_the_commit(http: httpx.Client, wire: Wire, topic: TopicId) -> None:
    http.put(sub_url(topic, "svc"))
    got, session = messages(http, wire, topic, "svc", None, max=3)
    assert got == [b"a", b"b", b"c"]
    commit = http.post(sub_url(topic, "svc", "commit"), headers={"TMS-Consumer": session})  # all delivered
    assert commit.status_code == 200
    assert http.delete(sub_url(topic, "svc", "consumer"), headers={"TMS-Consumer": session}).status_code == 200
    assert messages(http, wire, topic, "svc", None, max=10)[0] == [b"d", b"e"]


def test_pages_read_ahead_deliver_each_message_once_in_order_whatever_their_size(
    http: httpx.Client, wire: Wire, topic: TopicId, direct: MessagingClient
) -> None:
    """The worker reads a session's next batch while its client reads a page: pages that change size, an
    older session header sent again, and messages published between pages still come in order, each once
    per session call (an older header replays from its own last message: at-least-once)."""
    direct.publish(topic, [b"f", b"g", b"h"])
    http.put(sub_url(topic, "svc"))
    got, session = messages(http, wire, topic, "svc", None, max=1)
    older = session
    for size in (3, 2, 1):
        page, session = messages(http, wire, topic, "svc", session, max=size)
        got += page
    assert got == [b"a", b"b", b"c", b"d", b"e", b"f", b"g"]
    replay, _ = messages(http, wire, topic, "svc", older, max=3)  # the header of the first page, sent again
    assert replay == [b"b", b"c", b"d"]
    got, session = [], older  # go on from the first page again: what was read ahead for the others is not lost
    direct.publish(topic, [b"i"])
    deadline = time.monotonic() + 30
    while len(got) < 8 and time.monotonic() < deadline:
        page, session = messages(http, wire, topic, "svc", session, max=2, wait=1)
        got += page
    assert got == [b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"i"]


def test_uncommitted_messages_are_delivered_again_after_the_consumer_went_away(
    http: httpx.Client, wire: Wire, topic: TopicId
) -> None:
    """A client that crashed before committing: its session's lease runs out, the next consumer gets
    everything after the committed mark again (at-least-once); the old session is gone."""
    http.put(sub_url(topic, "svc"))
    got, session = messages(http, wire, topic, "svc", None, max=2)
    http.post(sub_url(topic, "svc", "commit"), headers={"TMS-Consumer": session})
    got, crashed = messages(http, wire, topic, "svc", session, max=2)
    assert got == [b"c", b"d"]  # delivered, never committed: the client is gone
    assert_error(http.get(sub_url(topic, "svc", "messages")), 409, "SubscriptionBusy")
    answers: list[httpx.Response] = []

    def taken_over() -> bool:
        answers.append(http.get(sub_url(topic, "svc", "messages"), params={"max": 10}, headers={"Accept": wire.media}))
        return answers[-1].status_code != 409

    wait_for(taken_over, "the crashed session's lease to run out", 10 * LEASE)
    assert [payload for _, payload in wire.messages(answers[-1])] == [b"c", b"d", b"e"]
    assert_error(http.get(sub_url(topic, "svc", "messages"), headers={"TMS-Consumer": crashed}), 409, "LeaseLost")


def test_redelivery_after_a_release_without_commit(http: httpx.Client, wire: Wire, topic: TopicId) -> None:
    http.put(sub_url(topic, "svc"))
    got, session = messages(http, wire, topic, "svc", None, max=2)
    assert got == [b"a", b"b"]
    assert http.delete(sub_url(topic, "svc", "consumer"), headers={"TMS-Consumer": session}).status_code == 200
    assert messages(http, wire, topic, "svc", None, max=10)[0] == [b"a", b"b", b"c", b"d", b"e"]


def test_sigterm_ends_a_long_poll_at_once(
    direct: MessagingClient, hbase_address: str, module_prefix: str, topic: TopicId, tmp_path: Path
) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(f"max_wait = {MAX_WAIT}\n")  # a long-poll that kept the shutdown waiting would keep it an hour
    env = gateway_env(hbase_address, module_prefix)
    gateway = GatewayProcess(env, tmp_path / "gw.log", "--config", str(config)).start()
    direct.create_subscription(topic, "svc", start="latest")
    answer: dict[str, object] = {}

    def long_poll() -> None:
        url = gateway.url + sub_url(topic, "svc", "messages")
        answer["response"] = httpx.get(url, params={"wait": MAX_WAIT}, timeout=LIVENESS)

    poller = threading.Thread(target=long_poll, daemon=True)
    poller.start()
    wait_for(lambda: direct.get_subscription(topic, "svc").owner is not None, "the long-poll's consumer", 30)
    assert gateway.stop(timeout=60) == 0, gateway.log()  # one SIGTERM: a graceful shutdown, not after the hour
    poller.join(LIVENESS)
    response = answer.get("response")
    assert isinstance(response, httpx.Response) and response.status_code == 200 and response.json() == []


# -- the Python client ---------------------------------------------------------------------------


def consuming_transcript(client: MessagingClient | GatewayClient, t: TopicId) -> dict[str, object]:
    """One consuming program against ``client``: what each step returned or raised (the error's class)."""
    out: dict[str, object] = {}

    def step(name: str, call: Callable[[], object]) -> None:
        try:
            out[name] = call()
        except TmsError as error:
            out[name] = type(error).__name__

    step("create", lambda: client.create_subscription(t, "svc").position)
    step("create again", lambda: client.create_subscription(t, "svc"))
    step("create bad start", lambda: client.create_subscription(t, "x", start="soon"))
    step("get missing", lambda: client.get_subscription(t, "nope"))
    step("consumer missing", lambda: client.consumer(t, "nope"))
    with client.consumer(t, "svc", max_wait_seconds=0.5) as consumer:
        step("busy", lambda: client.consumer(t, "svc"))
        out["poll"] = [m.payload for m in consumer.poll(max_messages=2, timeout_seconds=1.0)]
        consumer.commit()
        out["committed"] = consumer.committed
        out["iterate"] = [m.payload for m in consumer]
        out["empty"] = consumer.poll(timeout_seconds=0.5)
        step("commit undelivered", lambda: consumer.commit(b"\xff" * 20))
    out["lag"] = client.lag(t, "svc").messages
    with client.consumer(t, "svc") as consumer:  # the uncommitted ones again
        out["again"] = [m.payload for m in consumer.poll(max_messages=10, timeout_seconds=1.0)]
        first = consumer.delivered
    step("reset", lambda: client.reset_subscription(t, "svc", start_time_ms=0).position)
    step("reset both", lambda: client.reset_subscription(t, "svc", b"x", 5))
    subs = client.list_subscriptions(t)
    out["list"] = [(s.name, s.position, s.owner) for s in subs]
    stats = client.topic_stats(t, windows=[60])
    out["stats"] = (
        stats.messages,
        stats.published,
        list(stats.rates),
        [(n, lag.messages) for n, _, lag in stats.subscriptions],
    )
    step("delete", lambda: client.delete_subscription(t, "svc"))
    step("delete again", lambda: client.delete_subscription(t, "svc"))
    out["first again"] = first is not None
    return out


@pytest.mark.parametrize("media", [AVRO, JSON], ids=["avro", "json"])
def test_gateway_consumer_behaves_as_the_direct_consumer(
    gateway: GatewayProcess, direct: MessagingClient, topic: TopicId, media: str
) -> None:
    """The same program on the same data: one topic, read once directly and once through the gateway."""
    expected = consuming_transcript(direct, topic)
    with GatewayClient(gateway.url, media=media, timeout_seconds=60) as client:
        assert consuming_transcript(client, topic) == expected
    assert expected["poll"] == [b"a", b"b"] and expected["iterate"] == [b"c", b"d", b"e"]
    assert (expected["empty"], expected["lag"], expected["again"]) == ([], 3, [b"c", b"d", b"e"])
    assert [expected[k] for k in ("create again", "busy", "get missing", "consumer missing", "commit undelivered")] == [
        "SubscriptionAlreadyExists",
        "SubscriptionBusy",
        "SubscriptionNotFound",
        "SubscriptionNotFound",
        "InvalidArgument",
    ]
    assert expected["delete again"] == "SubscriptionNotFound"


# -- a commit with the next page ------------------------------------------------------------------


def test_a_page_asked_for_with_commit_stores_the_last_delivered_message_first(
    http: httpx.Client, wire: Wire, topic: TopicId, direct: MessagingClient
) -> None:
    """``?commit=true``: one call commits what the session was delivered and answers the next page; its
    ``TMS-Committed`` header is the stored mark. Without the session's header it is refused and changes
    nothing; a session whose lease was taken over gets LeaseLost and no page."""
    http.put(sub_url(topic, "svc"))
    assert_error(http.get(sub_url(topic, "svc", "messages"), params={"commit": "true"}), 400, "InvalidArgument")
    assert direct.get_subscription(topic, "svc").owner is None  # refused before any session began
    headers = {"Accept": wire.media}
    first = http.get(sub_url(topic, "svc", "messages"), params={"max": 2}, headers=headers)
    ids = [message_id for message_id, _ in wire.messages(first)]
    assert rest.COMMITTED_HEADER.lower() not in first.headers  # no commit asked for
    session = first.headers[CONSUMER]
    second = http.get(
        sub_url(topic, "svc", "messages"),
        params={"max": 2, "commit": "true"},
        headers=headers | {"TMS-Consumer": session},
    )
    assert [payload for _, payload in wire.messages(second)] == [b"c", b"d"]
    assert second.headers[rest.COMMITTED_HEADER] == ids[-1].hex()
    assert direct.get_subscription(topic, "svc").position == ids[-1]  # stored before the answer
    direct.release_subscription(topic, "svc")  # taken away: the session's next call finds its lease gone
    gone = http.get(
        sub_url(topic, "svc", "messages"),
        params={"max": 2, "commit": "true"},
        headers=headers | {"TMS-Consumer": second.headers[CONSUMER]},
    )
    assert_error(gone, 409, "LeaseLost")
    assert direct.get_subscription(topic, "svc").position == ids[-1]  # c and d were not committed
    assert messages(http, wire, topic, "svc", None, max=10)[0] == [b"c", b"d", b"e"]


COMMITTING_CONSUMER = """
import sys
from tms_hbase.gateway_client.http import GatewayClient
client = GatewayClient(sys.argv[1], timeout_seconds=60)
consumer = client.consumer(sys.argv[2], "svc")
first = consumer.poll(2, 5.0)
second = consumer.poll(2, 5.0, commit=True)
print(b"".join(m.payload for m in first + second).decode(), consumer.committed.hex(), flush=True)
sys.stdin.read()  # killed here: after a page asked for with the commit of the one before, before the next call
"""


def test_a_consumer_killed_after_a_page_with_commit_gets_that_page_again(
    gateway: GatewayProcess, direct: MessagingClient, topic: TopicId
) -> None:
    """A process reads a page with ``poll(commit=True)`` and is killed before its next call: the page
    before is committed, the page it was killed with is not (its commit would have gone with the next
    call), so the next consumer gets it again once the lease runs out: at-least-once."""
    direct.create_subscription(topic, "svc")
    process = subprocess.Popen(
        [sys.executable, "-c", COMMITTING_CONSUMER, gateway.url, str(topic)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().split()
    finally:
        process.kill()
        process.wait(30)
    committed = bytes.fromhex(line[1])
    assert line[0] == "abcd" and direct.get_subscription(topic, "svc").position == committed
    with GatewayClient(gateway.url, timeout_seconds=60) as client:

        def taken_over() -> list[bytes] | None:
            try:
                with client.consumer(topic, "svc") as consumer:
                    return [m.payload for m in consumer.poll(10, 1.0)]
            except SubscriptionBusy:
                return None

        assert wait_for(taken_over, "the killed consumer's lease to run out", 10 * LEASE) == [b"c", b"d", b"e"]


def committing_transcript(client: MessagingClient | GatewayClient, t: TopicId) -> dict[str, object]:
    """``poll(commit=True)`` in one program: the mark each step leaves, and what a new consumer gets."""
    out: dict[str, object] = {}
    client.create_subscription(t, "svc")
    with client.consumer(t, "svc") as consumer:
        out["nothing delivered"] = ([m.payload for m in consumer.poll(2, 1.0, commit=True)], consumer.committed)
        first = consumer.delivered
        out["second"] = ([m.payload for m in consumer.poll(2, 1.0, commit=True)], consumer.committed == first)
        out["stored"] = client.get_subscription(t, "svc").position == first
        second = consumer.delivered
        out["third"] = ([m.payload for m in consumer.poll(10, 0.5, commit=True)], consumer.committed == second)
    with client.consumer(t, "svc") as consumer:
        out["again"] = [m.payload for m in consumer.poll(10, 1.0)]
    client.delete_subscription(t, "svc")
    return out


@pytest.mark.parametrize("media", [AVRO, JSON], ids=["avro", "json"])
def test_poll_with_commit_through_the_gateway_as_direct(
    gateway: GatewayProcess, direct: MessagingClient, topic: TopicId, media: str
) -> None:
    expected = committing_transcript(direct, topic)
    assert expected == {
        "nothing delivered": ([b"a", b"b"], None),
        "second": ([b"c", b"d"], True),
        "stored": True,
        "third": ([b"e"], True),  # d committed with it, e not
        "again": [b"e"],
    }
    with GatewayClient(gateway.url, media=media, timeout_seconds=60) as client:
        assert committing_transcript(client, topic) == expected
