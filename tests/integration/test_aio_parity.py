"""The asyncio interface, ``tms_hbase.aio.api.AsyncMessagingService``: the scenarios of
``test_client_parity.py`` run, parametrized over the kinds of asyncio client, on the real HBase and a real
``tms-gateway`` process; then deadlines and cancellation against a hung, a trickling and a resetting gateway
(a TCP proxy in front of the real one), and a check that no call blocks the event loop.

Every scenario runs in its own event loop in asyncio's debug mode, which also reports coroutines never
awaited and calls from the wrong thread.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tms_hbase import MessagingClient, RollbackDetail, TopicId
from tms_hbase.aio import AsyncMessagingClient
from tms_hbase.aio.api import AsyncMessagingService
from tms_hbase.errors import (
    HBaseUnavailable,
    InvalidArgument,
    PublishOutcomeUnknown,
    SubscriptionAlreadyExists,
    SubscriptionBusy,
    SubscriptionNotFound,
    TmsError,
    TopicAlreadyExists,
    TopicNotFound,
)
from tms_hbase.gateway_client.aio import AsyncGatewayClient
from tms_hbase.model.message_id import MessageId
from tms_hbase.rest import codec as rest
from tms_hbase.tx import Transaction, write_pointer_now

from ..gateway_server import GatewayProcess, module_gateway
from ..tcp_proxy import TcpProxy
from .test_client_parity import BAD_INPUT, CHECKED_BY_THE_CLIENT

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Installation:
    """What a client kind needs to reach the module's installation."""

    hbase_address: str
    prefix: str
    gateway_url: str


# The asyncio clients under test (the gateway's in both body encodings, and the direct one over HBase), each
# made for the module's installation inside the test's event loop.
KINDS: dict[str, Callable[[Installation], AsyncMessagingService]] = {
    "gateway": lambda at: AsyncGatewayClient(at.gateway_url, timeout_seconds=60),
    "gateway-json": lambda at: AsyncGatewayClient(at.gateway_url, media=rest.JSON, timeout_seconds=60),
    "direct": lambda at: AsyncMessagingClient(at.hbase_address, at.prefix, timeout_seconds=60),
}

Scenario = Callable[[AsyncMessagingService], Coroutine[Any, Any, None]]


gateway = module_gateway("workers = 1\n")


@pytest.fixture(scope="module")
def installation(hbase_address: str, module_prefix: str, gateway: GatewayProcess) -> Installation:
    return Installation(hbase_address, module_prefix, gateway.url)


@pytest.fixture(params=sorted(KINDS))
def run(request: pytest.FixtureRequest, installation: Installation) -> Callable[[Scenario], None]:
    """Runs a scenario with a new client of the parametrized kind, in a new event loop (debug mode)."""
    make = KINDS[request.param]

    def run_scenario(scenario: Scenario) -> None:
        async def main() -> None:
            async with make(installation) as service:
                await scenario(service)

        asyncio.run(main(), debug=True)

    return run_scenario


@pytest.fixture
def ns() -> str:
    return f"a{uuid.uuid4().hex[:10]}"


def payloads(messages: list[Any]) -> list[bytes]:
    return [m.payload for m in messages]


async def collect(messages: AsyncIterator[Any]) -> list[Any]:
    return [m async for m in messages]


def test_the_gateway_client_declares_the_interface() -> None:
    """Declared as its base, the type checker (``make lint``) holds it to the interface's signatures."""
    assert AsyncMessagingService in AsyncGatewayClient.__mro__


# -- topics -----------------------------------------------------------------------------------------


def test_topic_lifecycle(run: Callable[[Scenario], None], ns: str) -> None:
    async def scenario(service: AsyncMessagingService) -> None:
        t = TopicId(ns, "orders")
        created = await service.create_topic(t, {"ttl": "3600", "owner": "me"})
        assert (created.topic, created.ttl, created.properties["owner"]) == (t, 3600, "me")
        with pytest.raises(TopicAlreadyExists):
            await service.create_topic(t)
        assert await service.create_topic(t, {"ttl": "60"}, exist_ok=True) == created
        assert await service.get_topic(t) == created
        updated = await service.update_topic(t, {"ttl": "600"})
        assert (updated.ttl, updated.generation) == (600, created.generation)
        await service.create_topic(f"{ns}:audit")
        assert await service.list_topics(ns) == [TopicId(ns, "audit"), t]
        assert [m.ttl for m in await service.list_topic_metadata(ns)][1] == 600
        await service.delete_topic(t)
        with pytest.raises(TopicNotFound):
            await service.get_topic(t)
        with pytest.raises(TopicNotFound):
            await service.delete_topic(t)
        with pytest.raises(TopicNotFound):
            await service.update_topic(t, {"ttl": "60"})
        assert await service.list_topics(ns) == [TopicId(ns, "audit")]

    run(scenario)


# -- publishing and fetching --------------------------------------------------------------------------


def test_publish_and_fetch_from_an_id_a_time_and_with_a_limit(run: Callable[[Scenario], None], ns: str) -> None:
    async def scenario(service: AsyncMessagingService) -> None:
        t = TopicId(ns, "events")
        await service.create_topic(t)
        first = await service.publish(t, [b"a", b"b"])
        before_c = int(time.time() * 1000) - 1
        await service.publish(t, [b"c"])
        last = await service.publish(t, [b"d", b"e"], ttl_seconds=3600)
        everything = await collect(service.fetch(t))
        assert payloads(everything) == [b"a", b"b", b"c", b"d", b"e"]
        assert (first.topic, first.count, first.rollback) == (t, 2, None)
        assert first.message_ids == [m.id for m in everything[:2]] and last.last_id == everything[-1].id
        assert [m.id for m in everything] == sorted(m.id for m in everything)
        assert all(m.publish_time > 0 for m in everything)
        second = everything[1].id
        assert payloads(await collect(service.fetch(t, start_message=second))) == [b"b", b"c", b"d", b"e"]
        assert payloads(await collect(service.fetch(t, start_message=second, inclusive=False, limit=2))) == [
            b"c",
            b"d",
        ]
        since = payloads(await collect(service.fetch(t, start_time_ms=before_c)))
        assert since[-3:] == [b"c", b"d", b"e"] and set(since) <= {b"a", b"b", b"c", b"d", b"e"}
        later = int(time.time() * 1000) + 3_600_000
        assert payloads(await collect(service.fetch(t, start_time_ms=later))) == []
        assert payloads(await collect(service.fetch(t, limit=1))) == [b"a"]

    run(scenario)


def test_many_publishes_in_flight_at_once_all_land_in_order_of_their_positions(
    run: Callable[[Scenario], None], ns: str
) -> None:
    async def scenario(service: AsyncMessagingService) -> None:
        t = TopicId(ns, "busy")
        await service.create_topic(t)
        results = await asyncio.gather(*(service.publish(t, [b"%d" % i]) for i in range(64)))
        fetched = await collect(service.fetch(t))
        assert sorted(payloads(fetched)) == sorted(b"%d" % i for i in range(64))
        by_id = {m.id: m.payload for m in fetched}
        assert [by_id[r.first_id] for r in results] == [b"%d" % i for i in range(64)]  # each result names its own

    run(scenario)


def test_a_fetch_sees_what_the_blocking_client_published(
    run: Callable[[Scenario], None], direct: MessagingClient, ns: str
) -> None:
    t = TopicId(ns, "both")
    direct.create_topic(t)
    direct.publish(t, [b"blocking"])

    async def scenario(service: AsyncMessagingService) -> None:
        await service.publish(t, [b"asyncio"])
        seen = [(m.id, m.payload, m.publish_time) for m in await collect(service.fetch(t))]
        assert seen == [(m.id, m.payload, m.publish_time) for m in direct.fetch(t)]
        assert [p for _, p, _ in seen] == [b"blocking", b"asyncio"]

    run(scenario)


def test_transactional_publish_store_and_rollback(run: Callable[[Scenario], None], ns: str) -> None:
    async def scenario(service: AsyncMessagingService) -> None:
        t = TopicId(ns, "tx")
        await service.create_topic(t)
        pointer = write_pointer_now()
        handle = await service.publish(t, [b"in tx"], tx_write_pointer=pointer)
        assert isinstance(handle.rollback, RollbackDetail) and handle.rollback.transaction_write_pointer == pointer
        await service.store(t, [b"s1", b"s2"], tx_write_pointer=pointer + 1)
        pointer_row = await service.publish(t, [], tx_write_pointer=pointer + 1)
        assert (pointer_row.count, pointer_row.message_ids, pointer_row.first_id) == (0, [], None)
        fetched = await collect(service.fetch(t))
        assert payloads(fetched) == [b"in tx", b"s1", b"s2"]
        assert [m.id for m in fetched][:1] == handle.message_ids
        assert {MessageId.decode(m.id).position for m in fetched[1:]} == {pointer_row.position}
        await service.rollback(t, handle)
        reader = Transaction(
            read_pointer=pointer + 10,
            tx_id=pointer + 11,
            invalids=[],
            in_progress=[],
            first_short_in_progress=2**63 - 1,
        )
        assert payloads(await collect(service.fetch(t, transaction=reader))) == [b"s1", b"s2"]
        in_progress = Transaction(
            read_pointer=pointer + 10,
            tx_id=pointer + 11,
            invalids=[],
            in_progress=[pointer + 1],
            first_short_in_progress=pointer + 1,
        )
        assert payloads(await collect(service.fetch(t, transaction=in_progress))) == []

    run(scenario)


# -- subscriptions, consumers, lag and statistics ------------------------------------------------------


def test_subscription_consumer_commit_lag_and_stats(run: Callable[[Scenario], None], ns: str) -> None:
    async def scenario(service: AsyncMessagingService) -> None:
        t = TopicId(ns, "work")
        await service.create_topic(t)
        await service.publish(t, [b"1", b"2", b"3"])
        created = await service.create_subscription(t, "svc")
        assert (created.name, created.position) == ("svc", None)
        with pytest.raises(SubscriptionAlreadyExists):
            await service.create_subscription(t, "svc")
        assert (await service.create_subscription(t, "svc", "latest", exist_ok=True)).position is None
        assert (await service.lag(t, "svc")).messages == 3
        async with service.consumer(t, "svc", max_wait_seconds=0.5) as consumer:
            with pytest.raises(SubscriptionBusy):
                async with service.consumer(t, "svc", max_wait_seconds=0.5):
                    pass
            assert payloads(await consumer.poll(max_messages=2, timeout_seconds=5.0)) == [b"1", b"2"]
            await consumer.commit()
            assert consumer.committed == consumer.delivered
        assert (await service.lag(t, "svc")).messages == 1
        assert (await service.get_subscription(t, "svc")).position == consumer.committed
        stats = await service.topic_stats(t, windows=[60])
        assert (stats.messages, list(stats.rates)) == (3, [60])
        assert [(name, lag.messages) for name, _, lag in stats.subscriptions] == [("svc", 1)]
        async with service.consumer(t, "svc", max_wait_seconds=0.5) as consumer:  # the uncommitted one again
            assert payloads([m async for m in consumer]) == [b"3"]  # then 0.5 s without one: the end
            await consumer.commit()
        assert (await service.lag(t, "svc")).messages == 0
        assert (await service.reset_subscription(t, "svc", "earliest")).position is None
        assert (await service.lag(t, "svc")).messages == 3
        async with service.consumer(t, "svc", max_wait_seconds=0.5) as consumer:  # a commit with the next page
            first = await consumer.poll(max_messages=1, timeout_seconds=5.0)
            assert payloads(await consumer.poll(max_messages=1, timeout_seconds=5.0, commit=True)) == [b"2"]
            assert consumer.committed == first[0].id
        assert (await service.lag(t, "svc")).messages == 2
        await service.reset_subscription(t, "svc", start_time_ms=int(time.time() * 1000) + 60_000)
        assert (await service.lag(t, "svc")).messages == 0
        assert [s.name for s in await service.list_subscriptions(t)] == ["svc"]
        await service.delete_subscription(t, "svc")
        with pytest.raises(SubscriptionNotFound):
            await service.get_subscription(t, "svc")
        with pytest.raises(SubscriptionNotFound):
            await service.delete_subscription(t, "svc")

    run(scenario)


def test_release_takes_the_lease_from_whoever_holds_it(run: Callable[[Scenario], None], ns: str) -> None:
    async def scenario(service: AsyncMessagingService) -> None:
        t = TopicId(ns, "leased")
        await service.create_topic(t)
        await service.publish(t, [b"x"])
        await service.create_subscription(t, "svc")
        holder = service.consumer(t, "svc", max_wait_seconds=0.5)
        await holder.open()
        assert payloads(await holder.poll(timeout_seconds=5.0)) == [b"x"]
        assert (await service.get_subscription(t, "svc")).owner is not None
        released = await service.release_subscription(t, "svc")
        assert released.owner is None and released.position is None
        async with service.consumer(t, "svc", max_wait_seconds=0.5) as successor:
            assert payloads(await successor.poll(timeout_seconds=5.0)) == [b"x"]
        await holder.close()

    run(scenario)


def test_shared_subscription(run: Callable[[Scenario], None], ns: str) -> None:
    async def scenario(service: AsyncMessagingService) -> None:
        t = TopicId(ns, "queue")
        await service.create_topic(t)
        await service.publish(t, [b"j1", b"j2", b"j3", b"j4"])
        await service.create_subscription(t, "workers", shared=True, ack_timeout_seconds=30, max_deliveries=3)
        assert (await service.get_subscription(t, "workers")).shared is not None
        async with service.shared_consumer(t, "workers", max_wait_seconds=0.5) as worker:
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < 4 and time.monotonic() < deadline:
                got += await worker.receive(max_messages=4, timeout_seconds=2.0)
            assert sorted(d.payload for d in got) == [b"j1", b"j2", b"j3", b"j4"]
            assert sorted(worker.held) == sorted(d.id for d in got)
            assert sorted(m.id for m in await service.pending(t, "workers")) == sorted(d.id for d in got)
            await worker.ack(got[0])
            await worker.nack(got[1], delay_seconds=60)
            deadline_ms = await worker.extend(got[2], timeout_seconds=120)
            assert deadline_ms > got[2].deadline
            await worker.release(got[3])
            assert worker.held == [got[2].id]
            left = await service.pending(t, "workers", limit=5)
            assert {m.id for m in left} == {got[1].id, got[2].id, got[3].id}
            assert {m.id: m.owner for m in left}[got[1].id] is None
            assert (await service.lag(t, "workers")).messages == 3
        # closing gave back what it held: another consumer gets it (and the released one) at once
        async with service.shared_consumer(t, "workers", max_wait_seconds=0.5) as other:
            again = [d async for d in other]
            assert sorted(d.payload for d in again) == [b"j3", b"j4"]
            await other.ack(*again)
        with pytest.raises(InvalidArgument):
            async with service.consumer(t, "workers"):  # a shared subscription has no exclusive consumer
                pass

    run(scenario)


# -- bad input: the same error as the blocking client's ------------------------------------------------


async def _async_error(call: Callable[[], object]) -> TmsError:
    """The TmsError of a call, whether it raises at once, when awaited, iterated or (a consumer) opened."""
    with pytest.raises(TmsError) as caught:
        result = call()
        if isinstance(result, Awaitable):
            await result
        elif isinstance(result, AsyncIterator):
            await anext(result, None)
        elif hasattr(result, "open"):
            await result.open()
    return caught.value


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_gives_the_blocking_clients_error_and_changes_nothing(
    run: Callable[[Scenario], None], direct: MessagingClient, ns: str, case: str
) -> None:
    t = TopicId(ns, "t")
    direct.create_topic(t, {"ttl": "3600"})
    direct.publish(t, [b"kept"])
    direct.create_subscription(t, "svc")
    with pytest.raises(TmsError) as blocking:
        result = BAD_INPUT[case](direct, t)
        if isinstance(result, Iterator):
            next(result, None)
    call = BAD_INPUT[case]

    async def scenario(service: AsyncMessagingService) -> None:
        error = await _async_error(lambda: call(service, t))
        assert type(error) is type(blocking.value), (error, blocking.value)
        if case in CHECKED_BY_THE_CLIENT:
            assert isinstance(error, InvalidArgument)
            assert str(error) == str(blocking.value)

    run(scenario)
    assert [m.payload for m in direct.fetch(t)] == [b"kept"]
    assert direct.list_topics(ns) == [t] and [s.name for s in direct.list_subscriptions(t)] == ["svc"]


# -- deadlines and cancellation against a misbehaving gateway ----------------------------------------


@pytest.fixture
def faulty(gateway: GatewayProcess) -> Iterator[TcpProxy]:
    """A TCP proxy in front of the module's gateway, to hang, trickle or reset its connections."""
    port = int(gateway.url.rsplit(":", 1)[1])
    proxy = TcpProxy(("127.0.0.1", port))
    yield proxy
    proxy.close()


def _held_clock() -> float:
    """Seconds this thread has spent since boot other than waiting in the run queue for a core (Linux
    schedstat): it advances while the thread runs or is blocked, not while a busy machine keeps it from running."""
    with open("/proc/thread-self/schedstat") as stat:
        waited_ns = int(stat.read().split()[1])
    return time.monotonic() - waited_ns / 1e9


SLOW_CALLBACK = 3.0  # seconds: a blocking call on a hung gateway would hold the loop for its whole timeout
# (TIMEOUT below, or 60 s); time spent runnable but waiting for a core (a loaded machine) is not counted


def run_watched(main: Callable[[], Coroutine[Any, Any, None]]) -> list[str]:
    """Run ``main`` in a new event loop in debug mode; each step of the loop that held it longer than
    SLOW_CALLBACK, running or blocked (what a blocking call made from a coroutine shows up as), described.
    asyncio's own slow-callback report counts wall-clock time, which a loaded machine stretches without any
    fault of the code, so the steps are timed here on :func:`_held_clock`."""
    reports: list[str] = []
    loop_thread = threading.get_ident()
    plain_run = asyncio.Handle._run

    def timed_run(handle: asyncio.Handle) -> None:
        if threading.get_ident() != loop_thread:
            return plain_run(handle)
        started = _held_clock()
        try:
            return plain_run(handle)
        finally:
            held = _held_clock() - started
            if held > SLOW_CALLBACK:
                reports.append(f"{handle!r} held the loop for {held:.3f} s")

    asyncio.Handle._run = timed_run  # type: ignore[method-assign]
    try:
        asyncio.run(main(), debug=True)
    finally:
        asyncio.Handle._run = plain_run  # type: ignore[method-assign]
    return reports


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        await asyncio.sleep(0.01)


TIMEOUT = 6.0  # above SLOW_CALLBACK: a client that blocked the loop on the hung gateway is caught
LIVENESS = 300.0  # what comes "at once" comes within this at any load; a call that waited for its hour did not


@pytest.mark.parametrize("fault", ["hang", "trickle"])
def test_a_hung_or_trickling_gateway_is_unavailable_within_the_deadline(
    faulty: TcpProxy, direct: MessagingClient, ns: str, fault: str
) -> None:
    t = TopicId(ns, "slow")
    direct.create_topic(t)
    direct.create_subscription(t, "svc")

    async def main() -> None:
        async with AsyncGatewayClient(f"http://127.0.0.1:{faulty.port}", timeout_seconds=TIMEOUT) as client:
            await client.get_topic(t)  # a kept-alive connection, then the fault on it
            faulty.fault = fault  # type: ignore[assignment]
            started = time.monotonic()
            with pytest.raises(HBaseUnavailable) as caught:
                await client.get_topic(t)
            assert caught.value.timed_out and not isinstance(caught.value, PublishOutcomeUnknown)
            assert time.monotonic() - started >= TIMEOUT - 0.1  # not before its timeout (the fault lasts)
            with pytest.raises(PublishOutcomeUnknown) as unknown:  # the request went out; no answer came
                await client.publish(t, [b"x"])
            assert unknown.value.timed_out
            faulty.fault = None
            assert await client.get_topic(t)  # and it recovers, on a new connection

    assert run_watched(main) == []


def test_a_long_poll_may_wait_its_wait_on_top_of_the_timeout_and_no_longer(
    faulty: TcpProxy, direct: MessagingClient, ns: str
) -> None:
    t = TopicId(ns, "quiet")
    direct.create_topic(t)
    direct.create_subscription(t, "svc")

    async def main() -> None:
        url = f"http://127.0.0.1:{faulty.port}"
        async with AsyncGatewayClient(url, timeout_seconds=TIMEOUT) as client, client.consumer(t, "svc") as consumer:
            started = time.monotonic()
            assert await consumer.poll(timeout_seconds=3.0) == []  # a quiet topic: the wait is not an error
            assert time.monotonic() - started >= 2.9
            faulty.fault = "hang"
            started = time.monotonic()
            with pytest.raises(HBaseUnavailable) as caught:
                await consumer.poll(timeout_seconds=1.0)
            assert caught.value.timed_out
            assert time.monotonic() - started >= TIMEOUT + 1.0 - 0.1  # the wait on top of the timeout
            faulty.fault = None

    assert run_watched(main) == []


def test_a_resetting_gateway_is_a_clear_error_at_once(faulty: TcpProxy, direct: MessagingClient, ns: str) -> None:
    t = TopicId(ns, "reset")
    direct.create_topic(t)

    async def main() -> None:
        # an hour's timeout: a client that waited for it would not answer within LIVENESS (a TimeoutError here)
        async with AsyncGatewayClient(f"http://127.0.0.1:{faulty.port}", timeout_seconds=3600) as client:
            faulty.fault = "reset"
            with pytest.raises(HBaseUnavailable) as caught:
                await asyncio.wait_for(client.get_topic(t), LIVENESS)
            assert not caught.value.timed_out and "gateway" in str(caught.value)
            with pytest.raises(PublishOutcomeUnknown) as unknown:  # sent, then the link failed: the client cannot know
                await asyncio.wait_for(client.publish(t, [b"x"]), LIVENESS)
            assert not unknown.value.timed_out
            faulty.fault = None
            await client.publish(t, [b"after"])

    assert run_watched(main) == []
    assert [m.payload for m in direct.fetch(t)] == [b"after"]  # the reset request never reached the gateway


def test_a_cancelled_publish_that_never_reached_the_gateway_is_not_stored(
    faulty: TcpProxy, direct: MessagingClient, ns: str
) -> None:
    t = TopicId(ns, "cancel")
    direct.create_topic(t)

    async def main() -> None:
        async with AsyncGatewayClient(f"http://127.0.0.1:{faulty.port}", timeout_seconds=3600) as client:
            faulty.fault = "hang"
            before = faulty.requests
            task = asyncio.create_task(client.publish(t, [b"lost"]))
            await until(lambda: faulty.requests > before)  # the request is out, swallowed by the proxy
            task.cancel()
            await asyncio.wait([task], timeout=LIVENESS)
            assert task.done(), "the cancelled publish waits for its hour-long timeout"
            with pytest.raises(asyncio.CancelledError):
                await task
            faulty.fault = None
            result = await client.publish(t, [b"kept"])  # the client goes on; no half-read answer is reused
            assert result.count == 1

    assert run_watched(main) == []
    assert [m.payload for m in direct.fetch(t)] == [b"kept"]


def test_cancelled_publishes_are_stored_whole_or_not_at_all(
    run: Callable[[Scenario], None], direct: MessagingClient, ns: str
) -> None:
    t = TopicId(ns, "torn")
    direct.create_topic(t)

    async def scenario(service: AsyncMessagingService) -> None:
        tasks = [asyncio.create_task(service.publish(t, [b"%d:%d" % (i, j) for j in range(3)])) for i in range(40)]
        await until(lambda: any(task.done() for task in tasks))  # some landed; others are in flight
        for task in tasks:
            task.cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(not isinstance(o, BaseException) or isinstance(o, asyncio.CancelledError) for o in outcomes)
        stored = await collect(service.fetch(t))
        counts: dict[bytes, int] = {}
        for message in stored:
            batch = message.payload.split(b":")[0]
            counts[batch] = counts.get(batch, 0) + 1
        assert set(counts.values()) <= {3}, counts  # never a part of a batch
        finished = [i for i, o in enumerate(outcomes) if not isinstance(o, BaseException)]
        assert {b"%d" % i for i in finished} <= set(counts)  # every publish that returned is stored
        assert (await service.publish(t, [b"after"])).count == 1

    run(scenario)


def test_the_slow_callback_check_sees_a_blocking_call() -> None:
    """The check the tests above pass would fail for a client that blocked the loop."""

    async def blocking() -> None:
        time.sleep(SLOW_CALLBACK + 0.3)

    assert run_watched(blocking) != []


def test_many_concurrent_calls_keep_the_event_loop_free(
    gateway: GatewayProcess, direct: MessagingClient, ns: str
) -> None:
    t = TopicId(ns, "loop")
    direct.create_topic(t)

    async def main() -> None:
        async with AsyncGatewayClient(gateway.url, timeout_seconds=60) as client, asyncio.TaskGroup() as group:
            # one publish started per step of the loop, as a server's requests arrive (starting 200 tasks
            # in one step costs debug mode's bookkeeping of each, not the client's)
            for i in range(200):
                group.create_task(client.publish(t, [b"%d" % i]))
                await asyncio.sleep(0)
        async with AsyncGatewayClient(gateway.url, timeout_seconds=60) as client:
            assert len(await collect(client.fetch(t))) == 200

    assert run_watched(main) == []


# -- the documentation's example -------------------------------------------------------------------


def test_the_asyncio_example_in_the_gateway_docs_runs(gateway: GatewayProcess) -> None:
    doc = (ROOT / "docs" / "gateway.md").read_text()
    section = doc.split("### For asyncio", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.S)
    assert example, "docs/gateway.md lost its asyncio example"
    env = {**os.environ, "TMS_GATEWAY_URL": gateway.url}
    done = subprocess.run(
        [sys.executable, "-c", example.group(1)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "b'paid'" in done.stdout and "b'shipped'" in done.stdout
