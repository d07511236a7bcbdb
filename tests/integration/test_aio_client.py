"""The asyncio client on the real HBase: the synchronous client's operations as coroutines, many publishes in
flight on one thread, deadlines against hung, trickling and resetting servers without blocking the event loop,
and a defined outcome for a cancelled publish."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from tms_hbase.errors import HBaseUnavailable, InvalidArgument, SubscriptionBusy, SubscriptionNotFound, TopicNotFound
from tms_hbase.tx import Transaction, write_pointer_now

from ..aio_client import async_client
from ..tcp_proxy import TcpProxy
from ..waiting import wait_for

TOPIC = "default:aio"


def test_topics_publish_fetch_and_subscriptions(hbase_address: str, prefix: str) -> None:
    async def scenario() -> None:
        async with async_client(hbase_address, prefix) as client:
            meta = await client.create_topic(TOPIC, {"ttl": "3600"})
            assert (await client.get_topic(TOPIC)).generation == meta.generation
            await client.update_topic(TOPIC, {"ttl": "7200"})
            assert (await client.get_topic(TOPIC)).ttl == 7200
            assert [str(t) for t in await client.list_topics("default")] == [TOPIC]
            await client.create_subscription(TOPIC, "audit")
            single = await client.publish(TOPIC, [b"one"])
            batch = await client.publish(TOPIC, [b"two", b"three"])
            assert batch.position > single.position and batch.count == 2
            with pytest.raises(InvalidArgument):
                await client.publish(TOPIC, "not a list")  # type: ignore[arg-type]
            fetched = [m.payload async for m in client.fetch(TOPIC)]
            assert fetched == [b"one", b"two", b"three"]
            after_first = [m.payload async for m in client.fetch(TOPIC, single.message_ids[0], inclusive=False)]
            assert after_first == [b"two", b"three"]
            assert (await client.lag(TOPIC, "audit")).messages == 3
            assert [s.name for s in await client.list_subscriptions(TOPIC)] == ["audit"]
            await client.delete_subscription(TOPIC, "audit")
            with pytest.raises(SubscriptionNotFound):
                await client.get_subscription(TOPIC, "audit")
            await client.delete_topic(TOPIC)
            with pytest.raises(TopicNotFound):
                await client.get_topic(TOPIC)

    asyncio.run(scenario())


def test_many_publishes_in_flight_on_one_thread(hbase_address: str, prefix: str) -> None:
    """64 concurrent single-message publishers, 8 rounds: every message stored once, under the id its publish
    returned, and no thread started for them (the waits are on the event loop)."""

    async def scenario() -> tuple[dict[bytes, bytes], dict[bytes, bytes], set[threading.Thread]]:
        async with async_client(hbase_address, prefix, pool_size=64) as client:
            await client.create_topic(TOPIC)
            threads = set(threading.enumerate())
            returned = {}
            for round_ in range(8):
                sent = [b"%d-%d" % (round_, i) for i in range(64)]
                results = await asyncio.gather(*(client.publish(TOPIC, [payload]) for payload in sent))
                returned.update((r.first_id, payload) for r, payload in zip(results, sent, strict=True))
            started = set(threading.enumerate()) - threads  # (threads of earlier tests may end meanwhile)
            stored = {m.id: m.payload async for m in client.fetch(TOPIC)}
            return returned, stored, started

    returned, stored, started = asyncio.run(scenario())
    assert len(returned) == 512  # one id each
    assert stored == returned  # each message under its own publish's id, nothing else stored
    assert started == set()


LIVENESS = 300.0  # what comes at its deadline or at once comes within this at any load


@pytest.mark.parametrize("fault", ["hang", "trickle", "reset", "garbage", "huge"])
def test_a_bad_server_fails_the_call_by_its_deadline_without_blocking_the_loop(
    hbase_address: str, prefix: str, proxy: TcpProxy, fault: str
) -> None:
    """A hung or trickling server fails the call at its deadline (a trickled reply, read on, would come whole
    long after it); a resetting or garbage-speaking one at once, not at the timeout (an hour here: a client
    that waited for it would not fail within LIVENESS). The event loop runs meanwhile: the call is still
    waiting when the test sees its request reach the server."""
    timeout = 10.0 if fault in ("hang", "trickle") else 3600.0

    async def scenario() -> tuple[BaseException, float, bool]:
        async with async_client(proxy.address, prefix, timeout_seconds=timeout) as client:
            await client.create_topic(TOPIC)
            proxy.fault = fault  # type: ignore[assignment]
            proxy.cut()
            requests = proxy.requests
            started = time.monotonic()
            call = asyncio.create_task(client.publish(TOPIC, [b"x"]))
            await asyncio.to_thread(wait_for, lambda: proxy.requests > requests or call.done(), "the request", 60)
            waiting = not call.done()
            with pytest.raises(HBaseUnavailable) as failed:
                await asyncio.wait_for(call, LIVENESS)
            return failed.value, time.monotonic() - started, waiting

    error, elapsed, waiting = asyncio.run(scenario())
    if fault in ("hang", "trickle"):
        assert getattr(error, "timed_out", False)
        assert elapsed >= timeout - 0.1  # not before its deadline
        assert waiting, "the call blocked the event loop while it waited for the server"
    if fault in ("garbage", "huge"):
        assert "not an HBase Thrift reply" in str(error)


def test_a_cancelled_publish_is_stored_whole_once_it_started(hbase_address: str, prefix: str) -> None:
    """Cancelled once it started, the caller gets CancelledError and the write runs on: the batch is stored
    whole, exactly once, by the time the client is closed."""

    async def scenario() -> list[bytes]:
        async with async_client(hbase_address, prefix) as client:
            await client.create_topic(TOPIC)
            publish = asyncio.create_task(client.publish(TOPIC, [b"kept", b"whole"]))
            await asyncio.sleep(0)  # it started
            publish.cancel()
            with pytest.raises(asyncio.CancelledError):
                await publish
        async with async_client(hbase_address, prefix) as reader:
            return [m.payload async for m in reader.fetch(TOPIC)]

    assert asyncio.run(scenario()) == [b"kept", b"whole"]


def ran_on(caplog: pytest.LogCaptureFixture) -> bool:
    """Whether the client logged the outcome of a cancelled publish's write, which it runs on to its end."""
    return any("cancelled publish to" in r.getMessage() and "ran on" in r.getMessage() for r in caplog.records)


def test_a_cancelled_publish_on_a_hung_server_returns_at_once_and_is_not_stored(
    hbase_address: str, prefix: str, proxy: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    timeout = 3.0

    async def scenario() -> tuple[bool, list[bytes]]:
        async with async_client(proxy.address, prefix, timeout_seconds=timeout) as client:
            await client.create_topic(TOPIC)
            proxy.fault = "hang"  # type: ignore[assignment]
            proxy.cut()
            publish = asyncio.create_task(client.publish(TOPIC, [b"lost"]))
            await asyncio.sleep(0.2)
            publish.cancel()
            with pytest.raises(asyncio.CancelledError):
                await publish
            before = not ran_on(caplog)  # its write, which runs on, has not ended (at its deadline) yet
        assert ran_on(caplog), "the cancelled publish's write did not run on to its deadline"
        proxy.fault = None
        async with async_client(hbase_address, prefix) as direct:
            return before, [m.payload async for m in direct.fetch(TOPIC)]

    caplog.set_level(logging.INFO, "tms_hbase.aio.coalesce")
    before, stored = asyncio.run(scenario())
    assert before, "the cancelled publish was held until its write's deadline"
    assert stored == []


def test_fetch_checks_its_arguments_at_the_call(hbase_address: str, prefix: str) -> None:
    async def scenario() -> None:
        async with async_client(hbase_address, prefix) as client:
            with pytest.raises(InvalidArgument):
                client.fetch(TOPIC, limit=-1)
            with pytest.raises(InvalidArgument):
                client.fetch("not a topic name!")

    asyncio.run(scenario())


def test_the_consumer_wakes_on_a_publish_commits_and_holds_the_lease(hbase_address: str, prefix: str) -> None:
    async def scenario() -> tuple[list[bytes], list[bytes], int]:
        async with async_client(hbase_address, prefix) as client:
            await client.create_topic(TOPIC)
            await client.create_subscription(TOPIC, "work")
            async with client.consumer(TOPIC, "work", max_wait_seconds=1.0) as consumer:
                with pytest.raises(SubscriptionBusy):
                    async with client.consumer(TOPIC, "work"):
                        pass
                waiting = asyncio.create_task(consumer.poll(10, timeout_seconds=60))
                await asyncio.sleep(0.3)
                assert not waiting.done()
                await client.publish(TOPIC, [b"first"])
                polled = [m.payload for m in await asyncio.wait_for(waiting, 30)]
                await client.publish(TOPIC, [b"second", b"third"])
                iterated = [m.payload async for m in consumer]  # ends max_wait_seconds after the last
                await consumer.commit()
                assert consumer.committed == consumer.delivered
            lag = await client.lag(TOPIC, "work")
            return polled, iterated, lag.messages

    # a poll that blocked the event loop would not see the publish made on that loop: it would return nothing
    polled, iterated, lag = asyncio.run(scenario())
    assert polled == [b"first"]
    assert iterated == [b"second", b"third"]
    assert lag == 0


def test_shared_consumers_split_the_work_and_redeliver_a_nack(hbase_address: str, prefix: str) -> None:
    async def scenario() -> tuple[list[bytes], list[bytes], int]:
        async with async_client(hbase_address, prefix) as client:
            await client.create_topic(TOPIC)
            await client.create_subscription(TOPIC, "jobs", shared=True, ack_timeout_seconds=30)
            for i in range(20):
                await client.publish(TOPIC, [b"job %d" % i])
            done: list[bytes] = []
            nacked: list[bytes] = []

            async def work(owner: str) -> None:
                async with client.shared_consumer(TOPIC, "jobs", owner=owner, max_wait_seconds=1.0) as consumer:
                    async for delivery in consumer:
                        if delivery.payload == b"job 7" and not nacked:
                            nacked.append(delivery.payload)
                            await consumer.nack(delivery)
                            continue
                        done.append(delivery.payload)
                        await consumer.ack(delivery)

            await asyncio.gather(work("a"), work("b"))
            lag = await client.lag(TOPIC, "jobs")
            return done, nacked, lag.messages

    done, nacked, lag = asyncio.run(scenario())
    assert nacked == [b"job 7"]
    assert sorted(done) == sorted(b"job %d" % i for i in range(20))  # each once, the nacked one again
    assert lag == 0


def test_a_shared_consumer_takes_the_synchronous_ones_waiting_options(hbase_address: str, prefix: str) -> None:
    """``poll_interval_seconds``, ``reap_interval`` and ``doorbell`` as ``MessagingClient.shared_consumer``
    takes them: checked the same way, and a consumer made with them redelivers a nacked message."""

    async def scenario() -> list[tuple[bytes, int]]:
        async with async_client(hbase_address, prefix) as client:
            await client.create_topic(TOPIC)
            await client.create_subscription(TOPIC, "jobs", shared=True, ack_timeout_seconds=30)
            await client.publish(TOPIC, [b"a", b"b"])
            for bad in ({"poll_interval_seconds": -1}, {"reap_interval": float("nan")}):
                with pytest.raises(InvalidArgument):
                    client.shared_consumer(TOPIC, "jobs", **bad)  # type: ignore[arg-type]
            options = {"poll_interval_seconds": 0.05, "reap_interval": 0.1, "doorbell": None}
            seen: list[tuple[bytes, int]] = []
            async with client.shared_consumer(TOPIC, "jobs", max_wait_seconds=2.0, **options) as consumer:
                async for delivery in consumer:
                    seen.append((delivery.payload, delivery.deliveries))
                    if delivery.deliveries == 1 and delivery.payload == b"a":
                        await consumer.nack(delivery)
                    else:
                        await consumer.ack(delivery)
                    if len(seen) == 3:
                        break
            return seen

    assert sorted(asyncio.run(scenario())) == [(b"a", 1), (b"a", 2), (b"b", 1)]


def test_transactional_publish_store_and_rollback(hbase_address: str, prefix: str) -> None:
    async def scenario() -> tuple[list[bytes], list[bytes], list[bytes]]:
        async with async_client(hbase_address, prefix) as client:
            await client.create_topic(TOPIC)
            pointer = write_pointer_now()
            handle = await client.publish(TOPIC, [b"in tx"], tx_write_pointer=pointer)
            await client.store(TOPIC, [b"s1", b"s2"], tx_write_pointer=pointer + 1)
            await client.publish(TOPIC, [], tx_write_pointer=pointer + 1)
            everything = [m.payload async for m in client.fetch(TOPIC)]
            await client.rollback(TOPIC, handle)
            reader = Transaction(
                read_pointer=pointer + 10,
                tx_id=pointer + 11,
                invalids=[],
                in_progress=[],
                first_short_in_progress=2**63 - 1,
            )
            committed = [m.payload async for m in client.fetch(TOPIC, transaction=reader)]
            in_progress = replace_in_progress(reader, pointer + 1)
            before = [m.payload async for m in client.fetch(TOPIC, transaction=in_progress)]
            return everything, committed, before

    everything, committed, before = asyncio.run(scenario())
    assert everything == [b"in tx", b"s1", b"s2"]  # without a transaction: everything
    assert committed == [b"s1", b"s2"]  # the rolled-back batch is skipped
    assert before == []  # stops at a transaction not committed yet


def replace_in_progress(tx: Transaction, pointer: int) -> Transaction:
    return Transaction(
        read_pointer=tx.read_pointer,
        tx_id=tx.tx_id,
        invalids=[],
        in_progress=[pointer],
        first_short_in_progress=pointer,
    )


def test_calls_wait_for_a_hung_server_side_by_side(hbase_address: str, prefix: str, proxy: TcpProxy) -> None:
    """8 calls to a hung server are in flight at once on the one thread: all 8 requests reach it before any call
    has failed (one after the other, the second would go out only once the first failed), then all fail."""
    timeout = 10.0

    async def scenario() -> list[BaseException]:
        async with async_client(proxy.address, prefix, timeout_seconds=timeout, pool_size=8) as client:
            await client.create_topic(TOPIC)
            await client.get_topic(TOPIC)
            proxy.fault = "hang"  # type: ignore[assignment]
            proxy.cut()
            swallowed = proxy.swallowed
            calls = [asyncio.create_task(client.get_topic(f"default:t{i}")) for i in range(8)]

            def all_out_or_one_failed() -> bool:
                return proxy.swallowed >= swallowed + 8 or any(call.done() for call in calls)

            await asyncio.to_thread(wait_for, all_out_or_one_failed, "the 8 requests or a failed call", 60)
            assert not any(call.done() for call in calls), "a call waited for the one before it"
            done, _ = await asyncio.wait(calls, timeout=LIVENESS)
            assert len(done) == 8, "the calls outlived their deadline"
            return [e for call in calls if (e := call.exception()) is not None]

    errors = asyncio.run(scenario())
    assert len(errors) == 8 and all(isinstance(e, HBaseUnavailable) for e in errors), errors
