"""The ``tms`` Spark data source on a standalone Spark cluster (tests/spark_cluster.py: a master and two workers of
one core each, executors in processes of their own running the virtualenv's Python, as docs/spark.md tells a
cluster to) reading and writing topics on the HBase cluster: batch reads and writes, and a streaming query
A -> B that survives the SIGKILL of a worker (its executors die with it; the remaining worker, then a new
one, runs the tasks) and of a region server, exactly once: B holds every message of A once, in A's order."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tms_hbase import MessageId, MessagingClient, TopicId
from tms_hbase.errors import HBaseUnavailable
from tms_hbase.spark import register
from tms_hbase_launcher.cluster import ClusterHBase

from ..spark_cluster import SparkCluster
from ..tx_server import TxServer, free_port
from .workload import RESUME_BOUND, Workload

TIMEOUT = "60"
"""Seconds each HBase call of the data source may take: more than a region server's recovery (about 20 s here),
so a driver's planning call outlasts a crash instead of failing the query."""
CONNECT_BACK = "Python worker failed to connect back"


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def spark(spark_cluster: SparkCluster) -> Iterator[object]:
    """A driver (this process) on the Spark cluster; its Python tasks run on the interpreter PYSPARK_PYTHON names."""
    from pyspark.sql import SparkSession

    before = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the virtualenv's python: it has tms-hbase
    builder = SparkSession.builder.master(spark_cluster.url).appName("tms-hbase-cluster-tests")
    for key, value in spark_cluster.session_config().items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
    if before is None:
        os.environ.pop("PYSPARK_PYTHON")
    else:
        os.environ["PYSPARK_PYTHON"] = before


@pytest.fixture
def server(tms_env: dict[str, str]) -> Iterator[TxServer]:
    s = TxServer(tms_env, free_port()).start()
    yield s
    s.stop()


@pytest.fixture
def options(hbase_address: str, prefix: str, server: TxServer) -> dict[str, str]:
    return {"thrift": hbase_address, "prefix": prefix, "txServer": server.address, "timeout": TIMEOUT}


def _task_processes(spark) -> set[tuple[str, int]]:
    """(interpreter, pid of the executor JVM above it) of the Python workers that ran tasks: four per core."""

    def where(_):  # (no type hints: PySpark would read them as a pandas UDF's)
        import os
        import sys
        from pathlib import Path

        pid = os.getpid()  # up from this worker (forked by the executor's Python daemon) to the executor
        while pid > 1 and b"CoarseGrainedExecutorBackend" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        yield (sys.executable, pid)

    tasks = int(spark.conf.get("spark.cores.max")) * 4
    return set(spark.sparkContext.parallelize(range(tasks), tasks).mapPartitions(where).collect())


def _started(stream) -> Any:
    """``stream.start()``, once its first trigger ran. Spark 4 gives the driver's Python process of a streaming
    source a fixed 10 s to connect back to the driver when the query starts, which a machine at load 30 can miss:
    the query then fails before its first trigger with "Python worker failed to connect back", and is started
    again (at most twice more) from its checkpoint, as an operator would; any other failure fails the test."""
    for attempt in range(3):
        query = stream.start()
        deadline = time.monotonic() + 300
        while query.isActive and query.lastProgress is None:
            assert time.monotonic() < deadline, "the query ran no trigger in 300 s"
            time.sleep(0.5)
        if query.isActive:
            return query
        failure = str(query.exception())
        assert CONNECT_BACK in failure and attempt < 2, f"the query failed: {failure}"
        print(f"the query failed to start ({CONNECT_BACK}); starting it again", flush=True)
    raise AssertionError("unreachable")


def test_batch_write_and_read_run_on_the_executors(
    spark, spark_cluster: SparkCluster, client: MessagingClient, options: dict[str, str]
) -> None:
    topic = TopicId("spark", "batch")
    client.create_topic(topic)
    client.publish(topic, [b"before"])
    df = spark.range(0, 20_000, numPartitions=4).selectExpr("format_string('row-%05d', id) AS payload")
    df.write.format("tms").options(**options, topic=str(topic)).mode("append").save()
    expected = [b"before"] + [b"row-%05d" % i for i in range(20_000)]
    assert [m.payload for m in client.fetch(topic)] == expected  # one transaction, partitions in order
    for transactional in ("false", "true"):
        read = spark.read.format("tms").options(
            **options, topic=str(topic), partitions="4", transactional=transactional
        )
        rows = read.load().selectExpr("id", "payload").collect()
        assert [bytes(r.payload) for r in rows] == expected
        assert [bytes(r.id) for r in rows] == [m.id for m in client.fetch(topic)]
    # the tasks ran in the executors' Python workers (not in this driver), on the interpreter set for them
    executors = {pid for name in spark_cluster.alive for pid in spark_cluster.executors(name)}
    assert len(executors) == 2, "one executor on each worker"
    tasks = _task_processes(spark)
    assert {python for python, _ in tasks} == {sys.executable}
    assert {executor for _, executor in tasks} <= executors


def test_stream_a_to_b_exactly_once_across_a_killed_worker_and_region_server(
    spark,
    spark_cluster: SparkCluster,
    cluster: ClusterHBase,
    client: MessagingClient,
    tms_env: dict[str, str],
    options: dict[str, str],
    prefix: str,
    tmp_path: Path,
) -> None:
    a, b = TopicId("spark", "a"), TopicId("spark", "b")
    client.create_topic(a)
    client.create_topic(b)
    load = Workload(tms_env, a, tmp_path, 1, [], interval=0.1)  # a writer process publishing to A
    stream = (
        spark.readStream.format("tms")
        .options(**options, topic=str(a), maxMessagesPerTrigger="500", partitions="2")
        .load()
        .selectExpr("upper(CAST(payload AS STRING)) AS payload")
        .writeStream.format("tms")
        .options(**options, topic=str(b))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="0 seconds")
    )
    query = _started(stream)

    def grows(what: str, timeout: float = RESUME_BOUND + 60) -> None:
        """Wait until two more micro-batches are published in B (each is one row: B's tail moves twice)."""
        tails: list[int] = []  # the distinct tails seen since
        deadline = time.monotonic() + timeout
        while len(tails) < 3:
            assert query.exception() is None, f"the query failed: {query.exception()}"
            assert time.monotonic() < deadline, f"the stream wrote nothing to B for {timeout:.0f}s after {what}"
            if (now := tail()) is not None and now not in tails[-1:]:
                tails.append(now)
            time.sleep(0.5)

    def tail() -> int | None:
        """B's last position; None while this test's own client cannot read it (a region server just died)."""
        try:
            return client.slices.positions(b).last
        except HBaseUnavailable:
            return None

    def written() -> int:
        return sum(1 for _ in client.fetch(b))

    try:
        load.running()
        grows("it started", 300)
        victim = next(iter(spark_cluster.alive))
        killed = spark_cluster.kill_worker(victim)
        print(f"killed {victim} and its executors: pids {killed}", flush=True)
        grows(f"killing {victim}")  # on the remaining worker
        spark_cluster.start_worker()
        spark_cluster.wait(
            lambda state: [w["coresused"] for w in state["workers"] if w["state"] == "ALIVE"] == [1, 1],
            "an executor of the query on the new worker",
        )
        server = cluster.server_of_last_region(f"{prefix}_messages")  # where new messages of A and B go
        cluster.kill(server)
        print(f"killed region server {server}", flush=True)
        grows(f"killing {server}")
        cluster.start_process(server, timeout=300)
        load.finish()
        total = sum(1 for _ in client.fetch(a))
        deadline = time.monotonic() + 300
        while written() < total:
            assert query.exception() is None, f"the query failed: {query.exception()}"
            assert time.monotonic() < deadline, f"B has {written()} of A's {total} messages"
            time.sleep(3)
    finally:
        load.kill()
        query.stop()
    print(load.check(client))  # A itself: every acknowledged batch once, in order
    expected = [m.payload.upper() for m in client.fetch(a)]
    got = [m.payload for m in client.fetch(b)]
    assert len(got) == len(set(got)), "a message twice in B"
    assert got == expected  # every message of A once, in A's order
    sizes: dict[int, int] = {}
    for m in client.fetch(b):
        position = MessageId.decode(m.id).position
        sizes[position] = sizes.get(position, 0) + 1
    assert max(sizes.values()) <= 500  # one pointer row per micro-batch, within maxMessagesPerTrigger
