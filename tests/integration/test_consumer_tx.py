"""Transactional marks with the real transaction server, in this process: a mark committed with a
transaction counts once it commits, never when it aborts, and a consumer in a TransactionContext
delivers again what an aborted transaction had read."""

from __future__ import annotations

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.client_tx import TransactionalPublisher
from tms_hbase.tx.client import TransactionClient
from tms_hbase.txaware.context import TransactionContext

T = TopicId("ctx", "in")
SINK = TopicId("ctx", "out")


@pytest.fixture
def topic(client: MessagingClient) -> TopicId:
    client.create_topic(T)
    client.create_topic(SINK)
    client.publish(T, [b"1", b"2", b"3", b"4"])
    client.create_subscription(T, "svc")
    return T


def test_a_mark_committed_with_a_transaction_counts_once_it_commits(
    client: MessagingClient, tx_client: TransactionClient, topic: TopicId
) -> None:
    with client.consumer(topic, "svc", transaction=tx_client, max_wait_seconds=0.1) as consumer:
        one, two = consumer.poll(max_messages=2)
        tx = tx_client.start_short()
        consumer.commit(one, transaction=tx)
        consumer.commit(transaction=tx)  # a later mark in the same transaction replaces it
        pending = client.get_subscription(topic, "svc")
        assert pending.position is None and pending.pending.position == two.id
        assert client.lag(topic, "svc").messages == 4, "not committed yet"
        tx_client.can_commit(tx, [])
        tx_client.commit(tx)
        assert client.get_subscription(topic, "svc").position == two.id  # settled when read
    with client.consumer(topic, "svc", transaction=tx_client, max_wait_seconds=0.1) as consumer:
        assert [m.payload for m in consumer] == [b"3", b"4"]
        assert client.get_subscription(topic, "svc").pending is None  # folded when taken over


def test_an_aborted_transaction_moves_nothing_and_its_messages_come_again(
    client: MessagingClient, tx_client: TransactionClient, topic: TopicId
) -> None:
    with client.consumer(topic, "svc", transaction=tx_client, max_wait_seconds=0.1) as consumer:
        publisher = TransactionalPublisher(client)
        context = TransactionContext(tx_client, consumer, publisher)
        with pytest.raises(RuntimeError), context.transaction():
            got = consumer.poll(max_messages=3)
            publisher.publish(SINK, [m.payload for m in got])
            consumer.commit()
            raise RuntimeError("the service failed after reading")
        with context.transaction():
            again = consumer.poll(max_messages=3)
            publisher.publish(SINK, [m.payload for m in again])
            consumer.commit()
        assert [m.payload for m in again] == [b"1", b"2", b"3"]
    reader = tx_client.start_short()
    assert [m.payload for m in client.fetch(SINK, transaction=reader)] == [b"1", b"2", b"3"]
    tx_client.abort(reader)
    assert client.lag(topic, "svc").messages == 1
    assert client.get_subscription(topic, "svc").pending is None
