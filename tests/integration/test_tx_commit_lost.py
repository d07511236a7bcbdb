"""A transaction whose server dies at ``can_commit`` or ``commit`` (a real ``tms-admin tx serve`` process,
killed): ``finish()`` raises, and the consumers in it are released from the dead transaction, so a later
plain acknowledgement or mark is stored (or raises), never kept for a transaction that cannot commit."""

from __future__ import annotations

from collections.abc import Collection, Iterator

import pytest

from tms_hbase import MessagingClient, TopicId, TransactionServiceUnavailable
from tms_hbase.model.transaction import Transaction
from tms_hbase.tx.client import TransactionClient
from tms_hbase.txaware.context import TransactionContext

from ..tx_server import TxServer, free_port

T = TopicId("txlost", "jobs")


class KillServerAtPersist:
    """A participant that kills the transaction server while the participants persist: ``can_commit``
    succeeded, ``commit`` then finds no server."""

    persist_last = True
    transaction_aware_name = "kills the transaction server"

    def __init__(self, server: TxServer) -> None:
        self.server = server

    def start_tx(self, tx: Transaction) -> None: ...

    def update_tx(self, tx: Transaction) -> None: ...

    def get_tx_changes(self) -> Collection[bytes]:
        return []

    def commit_tx(self) -> bool:
        self.server.kill()
        return True

    def post_tx_commit(self) -> None: ...

    def rollback_tx(self) -> bool:
        return True


@pytest.fixture
def server(tms_env: dict[str, str]) -> Iterator[TxServer]:
    server = TxServer(tms_env, free_port()).start()
    yield server
    if server.proc is not None and server.proc.poll() is None:
        server.stop()


def finish_with_server_dying(context: TransactionContext, server: TxServer, at: str) -> None:
    """Kill the server before ``can_commit`` or between it and ``commit``; ``finish()`` must raise."""
    if at == "can_commit":
        server.kill()
    else:
        context.add(KillServerAtPersist(server))
    with pytest.raises(TransactionServiceUnavailable):
        context.finish()
    assert context.tx is None


@pytest.mark.parametrize("at", ["can_commit", "commit"])
def test_a_shared_ack_after_a_failed_commit_is_stored(client: MessagingClient, server: TxServer, at: str) -> None:
    client.create_topic(T)
    client.publish(T, [b"a"])
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=60)
    with (
        TransactionClient(server.address, timeout_seconds=5) as tx_client,
        client.shared_consumer(T, "work") as consumer,
    ):
        [delivery] = consumer.receive(1, 30)
        context = TransactionContext(tx_client, consumer)
        context.start()
        consumer.ack(delivery)
        finish_with_server_dying(context, server, at)
        assert [p.state for p in client.pending(T, "work")] == ["held"], "the failed transaction left its ack"
        consumer.ack(delivery)  # outside any transaction now: stored, or it raises
    assert client.pending(T, "work") == [], "an ack that returned was not stored"
    stats = client.get_subscription(T, "work").shared
    assert stats is not None and (stats.acknowledged, stats.redelivered) == (1, 0)
    with client.shared_consumer(T, "work", max_wait_seconds=0.5) as again:
        assert again.receive(1, 0.5) == [], "an acknowledged message was delivered again"


@pytest.mark.parametrize("at", ["can_commit", "commit"])
def test_an_exclusive_mark_after_a_failed_commit_is_stored(client: MessagingClient, server: TxServer, at: str) -> None:
    client.create_topic(T)
    client.publish(T, [b"1", b"2", b"3"])
    client.create_subscription(T, "svc")
    with TransactionClient(server.address, timeout_seconds=5) as tx_client:
        with client.consumer(T, "svc", max_wait_seconds=0.1) as consumer:
            context = TransactionContext(tx_client, consumer)
            context.start()
            assert [m.payload for m in consumer.poll(max_messages=2, timeout_seconds=30)] == [b"1", b"2"]
            consumer.commit()
            finish_with_server_dying(context, server, at)
            assert client.get_subscription(T, "svc").pending is None
            again = consumer.poll(max_messages=2, timeout_seconds=30)  # the aborted reads come again
            assert [m.payload for m in again] == [b"1", b"2"]
            consumer.commit()  # outside any transaction now
        assert client.get_subscription(T, "svc").position == again[-1].id, "a commit that returned was not stored"
    with client.consumer(T, "svc", max_wait_seconds=0.5) as consumer:
        assert [m.payload for m in consumer] == [b"3"]
