"""The gateway's asyncio client puts single publishes together: publishes to a topic made while a publish to it
is in flight go in one request (one batch row), on a real gateway over the real HBase. Every guarantee of a
publish on its own still holds: each acknowledged message stored once under the id its publish returned, in
each task's call order; a bad publish (too large for the gateway, or to a topic that does not exist) fails
its own caller only; a publish cancelled while queued is not stored, one cancelled once its request is sent
is stored whole, and the others are unaffected."""

from __future__ import annotations

import asyncio

import pytest

from tms_hbase import MessagingClient
from tms_hbase.errors import BatchTooLarge, TopicNotFound
from tms_hbase.gateway_client.aio import AsyncGatewayClient
from tms_hbase.model.published import PublishResult

from ..gateway_server import GatewayProcess, module_gateway
from ..tcp_proxy import TcpProxy
from ..waiting import wait_for

LIMIT = 8 * 1024  # max_batch_bytes of this module's gateway (far below the client's own bound for a request)
HELD = 5.0  # seconds the proxy holds a publish request that must stay in flight while others queue behind it

gateway = module_gateway(f"workers = 1\nmax_batch_bytes = {LIMIT}\n")


def rows(results: list[PublishResult]) -> set[tuple[int, int]]:
    """The batch rows the publishes' messages are in."""
    return {(r.generation, r.position) for r in results}


def stored(direct: MessagingClient, topic: str, expected: int) -> list[tuple[bytes, bytes]]:
    """Every message of the topic in order, as (id, payload), read directly from HBase once at least
    ``expected`` are there (a fetch ends before a hole in the gateway's offsets not due yet)."""
    read: list[tuple[bytes, bytes]] = []

    def enough() -> bool:
        read[:] = [(m.id, m.payload) for m in direct.fetch(topic)]
        return len(read) >= expected

    wait_for(enough, f"{expected} messages readable", 60.0)
    return read


def test_concurrent_single_publishes_share_rows_each_stored_once_in_each_tasks_order(
    gateway: GatewayProcess, direct: MessagingClient
) -> None:
    topic, tasks, each = "default:gwcoalesced", 32, 8
    direct.create_topic(topic)

    async def scenario() -> list[list[PublishResult]]:
        async with AsyncGatewayClient(gateway.url, timeout_seconds=60) as client:

            async def publisher(t: int) -> list[PublishResult]:
                return [await client.publish(topic, [b"%d:%d" % (t, n)]) for n in range(each)]

            return await asyncio.gather(*(publisher(t) for t in range(tasks)))

    results = asyncio.run(scenario())
    every = [r for task in results for r in task]
    # 256 publishes made 32 at a time: each round's publishes queue behind the request in flight
    assert len(rows(every)) <= len(every) // 4, f"{len(rows(every))} rows for {len(every)} publishes"
    messages = stored(direct, topic, tasks * each)
    assert len(messages) == tasks * each  # each acknowledged message once
    by_id = dict(messages)
    for t, task in enumerate(results):
        assert [by_id[r.first_id] for r in task] == [b"%d:%d" % (t, n) for n in range(each)]  # type: ignore[index]
        order = [m for m in (p for _, p in messages) if m.startswith(b"%d:" % t)]
        assert order == [b"%d:%d" % (t, n) for n in range(each)]  # the task's call order


def test_a_bad_publish_fails_only_its_own_caller(gateway: GatewayProcess, direct: MessagingClient) -> None:
    topic, tasks = "default:gwbad", 24
    direct.create_topic(topic)

    async def scenario() -> tuple[list[PublishResult], BaseException, BaseException]:
        async with AsyncGatewayClient(gateway.url, timeout_seconds=60) as client:
            good = [client.publish(topic, [b"good %d" % t]) for t in range(tasks)]
            big = client.publish(topic, [b"x" * (LIMIT + 1)])  # within the client's bound, over the gateway's
            missing = client.publish("default:gwmissing", [b"nowhere"])
            *ok, too_large, not_found = await asyncio.gather(*good, big, missing, return_exceptions=True)
            return ok, too_large, not_found

    ok, too_large, not_found = asyncio.run(scenario())
    assert isinstance(too_large, BatchTooLarge)
    assert isinstance(not_found, TopicNotFound)
    assert all(isinstance(r, PublishResult) for r in ok)
    assert len(rows(ok)) < len(ok)  # the good ones still went together
    messages = stored(direct, topic, tasks)
    assert sorted(p for _, p in messages) == sorted(b"good %d" % t for t in range(tasks))
    assert {r.first_id: b"good %d" % t for t, r in enumerate(ok)} == {i: p for i, p in messages}


@pytest.fixture
def slow_publishes(gateway: GatewayProcess) -> TcpProxy:
    """A proxy in front of the gateway that holds publish requests while ``delay`` is set."""
    proxy = TcpProxy(("127.0.0.1", gateway.port))
    proxy.aim = b"/publish"
    yield proxy
    proxy.close()


def test_cancelled_publishes_leave_the_others_alone(slow_publishes: TcpProxy, direct: MessagingClient) -> None:
    """Queued behind the request in flight, a cancelled publish is not stored; cancelled once its request is
    sent, it is stored whole; the publishes beside it get their own results."""
    topic = "default:gwcancel"
    direct.create_topic(topic)
    proxy = slow_publishes

    async def scenario() -> tuple[PublishResult, PublishResult, PublishResult]:
        async with AsyncGatewayClient(f"http://{proxy.address}", timeout_seconds=60) as client:
            await client.publish(topic, [b"warm"])  # a connection open
            proxy.delay = HELD
            seen = proxy.requests
            in_flight = asyncio.create_task(client.publish(topic, [b"sent"]))
            sent_cancelled = asyncio.create_task(client.publish(topic, [b"sent, cancelled", b"whole"]))
            await asyncio.to_thread(wait_for, lambda: proxy.requests > seen, "the first request on the wire", 30.0)
            queued = [asyncio.create_task(client.publish(topic, [p])) for p in (b"queued, cancelled", b"queued")]
            await asyncio.sleep(0)  # both queued behind the request in flight
            for cancelled in (sent_cancelled, queued[0]):
                cancelled.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await cancelled
            held = not in_flight.done()
            proxy.delay = 0.0
            assert held, "the request was held while the publishes were cancelled"
            return await in_flight, await queued[1], await client.publish(topic, [b"after"])

    first, second, after = asyncio.run(scenario())
    messages = stored(direct, topic, 6)
    assert [p for _, p in messages] == [b"warm", b"sent", b"sent, cancelled", b"whole", b"queued", b"after"]
    by_id = dict(messages)
    assert (by_id[first.first_id], by_id[second.first_id], by_id[after.first_id]) == (  # type: ignore[index]
        b"sent",
        b"queued",
        b"after",
    )
    assert (first.generation, first.position) != (second.generation, second.position)  # queued: the next request
