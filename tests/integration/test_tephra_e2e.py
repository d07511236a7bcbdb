"""tms-hbase inside an existing Tephra deployment: real Apache Tephra 0.16.1 (started as the compatibility tests
start it), real HBase, real participants, the real sweeper and admin CLIs.

Transactional publish + commit, abort, a transaction that times out (invalid at Tephra, skipped by transactional
readers, marked by the sweeper from Tephra's snapshot, then safely pruned from Tephra's invalid list), and the
sweeper's behaviour when Tephra stops answering.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.client_tx import TransactionalPublisher, TransactionalReader
from tms_hbase.config import thrift_address
from tms_hbase.errors import TransactionConflict, TransactionNotInProgress
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow
from tms_hbase.sweep.state import SweepState
from tms_hbase.tx.client import TransactionClient
from tms_hbase.txaware.context import TransactionContext
from tms_hbase.txaware.table import TransactionalTable
from tms_hbase.txserver.snapshot_source import ServerSnapshots
from tms_hbase_sweeper.sweep import Sweeper

from ..tcp_proxy import TcpProxy
from ..tephra.launcher import TephraServer

T = TopicId("shop", "orders")


@pytest.fixture
def tx(tephra_server: TephraServer) -> Iterator[TransactionClient]:
    """Our client on the module's Tephra server, reset first so every test starts from an empty state."""
    with TransactionClient(tephra_server.address) as client:
        client.reset()
        yield client


def payloads(messages) -> list[bytes]:
    return [m.payload for m in messages]


def tool(name: str, env: dict[str, str], *args: str) -> dict:
    result = subprocess.run(
        [str(Path(sys.executable).with_name(name)), *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def tx_pointers(client: MessagingClient) -> list[int | None]:
    """The write pointers of the topic's batch rows (a sequencer's counter row and skip markers hold none)."""
    rows = [
        BatchRow.decode(data[MESSAGE_COLUMN])
        for _, data in client.installation.messages.scan()
        if MESSAGE_COLUMN in data
    ]
    return [row.tx_pointer for row in rows if not row.skip]


def wait_invalid(tx: TransactionClient, tx_id: int) -> None:
    deadline = time.monotonic() + 30  # Tephra checks for timeouts every second here (TephraCompat.java)
    while tx_id not in tx.snapshot().invalid:
        assert time.monotonic() < deadline, "Tephra never timed the transaction out"
        time.sleep(0.2)


def test_commit_is_visible_to_transactional_readers(
    client: MessagingClient, tx: TransactionClient, state_table: str
) -> None:
    client.create_topic(T)
    table, publisher = TransactionalTable(client.installation.table("state")), TransactionalPublisher(client)
    context = TransactionContext(tx, table, publisher)
    reader = TransactionalReader(client, tx, T)
    with context.transaction() as running:
        table.put(b"order-1", b"d:state", b"paid")
        publisher.publish(T, [b"order-1 paid"])
        assert reader.poll() == []  # nothing before commit
        assert running.tx_id in tx.snapshot().in_progress  # Tephra knows the transaction
    assert payloads(reader.poll()) == [b"order-1 paid"]
    context.start()
    assert table.get(b"order-1", b"d:state") == b"paid"
    context.abort()
    assert tx.invalid_size() == 0


def test_abort_rolls_back(client: MessagingClient, tx: TransactionClient, state_table: str) -> None:
    client.create_topic(T)
    publisher = TransactionalPublisher(client)
    context = TransactionContext(tx, publisher)
    with pytest.raises(RuntimeError), context.transaction():
        publisher.publish(T, [b"aborted"])
        raise RuntimeError("the application gives up")
    # a long transaction stores as it goes; its abort makes it invalid at Tephra
    long_tx = context.start_long()
    publisher.publish(T, [b"stored, then aborted"])
    context.abort()
    assert long_tx.tx_id in tx.snapshot().invalid
    # a conflict found at commit, after the publish persisted: rolled back with its handle
    one = (TransactionalTable(client.installation.table("state")), TransactionalPublisher(client))
    two = (TransactionalTable(client.installation.table("state")), TransactionalPublisher(client))
    first, second = TransactionContext(tx, *one), TransactionContext(tx, *two)
    first.start()
    second.start()
    one[0].put(b"order-8", b"d:state", b"first")
    two[0].put(b"order-8", b"d:state", b"second")
    two[1].publish(T, [b"second changed order-8"])
    tx.can_commit(second.tx, two[0].get_tx_changes())
    first.finish()
    two[0].commit_tx()
    two[1].commit_tx()  # the message is in HBase now
    with pytest.raises(TransactionConflict):
        tx.commit(second.tx)
    doomed = second.tx
    second.abort()  # both participants undid what they persisted: aborted at Tephra, not invalidated
    assert doomed.tx_id not in tx.snapshot().invalid
    assert payloads(TransactionalReader(client, tx, T).poll()) == []
    assert payloads(client.fetch(T)) == [b"second changed order-8"]  # non-transactional readers: marked only
    with first.transaction():  # a later transaction sees the table's rolled-back version as committed
        assert one[0].get(b"order-8", b"d:state") == b"first"


def test_timed_out_transaction_is_skipped_swept_and_pruned(
    client: MessagingClient, tx: TransactionClient, tephra_server: TephraServer, tms_env: dict[str, str]
) -> None:
    client.create_topic(T)
    client.publish(T, [b"before"])
    doomed = tx.start_short(timeout_seconds=1)
    publisher = TransactionalPublisher(client)
    publisher.start_tx(doomed)
    publisher.publish(T, [b"never committed"])
    publisher.commit_tx()  # persisted; then the writer stalls past its timeout
    client.publish(T, [b"after"])
    reader = TransactionalReader(client, tx, T)
    assert payloads(reader.poll()) == [b"before"]  # stops at the transaction in progress
    wait_invalid(tx, doomed.tx_id)
    with pytest.raises(TransactionNotInProgress):
        tx.commit(doomed)
    assert payloads(reader.poll()) == [b"after"]  # invalid: skipped

    env = {**tms_env, "TMS_TX_SERVER": tephra_server.address}
    prune = ("tx", "prune", "--max-lifetime", "0")
    assert tool("tms-admin", env, *prune)["pruned"] == []  # nothing swept yet: nothing is safe to prune
    report = tool("tms-sweeper", tms_env, "once", "--tx-server", tephra_server.address)
    assert (report["invalid_transactions"], report["messages_invalidated"]) == (1, 1)
    assert report["tx_snapshot_source"] == f"transaction server {tephra_server.address}"
    assert not report["invalid_list_skipped"]
    assert tx_pointers(client) == [None, -doomed.tx_id, None]  # the doomed row carries -p now

    assert tool("tms-admin", env, *prune)["pruned"] == [doomed.tx_id]
    assert tx.invalid_size() == 0  # truncated at Tephra
    assert payloads(TransactionalReader(client, tx, T).poll()) == [b"before", b"after"]  # still skipped


def test_sweeper_keeps_the_last_good_snapshot_then_stops_invalid_list_work(
    client: MessagingClient, tx: TransactionClient, tephra_server: TephraServer, caplog: pytest.LogCaptureFixture
) -> None:
    client.create_topic(T)
    doomed = tx.start_long()
    client.publish(T, [b"from doomed"], tx_write_pointer=doomed.write_pointer)
    tx.abort(doomed)  # long: invalid
    clock = [0.0]
    proxy = TcpProxy(thrift_address(tephra_server.address))
    try:
        sweeper = Sweeper(
            client.installation,
            snapshot_refresh_seconds=0,
            max_snapshot_age=60,
            tx_source=ServerSnapshots(proxy.address, timeout_seconds=2),
        )
        sweeper.tx_snapshots.monotonic = lambda: clock[0]
        assert sweeper.sweep_once().messages_invalidated == 1
        records = SweepState(client.installation.txstate).records(client.installation.messages.name)
        bound = [r.prune_bound for r in records.values()]
        assert bound == [doomed.tx_id]

        proxy.fault = "reset"  # Tephra unreachable: the last good view is used while young enough
        proxy.cut()
        clock[0] = 30.0
        client.publish(T, [b"from doomed, later"], tx_write_pointer=doomed.write_pointer)
        report = sweeper.sweep_once()
        assert report.messages_invalidated == 1 and not report.invalid_list_skipped
        assert report.tx_snapshot_age_seconds == 30.0 and sweeper.metrics.snapshot_age._value.get() == 30.0
        assert "keeping the last good view, 30 s old" in caplog.text

        clock[0] = 61.0  # too old: no invalid-list work, loudly, and the region's prune bound is left alone
        client.publish(T, [b"from doomed, too late"], tx_write_pointer=doomed.write_pointer)
        report = sweeper.sweep_once()
        assert report.invalid_list_skipped and report.messages_invalidated == 0
        assert "stops invalid-list work" in caplog.text
        assert tx_pointers(client)[-1] == doomed.tx_id  # not marked from a stale view
        records = SweepState(client.installation.txstate).records(client.installation.messages.name)
        assert [r.prune_bound for r in records.values()] == bound

        proxy.fault = None  # back: work resumes
        report = sweeper.sweep_once()
        assert report.messages_invalidated == 1 and not report.invalid_list_skipped
        sweeper.close()
    finally:
        proxy.close()
