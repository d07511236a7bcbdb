"""Spark (PySpark, local mode, JDK 17) against the real HBase and a real transaction server."""

from __future__ import annotations

import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, TmsError, TopicId
from tms_hbase.spark import BulkPublish, Where, publish, read, use_current_python
from tms_hbase.tx.client import TransactionClient

from .test_tx_server import Server, free_port

T = TopicId("spark", "events")


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    use_current_python()  # the workers must import tms_hbase: run them on this interpreter, not PATH's python3
    session = (
        SparkSession.builder.master("local[4, 3]")  # 4 task slots, a failed task is tried 3 times
        .appName("tms-hbase-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def tx(tms_env: dict[str, str]) -> Iterator[TransactionClient]:
    server = Server(tms_env, free_port()).start()
    with TransactionClient(server.address) as client:
        yield client
    server.stop()


@pytest.fixture
def where(hbase_address: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> Where:
    monkeypatch.setenv("TMS_HBASE_THRIFT", hbase_address)  # the executors are forked from this process
    monkeypatch.setenv("TMS_TABLE_PREFIX", prefix)
    return Where(hbase_address, prefix)


def committed(client: MessagingClient, tx: TransactionClient) -> list[bytes]:
    reader = tx.start_short()
    try:
        return [m.payload for m in client.fetch(T, transaction=reader)]
    finally:
        tx.abort(reader)


def test_workers_on_a_python_without_tms_hbase_fail_fast_with_a_clear_error(
    spark, client: MessagingClient, where: Where, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client.create_topic(T)
    client.publish(T, [b"one"])
    venv.create(tmp_path / "bare", with_pip=False)  # what a machine's own python3 is: no tms-hbase in it
    monkeypatch.setattr(spark.sparkContext, "pythonExec", str(tmp_path / "bare" / "bin" / "python"))
    with pytest.raises(TmsError, match=r"cannot import tms_hbase .*use_current_python"):
        read(spark, T, where=where)


@pytest.mark.slow
def test_a_million_messages_from_four_partitions_appear_at_once(
    spark, client: MessagingClient, tx: TransactionClient, where: Where
) -> None:
    client.create_topic(T)
    total = 1_000_000
    rdd = spark.sparkContext.range(0, total, numSlices=4).map(lambda i: b"m%07d" % i)
    job = BulkPublish(T, tx, where=where, batch=5000)
    job.start()
    assert job.store(rdd) == total
    assert committed(client, tx) == []  # stored, but no pointer row and the transaction is open
    job.commit()
    seen = committed(client, tx)
    assert len(seen) == total and seen == [b"m%07d" % i for i in range(total)]  # partition order, no duplicates


def test_a_job_failing_after_storing_leaves_nothing_visible(
    spark, client: MessagingClient, tx: TransactionClient, where: Where
) -> None:
    client.create_topic(T)
    client.publish(T, [b"before"])

    def explode(i: int) -> bytes:
        if i == 1500:
            raise RuntimeError("task failure after storing")
        return b"x%d" % i

    rdd = spark.sparkContext.range(0, 2000, numSlices=2).map(explode)
    with pytest.raises(Exception, match="task failure after storing"):
        publish(rdd, T, tx, where=where, batch=100)
    assert committed(client, tx) == [b"before"]
    assert [m.payload for m in client.fetch(T)] == [b"before"]  # not even a pointer row


def test_retried_tasks_do_not_duplicate(spark, client: MessagingClient, tx: TransactionClient, where: Where) -> None:
    client.create_topic(T)

    def flaky(i: int) -> bytes:
        from pyspark import TaskContext

        if i % 1000 == 999 and TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("first attempt dies after storing most of its partition")
        return b"r%04d" % i

    rdd = spark.sparkContext.range(0, 4000, numSlices=4).map(flaky)
    publish(rdd, T, tx, where=where, batch=100)
    assert committed(client, tx) == [b"r%04d" % i for i in range(4000)]


def test_dataframe_equals_sequential_fetch(spark, client: MessagingClient, tx: TransactionClient, where: Where) -> None:
    client.create_topic(T)
    for i in range(40):
        client.publish(T, [b"p%02d-%d" % (i, j) for j in range(3)])
    publish(spark.createDataFrame([(b"bulk%d" % i,) for i in range(10)], ["payload"]), T, tx, where=where)
    every = list(client.fetch(T))
    times = sorted({m.publish_time for m in every})

    def rows(df) -> list[tuple]:
        return [(bytes(r.id), r.publish_time, bytes(r.payload)) for r in df.orderBy("position", "index").collect()]

    expected = [(m.id, m.publish_time, m.payload) for m in every]
    assert rows(read(spark, T, where=where, partitions=5)) == expected
    start, end = times[len(times) // 4], times[3 * len(times) // 4]
    ranged = [(m.id, m.publish_time, m.payload) for m in every if start <= m.publish_time < end]
    assert rows(read(spark, T, where=where, start_time=start, end_time=end, partitions=3)) == ranged
    ids = [bytes(r.id) for r in read(spark, T, where=where, partitions=7).collect()]
    assert sorted(ids) == [m.id for m in every]
    lo, hi = every[20].id, every[110].id  # an id range, crossing the bulk-published pointer row
    by_id = [(m.id, m.publish_time, m.payload) for m in every if lo <= m.id < hi]
    assert rows(read(spark, T, where=where, start_message=lo, end_message=hi, partitions=4)) == by_id

    blocker = tx.start_short()
    client.publish(T, [b"in flight"], tx_write_pointer=blocker.write_pointer)
    client.publish(T, [b"after it"])
    reader = tx.start_short()
    assert rows(read(spark, T, where=where, transaction=reader, partitions=4)) == expected  # cut at the blocker
    tx.abort(reader)
    tx.abort(blocker)


def test_distributed_sweep_runs_regions_as_spark_tasks(spark, client: MessagingClient, where: Where) -> None:
    from compactor.regions import list_regions
    from compactor.state import SweepState
    from tms_hbase.rows import message_key
    from tms_hbase.spark import sweep

    from ..hbase_admin import split_table

    old, live = TopicId("spark", "old"), TopicId("spark", "live")
    client.create_topic(old)
    client.create_topic(live)
    for i in range(40):
        client.publish(old, [b"o%d" % i])
        client.publish(live, [b"l%d" % i])
    client.delete_topic(old)
    split_table(client.tables.messages, message_key(old, 1, 20))
    regions = list_regions(client.hbase, client.tables.messages)
    assert len(regions) >= 2
    report = sweep(spark, where=where, partitions=3, grace_seconds=900)
    assert report["messages_dropped"] == 40 and report["regions_swept"] == len(regions) + 1  # + payload table
    assert report["tx_snapshot_source"] == f"table {client.tables.txstate}"  # one source, not one per task
    assert report["tx_snapshot_age_seconds"] is not None and not report["invalid_list_skipped"]
    assert [m.payload for m in client.fetch(live)] == [b"l%d" % i for i in range(40)]
    records = SweepState(client.hbase, client.tables.txstate).records(client.tables.messages)
    assert all(records[r.start].completed for r in regions)
