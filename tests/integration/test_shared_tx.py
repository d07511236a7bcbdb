"""Transactional acknowledgements of a shared subscription, with a real transaction server and real
consumer processes: a handler writes a table row, publishes a message and acknowledges its delivery in
one transaction; a consumer killed at every step of that commit (before anything persisted, after the
acknowledgement persisted, after every participant persisted, after the commit) loses nothing and
doubles nothing, as a transactional reader sees it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, NotHeld, TopicId
from tms_hbase.client_tx import TransactionalPublisher, TransactionalReader
from tms_hbase.tx.client import TransactionClient
from tms_hbase.txaware.context import TransactionContext
from tms_hbase.txaware.table import TransactionalTable

from ..tx_server import TxServer, free_port

ROOT = Path(__file__).resolve().parents[2]
T, SINK = TopicId("txq", "jobs"), TopicId("txq", "done")
PAYLOADS = [str(i).encode() for i in range(6)]


@pytest.fixture
def tx_env(tms_env: dict[str, str]) -> dict[str, str]:
    """A transaction server of the test's own that times transactions out within a second of their timeout."""
    server = TxServer(tms_env, free_port(), "--cleanup-interval", "0.5").start()
    yield {**tms_env, "TMS_TX_SERVER": server.address}
    server.stop()


def worker(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "tests.workers.shared_tx_consumer", str(T), "work", str(SINK), "state", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("step", ["handled", "acked", "persisted", "committed"])
def test_a_consumer_killed_at_any_step_loses_nothing_and_doubles_nothing(
    client: MessagingClient, tx_env: dict[str, str], state_table: str, step: str
) -> None:
    client.create_topic(T)
    client.create_topic(SINK)
    client.publish(T, PAYLOADS)
    # the ack timeout outlasts a receive-to-commit at load 30; the next consumer waits out what is left of it
    # for the crashed one's delivery (its redelivery), well within its idle time
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=6.0, max_deliveries=10)
    crashed = worker(tx_env, "--crash", step, "--after", "2")
    assert crashed.returncode == 9, crashed.stderr
    clean = worker(tx_env, "--idle", "10")
    assert clean.returncode == 0, clean.stderr

    with TransactionClient(tx_env["TMS_TX_SERVER"]) as tx_client:
        done = [m.payload for m in TransactionalReader(client, tx_client, SINK).poll()]
        table = TransactionalTable(client.installation.table("state"))
        context = TransactionContext(tx_client, table)
        context.start()
        rows = {p: table.get(p, b"d:v") for p in PAYLOADS}
        context.abort()
    assert sorted(done) == PAYLOADS, f"lost or doubled after a crash at {step}: {done}"
    assert all(rows.values()), rows
    assert client.pending(T, "work") == []
    stats = client.get_subscription(T, "work").shared
    assert stats is not None and (stats.acknowledged, stats.dead_lettered) == (6, 0)
    redelivered = 0 if step == "committed" else 1  # a committed acknowledgement is resolved, not redone
    assert stats.redelivered == redelivered


def test_an_explicit_transaction_and_a_rollback(
    client: MessagingClient, tx_client: TransactionClient, state_table: str
) -> None:
    """``ack(transaction=tx)`` writes the ack pending at once: neither deliverable nor settleable until the
    transaction ends; a rollback gives the message back to its holder; a commit makes it acknowledged."""
    client.create_topic(T)
    client.publish(T, PAYLOADS[:2])
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=30)
    with client.shared_consumer(T, "work") as consumer:
        one, two = consumer.receive(2, 5)
        tx = tx_client.start_short()
        consumer.ack(one, transaction=tx)
        assert [p.state for p in client.pending(T, "work")] == ["acking", "held"]
        with pytest.raises(NotHeld, match="pending in the transaction"):
            consumer.ack(one)
        assert consumer.rollback_tx()
        tx_client.abort(tx)
        assert [p.state for p in client.pending(T, "work")] == ["held", "held"]
        publisher = TransactionalPublisher(client)
        context = TransactionContext(tx_client, consumer, publisher)
        with pytest.raises(RuntimeError), context.transaction():
            consumer.ack(one, two)
            raise RuntimeError("the handler failed")
        assert [p.state for p in client.pending(T, "work")] == ["held", "held"]  # nothing was persisted
        tx = tx_client.start_short()
        consumer.ack(one, two, transaction=tx)
        tx_client.can_commit(tx, [])
        tx_client.commit(tx)
        consumer.post_tx_commit()
    assert client.pending(T, "work") == []
    assert client.get_subscription(T, "work").shared.acknowledged == 2  # type: ignore[union-attr]
