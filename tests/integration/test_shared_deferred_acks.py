"""Acknowledgements noted with ``ack(..., wait=False)``: written all together (one round trip) when the next
receive begins, by ``flush()`` or by ``close()``; a consumer that dies before writing them has its messages
delivered again (to a consumer in a new process), never lost; one refused because the hold ended comes out
of ``flush()`` as NotHeld and is counted, leaving the new holder's delivery alone. Through the direct client,
its asyncio twin and the gateway's clients."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Callable, Iterator

import pytest

from tms_hbase import InvalidArgument, MessagingClient, NotHeld, TopicId
from tms_hbase.aio import AsyncMessagingClient
from tms_hbase.gateway_client.aio import AsyncGatewayClient
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.model.transaction import Transaction

from ..gateway_server import GatewayProcess, module_gateway
from .test_shared_fence import Worker, expired, late_acks, wait_until

T = TopicId("queue", "fenced")  # the fence worker's topic

gateway = module_gateway("workers = 2\nthreads = 2\nmax_poll_messages = 50\n")


@pytest.fixture
def workers(tms_env: dict[str, str]) -> Iterator[Callable[[], Worker]]:
    started: list[Worker] = []

    def start() -> Worker:
        started.append(Worker(tms_env, None))
        return started[-1]

    yield start
    for w in started:
        w.close()


def jobs(client: MessagingClient, count: int, ack_timeout: float = 30.0, topic: TopicId = T) -> None:
    client.create_topic(topic)
    client.publish(topic, [b"job%d" % i for i in range(count)])
    client.create_subscription(topic, "work", shared=True, ack_timeout_seconds=ack_timeout, max_deliveries=10)


def acknowledged(client: MessagingClient, topic: TopicId = T) -> int:
    numbers = client.get_subscription(topic, "work").shared
    assert numbers is not None
    return numbers.acknowledged


def test_noted_acks_are_written_together_by_flush_and_by_the_next_receive(client: MessagingClient) -> None:
    jobs(client, 16)
    with client.shared_consumer(T, "work") as consumer:
        first = consumer.receive(8, 30.0)
        assert len(first) == 8
        for delivery in first:
            consumer.ack(delivery, wait=False)
        assert [p.state for p in client.pending(T, "work")] == ["held"] * 8  # noted, not written
        calls = client.installation.calls
        consumer.flush()
        assert client.installation.calls - calls <= 2, "the acknowledgements were not written together"
        assert (acknowledged(client), len(client.pending(T, "work"))) == (8, 0)
        second = consumer.receive(8, 30.0)
        assert sorted(d.payload for d in first + second) == sorted(b"job%d" % i for i in range(16))
        for delivery in second:
            consumer.ack(delivery, wait=False)
        assert consumer.receive(1, 0.2) == []  # writes them first
        assert (acknowledged(client), client.pending(T, "work")) == (16, [])


def test_close_writes_noted_acks(client: MessagingClient) -> None:
    jobs(client, 3)
    with client.shared_consumer(T, "work") as consumer:
        for delivery in consumer.receive(3, 30.0):
            consumer.ack(delivery, wait=False)
    assert (acknowledged(client), client.pending(T, "work")) == (3, [])


def test_a_consumer_killed_with_acks_noted_has_its_messages_delivered_again_in_a_new_process(
    client: MessagingClient, workers: Callable[[], Worker]
) -> None:
    jobs(client, 3, ack_timeout=1.0)
    a = workers()
    got = a.ask("receive")["got"]
    assert len(got) == 3
    assert a.ask("note") == {"done": "note"}
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(timeout=60)
    assert acknowledged(client) == 0  # what was only noted was never written
    b = workers()
    again = b.ask("receive")["got"]
    while len(again) < 3:  # after A's deadline, all of them, each a second delivery
        again += b.ask("receive")["got"]
    assert sorted((g["payload"], g["deliveries"]) for g in again) == [(f"job{i}", 2) for i in range(3)]
    assert b.ask("note") == {"done": "note"}
    assert b.ask("flush") == {"done": "flush"}
    assert (acknowledged(client), client.pending(T, "work")) == (3, [])


def test_a_noted_ack_refused_because_the_hold_ended_comes_out_of_flush(
    client: MessagingClient, workers: Callable[[], Worker]
) -> None:
    jobs(client, 1, ack_timeout=1.0)
    with client.shared_consumer(T, "work") as consumer:
        (delivery,) = consumer.receive(1, 30.0)
        wait_until(lambda: expired(client))
        b = workers()  # another process takes it again and holds it long
        (taken,) = b.ask("receive")["got"]
        assert taken["deliveries"] == 2
        assert b.ask("extend") == {"done": "extend"}
        consumer.ack(delivery, wait=False)
        assert consumer.receive(1, 0.2) == []  # writes it: refused, kept for flush, not raised here
        with pytest.raises(NotHeld):
            consumer.flush()
        consumer.flush()  # raised once
        assert late_acks(client) == 1
        (pending,) = client.pending(T, "work")
        assert (pending.owner, pending.state) == (b.owner, "held")
        assert b.ask("ack") == {"done": "ack"}
    assert acknowledged(client) == 1


def test_a_transactional_ack_cannot_be_deferred(client: MessagingClient) -> None:
    jobs(client, 1)
    with client.shared_consumer(T, "work") as consumer:
        (delivery,) = consumer.receive(1, 30.0)
        with pytest.raises(InvalidArgument):
            consumer.ack(delivery, transaction=Transaction(1, 1, [], [], 1), wait=False)
        assert [p.state for p in client.pending(T, "work")] == ["held"]


def test_the_other_clients_write_noted_acks_with_flush_receive_and_close(
    direct: MessagingClient, gateway: GatewayProcess
) -> None:
    t = TopicId(f"n{uuid.uuid4().hex[:10]}", "jobs")  # the gateway serves the module's installation
    jobs(direct, 12, topic=t)
    with GatewayClient(gateway.url, timeout_seconds=60) as http, http.shared_consumer(t, "work") as consumer:
        for delivery in consumer.receive(2, 30.0):
            consumer.ack(delivery, wait=False)
        consumer.flush()
        assert acknowledged(direct, t) == 2
        for delivery in consumer.receive(2, 30.0):
            consumer.ack(delivery, wait=False)
        consumer.receive(2, 30.0)  # writes those two first; holds two more, given back at close
    assert acknowledged(direct, t) == 4
    assert [p.state for p in direct.pending(t, "work")] == ["released"] * 2

    async def asyncio_clients() -> None:
        async with (
            AsyncGatewayClient(gateway.url, timeout_seconds=60) as aio_http,
            aio_http.shared_consumer(t, "work") as consumer,
        ):
            for delivery in await consumer.receive(2, 30.0):
                await consumer.ack(delivery, wait=False)
            await consumer.flush()
            assert acknowledged(direct, t) == 6
            for delivery in await consumer.receive(2, 30.0):
                await consumer.ack(delivery, wait=False)
        assert acknowledged(direct, t) == 8  # close wrote them
        async with (
            AsyncMessagingClient(config=direct.config) as aio_direct,
            aio_direct.shared_consumer(t, "work") as aio_consumer,
        ):
            for delivery in await aio_consumer.receive(2, 30.0):
                await aio_consumer.ack(delivery, wait=False)
            await aio_consumer.flush()
            assert acknowledged(direct, t) == 10
            for delivery in await aio_consumer.receive(2, 30.0):
                await aio_consumer.ack(delivery, wait=False)
            assert await aio_consumer.receive(1, 0.2) == []
            assert acknowledged(direct, t) == 12

    asyncio.run(asyncio_clients())
