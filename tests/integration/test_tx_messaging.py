"""Transactional messaging end to end: real transaction server, real HBase, real participants."""

from __future__ import annotations

import time

import happybase
import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.client_tx import TransactionalPublisher, TransactionalReader
from tms_hbase.config import thrift_address
from tms_hbase.errors import TransactionConflict
from tms_hbase.model.tables import APPLICATION_MAX_VERSIONS
from tms_hbase.tx.client import TransactionClient, TransactionServiceUnavailable
from tms_hbase.txaware.context import TransactionContext
from tms_hbase.txaware.table import ROLLED_BACK, TransactionalTable

from ..tx_server import free_port

T = TopicId("shop", "orders")


def payloads(messages) -> list[bytes]:
    return [m.payload for m in messages]


def stored_versions(address: str, table: str, row: bytes, column: bytes) -> dict[int, bytes]:
    """Every stored version of one cell (version -> stored bytes), read with plain happybase."""
    host, port = thrift_address(address)
    conn = happybase.Connection(host, port)
    try:
        return {
            ts: v
            for v, ts in conn.table(table).cells(row, column, versions=APPLICATION_MAX_VERSIONS, include_timestamp=True)
        }
    finally:
        conn.close()


def test_state_change_and_notification_commit_together(
    client: MessagingClient, tx_client: TransactionClient, state_table: str
) -> None:
    client.create_topic(T)
    table = TransactionalTable(client.installation.table("state"))
    publisher = TransactionalPublisher(client)
    context = TransactionContext(tx_client, publisher, table)  # the publisher persists last anyway
    reader = TransactionalReader(client, tx_client, T)

    with context.transaction():
        table.put(b"order-1", b"d:state", b"paid")
        publisher.publish(T, [b"order-1 paid"])
        assert reader.poll() == []  # nothing visible before commit
    assert payloads(reader.poll()) == [b"order-1 paid"]
    context.start()
    assert table.get(b"order-1", b"d:state") == b"paid"
    context.abort()


def test_conflict_after_persisting_rolls_back_the_message(
    client: MessagingClient, tx_client: TransactionClient, state_table: str, hbase_address: str
) -> None:
    client.create_topic(T)
    one = (TransactionalTable(client.installation.table("state")), TransactionalPublisher(client))
    two = (TransactionalTable(client.installation.table("state")), TransactionalPublisher(client))
    first, second = TransactionContext(tx_client, *one), TransactionContext(tx_client, *two)
    first.start()
    second.start()
    for (table, publisher), who in ((one, b"first"), (two, b"second")):
        table.put(b"order-7", b"d:state", who)
        publisher.publish(T, [who + b" changed order-7"])
    first.finish()
    # the second persisted nothing yet when the conflict is found at can-commit
    with pytest.raises(TransactionConflict):
        second.finish()
    reader = TransactionalReader(client, tx_client, T)
    assert payloads(reader.poll()) == [b"first changed order-7"]

    # now a conflict found at commit, after the message was published: it must be rolled back
    third = (TransactionalTable(client.installation.table("state")), TransactionalPublisher(client))
    fourth = (TransactionalTable(client.installation.table("state")), TransactionalPublisher(client))
    ctx3, ctx4 = TransactionContext(tx_client, *third), TransactionContext(tx_client, *fourth)
    ctx3.start()
    ctx4.start()
    third[0].put(b"order-8", b"d:state", b"third")
    fourth[0].put(b"order-8", b"d:state", b"fourth")
    fourth[1].publish(T, [b"fourth changed order-8"])
    tx_client.can_commit(ctx4.tx, fourth[0].get_tx_changes())  # ctx4 passed its check...
    ctx3.finish()  # ...then ctx3 commits the same row
    fourth[0].commit_tx()
    fourth[1].commit_tx()  # the message is in the table now
    with pytest.raises(TransactionConflict):
        tx_client.commit(ctx4.tx)
    doomed = ctx4.tx
    ctx4.abort()
    # both participants rolled back what they persisted: an abort, so the invalid list does not grow
    assert doomed.tx_id not in tx_client.snapshot().invalid and tx_client.invalid_size() == 0
    assert payloads(reader.poll()) == []  # transactional readers never see it
    assert payloads(client.fetch(T))[-1] == b"fourth changed order-8"  # non-transactional readers do
    # the table's version at fourth's write pointer now holds the rollback marker
    versions = stored_versions(hbase_address, state_table, b"order-8", b"d:state")
    assert versions[doomed.write_pointer] == ROLLED_BACK and b"\x00third" in versions.values()
    check = TransactionContext(tx_client, TransactionalTable(client.installation.table("state")))
    check.start()  # sees fourth's pointer as neither invalid nor in progress: only the marker hides it
    assert check.tx.is_visible(doomed.write_pointer)
    assert check.participants[0].get(b"order-8", b"d:state") == b"third"
    check.abort()


def test_table_rollback_keeps_older_versions_and_any_user_value_round_trips(
    client: MessagingClient, tx_client: TransactionClient, state_table: str
) -> None:
    table = TransactionalTable(client.installation.table("state"))
    context = TransactionContext(tx_client, table)
    with context.transaction():
        table.put(b"r", b"d:marker-like", ROLLED_BACK)  # a user value equal to the marker's bytes
        table.put(b"r", b"d:empty", b"")
    with pytest.raises(RuntimeError), context.transaction():
        table.put(b"r", b"d:marker-like", b"changed")
        table.put(b"new", b"d:c", b"only version")
        table.commit_tx()  # persisted, then the application fails
        raise RuntimeError("give up after persisting")
    assert tx_client.invalid_size() == 0
    with context.transaction():
        assert table.get(b"r", b"d:marker-like") == ROLLED_BACK
        assert table.get(b"r", b"d:empty") == b""
        assert table.get(b"new", b"d:c") is None  # its only version was rolled back


def test_timed_out_transaction_is_skipped_by_transactional_readers(
    client: MessagingClient, tx_client: TransactionClient
) -> None:
    client.create_topic(T)
    client.publish(T, [b"before"])
    doomed = tx_client.start_short(timeout_seconds=1)
    client.publish(T, [b"never committed"], tx_write_pointer=doomed.write_pointer)
    client.publish(T, [b"after"])
    reader = TransactionalReader(client, tx_client, T)
    assert payloads(reader.poll()) == [b"before"]  # stops at the in-progress transaction
    deadline = time.monotonic() + 20
    while doomed.tx_id not in tx_client.snapshot().invalid:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert payloads(reader.poll()) == [b"after"]  # invalid: skipped, and the fetch goes on
    assert payloads(client.fetch(T)) == [b"before", b"never committed", b"after"]


def test_long_transaction_stores_and_becomes_visible_at_once(
    client: MessagingClient, tx_client: TransactionClient
) -> None:
    client.create_topic(T)
    publisher = TransactionalPublisher(client)
    context = TransactionContext(tx_client, publisher)
    context.start_long()
    for i in range(5):
        publisher.publish(T, [f"part-{i}".encode()])
    assert payloads(client.fetch(T)) == []  # stored in the payload table, no pointer row yet
    context.finish()
    reader = TransactionalReader(client, tx_client, T)
    assert payloads(reader.poll()) == [f"part-{i}".encode() for i in range(5)]


def test_big_buffer_switches_to_the_payload_table(client: MessagingClient, tx_client: TransactionClient) -> None:
    client.create_topic(T)
    publisher = TransactionalPublisher(client, buffer_bytes=10)
    context = TransactionContext(tx_client, publisher)
    with context.transaction():
        publisher.publish(T, [b"small"])
        publisher.publish(T, [b"pushes it over"])
        publisher.publish(T, [b"last"])
    assert payloads(TransactionalReader(client, tx_client, T).poll()) == [b"small", b"pushes it over", b"last"]


def test_non_transactional_publish_needs_no_transaction_server(client: MessagingClient) -> None:
    client.create_topic(T)
    with (
        TransactionClient(f"127.0.0.1:{free_port()}", timeout_seconds=1) as nobody,
        pytest.raises(TransactionServiceUnavailable),
    ):
        nobody.status()
    client.publish(T, [b"still works"])
    assert payloads(client.fetch(T)) == [b"still works"]
