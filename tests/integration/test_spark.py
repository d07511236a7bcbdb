"""The ``tms`` Spark data source (PySpark 4, local mode, JDK 17) against the real HBase and a real
transaction server; the streaming crash test runs its Spark driver as a process of its own."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import venv
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tms_hbase import CorruptData, MessageId, MessagingClient, Record, TmsError, TopicId
from tms_hbase.model.rows import EXTRA_COLUMN, payload_key
from tms_hbase.spark import register, use_current_python
from tms_hbase.spark.sink_state import COMMITTED, OPEN, PUBLISHING, SinkStates
from tms_hbase.tx import TransactionCodec
from tms_hbase.tx.client import TransactionClient

from ..tx_server import TxServer, free_port
from ..waiting import wait_for

# A Spark session (a JVM) and Python workers: minutes, so in `make test-slow` (and CI's loaded step), not `make test`.
pytestmark = pytest.mark.slow

T = TopicId("spark", "events")
ROOT = Path(__file__).resolve().parents[2]


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
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture
def server(tms_env: dict[str, str]) -> Iterator[TxServer]:
    s = TxServer(tms_env, free_port()).start()
    yield s
    s.stop()


@pytest.fixture
def tx(server: TxServer) -> Iterator[TransactionClient]:
    with TransactionClient(server.address) as client:
        yield client


@pytest.fixture
def options(hbase_address: str, prefix: str, server: TxServer) -> dict[str, str]:
    """The data source options that point at this test's tables and transaction server."""
    return {"thrift": hbase_address, "prefix": prefix, "txServer": server.address}


def read(spark, topic: TopicId, options: dict[str, str], **more: object):
    return spark.read.format("tms").options(**options, topic=str(topic), **{k: str(v) for k, v in more.items()}).load()


def rows(df) -> list[tuple[bytes, int, bytes]]:
    """(id, publish time in ms, payload) as the DataFrame holds them: its partitions are in topic order."""
    selected = df.selectExpr("id", "unix_millis(publish_time) AS ms", "payload")
    return [(bytes(r.id), r.ms, bytes(r.payload)) for r in selected.collect()]


def write(df, topic: TopicId, options: dict[str, str], **more: object) -> None:
    df.write.format("tms").options(**options, topic=str(topic), **{k: str(v) for k, v in more.items()}).mode(
        "append"
    ).save()


def committed(client: MessagingClient, tx: TransactionClient, topic: TopicId = T) -> list[bytes]:
    reader = tx.start_short()
    try:
        return [m.payload for m in client.fetch(topic, transaction=reader)]
    finally:
        tx.abort(reader)


def test_workers_on_a_python_without_tms_hbase_fail_fast_with_a_clear_error(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv.create(tmp_path / "bare", with_pip=False)  # what a machine's own python3 is: no tms-hbase in it
    monkeypatch.setattr(spark.sparkContext, "pythonExec", str(tmp_path / "bare" / "bin" / "python"))
    with pytest.raises(TmsError, match=r"cannot import tms_hbase .*use_current_python"):
        register(spark)


def test_workers_import_the_installed_compiled_pyspark(spark) -> None:
    """Not the bytecode-less pyspark.zip that Spark puts first on its workers' PYTHONPATH: compiling it at each
    start kept a streaming query's worker from connecting back within Spark's fixed 10 s on a loaded machine."""
    files = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect()
    assert ".zip" not in files[0], files


@pytest.mark.parametrize("ordering", ["chain", "sequencer"])
def test_batch_read_equals_sequential_fetch(
    spark, client: MessagingClient, tx: TransactionClient, options: dict[str, str], ordering: str
) -> None:
    client.create_topic(T, {"ordering": ordering})  # offsets as keys (sequencer) or dense row positions
    for i in range(40):
        client.publish(T, [b"p%02d-%d" % (i, j) for j in range(3)])
    bulk = spark.range(0, 12_000, numPartitions=3).selectExpr("CAST(concat('bulk', id) AS BINARY) AS payload")
    write(bulk, T, options)  # one pointer row of 12,000 messages, read in pieces
    for i in range(40, 50):
        client.publish(T, [b"p%02d" % i])
    every = [(m.id, m.publish_time, m.payload) for m in client.fetch(T)]
    assert len(every) == 40 * 3 + 12_000 + 10

    whole = read(spark, T, options, partitions=5)
    assert whole.rdd.getNumPartitions() > 5  # the position slices, and the bulk row split in pieces
    assert rows(whole) == every

    times = sorted({t for _, t, _ in every})
    start, end = times[len(times) // 4], times[3 * len(times) // 4]
    by_time = [m for m in every if start <= m[1] < end]
    assert rows(read(spark, T, options, startingTime=start, endingTime=end, partitions=3)) == by_time

    lo, hi = every[50][0], every[9_000][0]  # an id range that ends inside the bulk publish's row
    by_id = [m for m in every if lo <= m[0] < hi]
    assert rows(read(spark, T, options, startingId=lo.hex(), endingId=hi.hex().upper(), partitions=4)) == by_id
    assert rows(read(spark, T, options, startingId=every[-5][0].hex())) == every[-5:]

    blocker = tx.start_short()
    client.publish(T, [b"in flight"], tx_write_pointer=blocker.write_pointer)
    client.publish(T, [b"after it"])
    transactional = read(spark, T, options, transactional="true", partitions=4)
    assert rows(transactional) == every  # cut before the transaction in progress, as a fetch is
    reader = tx.start_short()
    assert [p for _, _, p in rows(transactional)] == [m.payload for m in client.fetch(T, transaction=reader)]
    tx.abort(reader)
    tx.can_commit(blocker, [])
    tx.commit(blocker)
    after = rows(read(spark, T, options, transactional="true"))
    assert [p for _, _, p in after[-2:]] == [b"in flight", b"after it"]


def test_a_bulk_row_read_in_pieces_equals_sequential_fetch(
    spark, client: MessagingClient, options: dict[str, str]
) -> None:
    client.create_topic(T)
    client.publish(T, [b"first", b"second"])
    bulk = spark.range(0, 30_000, numPartitions=1).selectExpr("CAST(concat('m', id) AS BINARY) AS payload")
    write(bulk, T, options)  # one pointer row, one dense block of 30,000 sequences: cut inside the block
    client.publish(T, [b"last"])
    every = [(m.id, m.publish_time, m.payload) for m in client.fetch(T)]

    whole = read(spark, T, options, partitions=3)
    assert whole.rdd.getNumPartitions() >= 3
    assert rows(whole) == every
    lo, hi = every[7_001][0], every[23_456][0]  # both inside the bulk row, inside pieces
    assert rows(read(spark, T, options, startingId=lo.hex(), endingId=hi.hex(), partitions=3)) == [
        m for m in every if lo <= m[0] < hi
    ]


def test_a_bulk_row_of_several_blocks_is_read_in_as_many_pieces_as_asked(
    spark, client: MessagingClient, options: dict[str, str]
) -> None:
    """A pointer row is cut by message counts across the blocks its write tasks stored (one block per
    task), not at every block's start: a read has the partitions asked for, of equal sizes, and
    together exactly the messages of its range, in order, none twice or lost at a boundary."""
    client.create_topic(T)
    bulk = spark.range(0, 30_000, numPartitions=3).selectExpr("CAST(concat('m', id) AS BINARY) AS payload")
    write(bulk, T, options)  # one pointer row: three blocks of 10,000 sequences
    every = [(m.id, m.publish_time, m.payload) for m in client.fetch(T)]
    assert len(every) == 30_000

    def sizes(df) -> list[int]:
        counts = df.selectExpr("spark_partition_id() AS p").groupBy("p").count().orderBy("p").collect()
        return [r["count"] for r in counts]

    for partitions, expected in ((1, [30_000]), (2, [15_000, 15_000]), (3, [10_000] * 3)):
        whole = read(spark, T, options, partitions=partitions)  # two: cut inside the middle block
        assert sizes(whole) == expected
        assert rows(whole) == every
    lo, hi = every[5_000][0], every[25_000][0]  # from the first block to the last: cut inside the second
    part = read(spark, T, options, startingId=lo.hex(), endingId=hi.hex(), partitions=2)
    assert sizes(part) == [10_000, 10_000]
    assert rows(part) == every[5_000:25_000]


def test_pieces_of_a_pointer_row_read_as_a_fetch_reads_them(
    client: MessagingClient, tx: TransactionClient, options: dict[str, str]
) -> None:
    from tms_hbase.spark.options import Options
    from tms_hbase.spark.reader import IdRange, read_range

    client.create_topic(T)
    client.publish(T, [b"inline"])
    writes = tx.start_long()
    base = 2**40
    for block in range(3):  # three dense blocks of 2,500, as three Spark tasks store them
        for first in range(0, 2_500, 1_000):
            payloads = [b"b%d-%d" % (block, i) for i in range(first, min(first + 1_000, 2_500))]
            client.store(T, payloads, writes.write_pointer, sequence=base + (block << 32) + first)
    client.publish(T, [], tx_write_pointer=writes.write_pointer)
    tx.can_commit(writes, [])
    tx.commit(writes)
    parsed = Options.parse({**options, "topic": str(T)})
    g = client.get_topic(T).generation
    every = list(client.fetch(T))
    at = MessageId.decode(every[1].id).position  # (a sequencer's offsets: 2, unless a publish timed out and retried)
    ids = [MessageId(g, at, i) for i in (0, base, base + 1, base + 1_234, (1 << 32) + base - 1, (1 << 32) + base)]
    ids += [MessageId(g, at, (2 << 32) + base + 2_000), MessageId(g, at + 1, 0)]

    def pieces(cuts: list[MessageId], pointer: int, transaction: bytes | None = None) -> list[tuple[bytes, int, bytes]]:
        got = []
        for a, b in itertools.pairwise(cuts):
            for batch in read_range(parsed, IdRange(bytes(a), bytes(b), transaction, pointer)):
                columns = ("id", "index", "payload")
                got += zip(*(batch.column(c).to_pylist() for c in columns), strict=True)
        return got

    expected = [(m.id, MessageId.decode(m.id).index, m.payload) for m in every[1:]]
    assert len(expected) == 7_500
    assert pieces(ids, writes.write_pointer) == expected  # every cut, inside blocks and between them

    failed = tx.start_long()  # a bulk write whose job failed after its pointer row was published
    client.store(T, [b"x", b"y"], failed.write_pointer, sequence=base)
    row = client.publish(T, [], tx_write_pointer=failed.write_pointer).position  # after the first one's span
    tx.abort(failed)
    cut = [MessageId(g, row, 0), MessageId(g, row, base + 1), MessageId(g, row + 1, 0)]
    reader = tx.start_short()
    snapshot = TransactionCodec.encode(reader)
    tx.abort(reader)
    assert pieces(ids, writes.write_pointer, snapshot) == expected  # committed: read as a fetch reads it
    assert pieces(cut, failed.write_pointer, snapshot) == []  # invalid: skipped as a fetch skips it
    assert [p for _, _, p in pieces(cut, failed.write_pointer)] == [b"x", b"y"]  # (not transactional: read)

    corrupt = payload_key(T, g, writes.write_pointer, base + 2_600)  # a payload row without its d:p cell
    client.installation.payloads.put(corrupt, {b"d:z": b"?"})
    with pytest.raises(CorruptData, match=rf"payload 1099511630376 of the message row at position {at} of spark"):
        pieces(ids, writes.write_pointer)
    client.installation.payloads.put(payload_key(T, g, writes.write_pointer, base + 7), {EXTRA_COLUMN: b"\x00"})
    with pytest.raises(CorruptData, match=rf"payload 1099511627783 of the message row at position {at} .*and headers"):
        pieces(ids, writes.write_pointer)  # a key-and-header cell that does not decode


def messages_of(df) -> list[tuple[bytes, bytes, bytes | None, tuple[tuple[str, bytes], ...]]]:
    """(id, payload, key, headers) of each row of ``df``, in its order, as the library's messages hold them."""
    found = []
    for r in df.select("id", "payload", "key", "headers").collect():
        headers = tuple((h["name"], bytes(h["value"])) for h in r.headers)
        found.append((bytes(r.id), bytes(r.payload), None if r.key is None else bytes(r.key), headers))
    return found


def test_keys_and_headers_read_and_written_byte_for_byte(
    spark, client: MessagingClient, tx: TransactionClient, options: dict[str, str], tmp_path: Path
) -> None:
    """Spark's ``key`` and ``headers`` columns are the messages' keys and headers on every read path (inline rows,
    a transactional store's pointer row, a Spark write's pointer row read in pieces; batch and stream), and a
    write with those columns stores them; rows written without keys read with key null and headers empty."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

    client.create_topic(T)
    client.publish(T, [b"old", b"plain"])  # a batch without records: stored as before keys existed
    binary = bytes(range(256))
    published = [
        b"plain too",
        Record(b"\x00body", key=b"\xffk\x00", headers=[("trace", b"\x00\x01"), ("trace", b"2"), ("ct", b"")]),
        Record(b"empty key", key=b""),
        Record(binary, headers=[("bin", binary)]),
    ]
    client.publish(T, published)
    stored = tx.start_long()
    client.store(T, [Record(b"s0", key=b"k0"), b"s1", Record(b"s2", headers=[("h", b"v")])], stored.write_pointer)
    client.publish(T, [], tx_write_pointer=stored.write_pointer)
    tx.can_commit(stored, [])
    tx.commit(stored)
    header = StructType([StructField("name", StringType()), StructField("value", BinaryType())])
    schema = StructType(
        [
            StructField("payload", BinaryType()),
            StructField("key", BinaryType()),
            StructField("headers", ArrayType(header)),
        ]
    )
    written = [
        (b"w%04d" % i, None if i % 3 == 0 else b"key-%d" % (i % 7), [] if i % 2 else [("n", b"%d" % i), ("n", b"")])
        for i in range(2_500)
    ]
    written[10] = (b"w0010", None, None)  # null headers: none
    write(spark.createDataFrame(written, schema), T, options)  # one pointer row, read in pieces
    text = spark.createDataFrame([("text", "k")], "payload string, key string")
    df = text.withColumn("headers", F.array(F.struct(F.lit("s").alias("name"), F.lit("v").alias("value"))))
    write(df, T, options)  # strings are stored as UTF-8

    expected = [(m.id, m.payload, m.key, m.headers) for m in client.fetch(T)]
    assert [m[1:] for m in expected[:7]] == [
        (b"old", None, ()),
        (b"plain", None, ()),
        (b"plain too", None, ()),
        (b"\x00body", b"\xffk\x00", (("trace", b"\x00\x01"), ("trace", b"2"), ("ct", b""))),
        (b"empty key", b"", ()),
        (binary, None, (("bin", binary),)),
        (b"s0", b"k0", ()),
    ]
    assert [m[1:] for m in expected[7:9]] == [(b"s1", None, ()), (b"s2", None, (("h", b"v"),))]
    assert [m[1:] for m in expected[9:-1]] == [
        (payload, key, tuple(headers or ())) for payload, key, headers in written
    ]
    assert expected[-1][1:] == (b"text", b"k", (("s", b"v"),))
    assert messages_of(read(spark, T, options, partitions=3)) == expected
    assert messages_of(read(spark, T, options, transactional="true")) == expected

    query = (
        spark.readStream.format("tms")
        .options(**options, topic=str(T), maxMessagesPerTrigger="1000")
        .load()
        .writeStream.format("memory")
        .queryName("keystream")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        query.processAllAvailable()
        assert messages_of(spark.sql("SELECT * FROM keystream ORDER BY id")) == expected
    finally:
        query.stop()


def test_bad_keys_and_headers_fail_the_write_and_leave_nothing_visible(
    spark, client: MessagingClient, tx: TransactionClient, options: dict[str, str]
) -> None:
    client.create_topic(T)
    client.publish(T, [b"before"])
    wrong = spark.createDataFrame([(b"x", ["a=b"])], "payload binary, headers array<string>")
    with pytest.raises(Exception, match=r"column 'headers' must be array<struct<name: string, value: binary"):
        write(wrong, T, options)
    with pytest.raises(Exception, match="column 'key' must be binary or string, not bigint"):
        write(spark.createDataFrame([(b"x", 7)], "payload binary, key bigint"), T, options)
    big = spark.range(0, 600, numPartitions=2).selectExpr(
        "CAST(id AS STRING) AS payload", "IF(id = 450, repeat('k', 5000), CAST(id AS STRING)) AS key"
    )
    with pytest.raises(
        Exception, match=r"rows 150 to 199 of partition 1: key of message 0 is 5000 bytes, over the limit of 4096"
    ):
        write(big, T, options, batchSize=50)
    assert committed(client, tx) == [b"before"]
    assert [m.payload for m in client.fetch(T)] == [b"before"]


def test_batch_write_is_one_transaction_visible_at_once(
    spark, client: MessagingClient, tx: TransactionClient, options: dict[str, str]
) -> None:
    client.create_topic(T)
    df = spark.range(0, 2500, numPartitions=3).selectExpr("concat('s', id) AS payload", "id")  # strings, and more
    write(df, T, options, batchSize=300)
    assert committed(client, tx) == [b"s%d" % i for i in range(2500)]  # in partition order
    positions = [MessageId.decode(m.id).position for m in client.fetch(T)]
    assert set(positions) == {1}  # one pointer row: it all became visible at once


def test_a_failing_write_job_leaves_nothing_visible(
    spark, client: MessagingClient, tx: TransactionClient, options: dict[str, str]
) -> None:
    client.create_topic(T)
    client.publish(T, [b"before"])
    # Partition 1's row 600 has no payload: each attempt stores its rows 0..499 (batchSize 100), then fails.
    df = spark.range(0, 2000, numPartitions=2).selectExpr("IF(id = 1600, NULL, CAST(id AS STRING)) AS payload")
    with pytest.raises(Exception, match="payload is null"):
        write(df, T, options, batchSize=100)
    aborted = max(tx.snapshot().invalid)  # the write's long transaction, invalid since the job failed
    assert len(client.slices.stored_sequences(T, 1, aborted, limit=5000)) >= 500  # partition 1 stored rows 0..499
    assert committed(client, tx) == [b"before"]
    assert [m.payload for m in client.fetch(T)] == [b"before"]  # not even a pointer row for other readers


def test_retried_tasks_do_not_duplicate(
    spark, client: MessagingClient, tx: TransactionClient, options: dict[str, str]
) -> None:
    from pyspark.sql.functions import udf

    client.create_topic(T)

    @udf("binary")
    def flaky(i):  # (no type hints: PySpark would read them as a pandas UDF's)
        from pyspark import TaskContext

        if i % 1000 == 999 and TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("first attempt dies after storing most of its partition")
        return b"r%04d" % i

    df = spark.range(0, 4000, numPartitions=4).select(flaky("id").alias("payload"))
    write(df, T, options, batchSize=100)
    assert committed(client, tx) == [b"r%04d" % i for i in range(4000)]


def test_bad_options_are_clear_errors(spark, client: MessagingClient, options: dict[str, str]) -> None:
    client.create_topic(T)
    assert read(spark, T, options).count() == 0  # (an empty topic is an empty read)
    assert spark.read.format("tms").options(**options).load(str(T)).count() == 0  # the topic as load's path
    df = spark.createDataFrame([(b"x",)], "payload binary")
    with pytest.raises(Exception, match=r"unknown option.*starttime"):
        read(spark, T, options, startTime=5).collect()
    with pytest.raises(Exception, match="40 hex digits"):
        read(spark, T, options, startingId="zz").collect()
    with pytest.raises(Exception, match="does not exist"):
        read(spark, TopicId("spark", "missing"), options).collect()
    with pytest.raises(Exception, match="append-only"):
        df.write.format("tms").options(**options, topic=str(T)).mode("overwrite").save()
    with pytest.raises(Exception, match="column 'payload'"):
        write(df.withColumnRenamed("payload", "body"), T, options)
    with pytest.raises(Exception, match="are for reads"):
        write(df, T, options, startingTime=1)
    assert list(client.fetch(T)) == []


@pytest.mark.parametrize("view", [{"transactional": "true"}, {}])  # a snapshot per micro-batch, or by default
def test_transactional_stream_waits_for_the_transaction_in_progress(
    spark, client: MessagingClient, tx: TransactionClient, options: dict[str, str], tmp_path: Path, view: dict
) -> None:
    """A stream reads committed messages only, by default too: it never passes a transaction in progress
    and never shows a rolled-back message."""
    client.create_topic(T)
    client.publish(T, [b"one", b"two"])
    blocker = tx.start_short(timeout_seconds=600)  # (the default times out while a loaded machine starts Spark)
    client.publish(T, [b"in flight"], tx_write_pointer=blocker.write_pointer)
    rolled = tx.start_short()
    client.rollback(T, client.publish(T, [b"rolled back"], tx_write_pointer=rolled.write_pointer))
    tx.abort(rolled)
    for i in range(30):
        client.publish(T, [b"later%02d" % i])
    stream = spark.readStream.format("tms").options(**options, topic=str(T), maxMessagesPerTrigger="7", **view)
    shown = f"SELECT payload FROM txstream{len(view)} ORDER BY position, index"
    query = (
        stream.load()
        .writeStream.format("memory")
        .queryName(f"txstream{len(view)}")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        query.processAllAvailable()
        seen = [bytes(r.payload) for r in spark.sql(shown).collect()]
        assert seen == [b"one", b"two"]  # never past the first transaction in progress
        tx.can_commit(blocker, [])
        tx.commit(blocker)
        query.processAllAvailable()
        seen = [bytes(r.payload) for r in spark.sql(shown).collect()]
        assert seen == [b"one", b"two", b"in flight"] + [b"later%02d" % i for i in range(30)]
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        assert max(sizes) <= 7 and sum(sizes) == 33  # the read limit, and every message once
    finally:
        query.stop()


def _dead_writers_hole(topic: TopicId, tms_env: dict[str, str]) -> list[bytes]:
    """A writer process publishes 50 messages one at a time and exits without close(), leaving its reserved
    block as a hole; a second one publishes one message above it. What was acknowledged, in order."""
    writer = f"from tms_hbase import MessagingClient, TopicId\nimport os\nT = TopicId.parse({str(topic)!r})\n"
    dead = writer + "c = MessagingClient()\nfor i in range(50): c.publish(T, [b'a%02d' % i])\nos._exit(0)\n"
    for code in (dead, writer + "with MessagingClient() as c: c.publish(T, [b'b'])\n"):
        done = subprocess.run([sys.executable, "-c", code], env=tms_env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    return [b"a%02d" % i for i in range(50)] + [b"b"]


@pytest.mark.parametrize("how", ["batch", "stream"])
def test_spark_reads_pass_a_dead_writers_hole(
    spark, client: MessagingClient, options: dict[str, str], tms_env: dict[str, str], tmp_path: Path, how: str
) -> None:
    client.create_topic(T)  # the defaults: the sequencer, where a writer that dies leaves a hole
    expected = _dead_writers_hole(T, tms_env)
    # the hole below b is due H (1 s here) after b's row was stored, for every reader: allow for a loaded machine
    deadline = time.monotonic() + 60
    if how == "batch":
        while (seen := [p for _, _, p in rows(read(spark, T, options, partitions=3))]) != expected:
            assert time.monotonic() < deadline, f"a batch read still shows {len(seen)} of 51 messages"
        return
    query = (
        spark.readStream.format("tms")
        .options(**options, topic=str(T))
        .load()
        .writeStream.format("memory")
        .queryName("holestream")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        while True:
            query.processAllAvailable()
            seen = [
                bytes(r.payload) for r in spark.sql("SELECT payload FROM holestream ORDER BY position, index").collect()
            ]
            if seen == expected:
                break
            assert seen == expected[: len(seen)], "the stream skipped or reordered what it read"
            assert time.monotonic() < deadline, f"the stream still shows {len(seen)} of 51 messages"
    finally:
        query.stop()


def test_a_stream_from_a_re_created_topic_is_refused(
    spark, client: MessagingClient, options: dict[str, str], tmp_path: Path
) -> None:
    client.create_topic(T)
    client.publish(T, [b"old"])
    checkpoint = str(tmp_path / "ckpt")

    def run() -> None:
        stream = spark.readStream.format("tms").options(**options, topic=str(T)).load()
        query = stream.writeStream.format("noop").option("checkpointLocation", checkpoint).start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()

    run()
    client.delete_topic(T)
    client.create_topic(T)
    client.publish(T, [b"new"])
    with pytest.raises(Exception, match="re-created"):
        run()


def test_stream_a_to_b_exactly_once_across_a_killed_driver(
    client: MessagingClient, server: TxServer, tms_env: dict[str, str], tmp_path: Path
) -> None:
    a, b = TopicId("spark", "a"), TopicId("spark", "b")
    client.create_topic(a)
    client.create_topic(b)
    sent = 0

    def publish(batches: int) -> None:
        nonlocal sent
        for k in range(batches):
            size = 1 + (k * 7) % 40
            client.publish(a, [b"msg-%05d" % (sent + i) for i in range(size)])
            sent += size

    publish(100)
    checkpoint = tmp_path / "ckpt"
    env = {**tms_env, "PYTHONPATH": str(ROOT)}

    def driver(mode: str) -> subprocess.Popen:
        args = [str(a), str(b), str(checkpoint), server.address, "400", mode]
        # a session of its own: the kill below takes the driver's Spark JVM too (its child), as a crash does; a
        # JVM outliving its Python would still write the checkpoint when the restarted driver does
        return subprocess.Popen(
            [sys.executable, "-m", "tests.workers.spark_stream", *args], env=env, cwd=ROOT, start_new_session=True
        )

    first = driver("run")
    publisher = threading.Thread(target=publish, args=(100,))
    try:
        deadline = time.monotonic() + 900  # a JVM and a query started on a machine at load 10
        while sum(1 for _ in client.fetch(b)) < 800:  # some micro-batches are committed in B
            assert first.poll() is None, "the streaming driver died by itself"
            assert time.monotonic() < deadline, "the stream did not write to B in time"
            if not publisher.is_alive() and sent < 2500:
                publisher.start()  # more input while the query runs
            time.sleep(0.5)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        wait_for(lambda: not _group_alive(first.pid), "the killed driver's JVM to exit", 120)
        if publisher.ident is not None:
            publisher.join()
    # The restart replays a micro-batch the sink has published: the natural one if the kill came while
    # the sink published it; otherwise the last finished one, made to look unfinished (as if the driver had
    # died after the sink's commit and before Spark's commit log; a batch in flight that published nothing
    # is dropped from the offset log, as if the driver had died before logging it).
    _, state = SinkStates(client, b, 1, _query_id(checkpoint)).get()
    logged, finished = max(_batch_ids(checkpoint / "offsets")), max(_batch_ids(checkpoint / "commits"))
    if not (state.batch == logged > finished and state.phase in (PUBLISHING, COMMITTED)):
        assert state.batch >= finished and (state.batch, state.phase) != (finished, OPEN)
        if logged > finished:
            _forget(checkpoint / "offsets", logged)
        _forget(checkpoint / "commits", finished)
    publish(20)  # and more after the crash

    second = driver("drain")
    assert second.wait(timeout=900) == 0
    expected = [m.payload.upper() for m in client.fetch(a)]
    assert len(expected) == sent
    got = [m.payload for m in client.fetch(b)]
    assert got == expected  # every message once, in A's order
    per_batch: dict[int, int] = {}
    for m in client.fetch(b):
        position = MessageId.decode(m.id).position
        per_batch[position] = per_batch.get(position, 0) + 1
    assert max(per_batch.values()) <= 400  # one pointer row per micro-batch, within maxMessagesPerTrigger


@pytest.mark.parametrize("landed", [False, True], ids=["before-the-pointer-row", "after-the-pointer-row"])
def test_a_replayed_micro_batch_whose_commit_was_cut_short_is_published_once(
    client: MessagingClient, tx: TransactionClient, options: dict[str, str], landed: bool
) -> None:
    """The driver died in the sink's commit, after recording ``publishing``: before or after the pointer
    row landed. Spark replays the micro-batch (its tasks store nothing and report no data); the commit
    finds the row or publishes it, commits the transaction, and records the batch committed."""
    from tms_hbase.spark.options import Options
    from tms_hbase.spark.sink_state import SinkState
    from tms_hbase.spark.writer import EXPLICIT_SEQUENCES, Stored, StreamWriter

    client.create_topic(T)
    client.publish(T, [b"earlier"])
    query, batch = "query-1", 5
    micro_batch = tx.start_long()
    client.store(T, [b"a", b"b", b"c"], micro_batch.write_pointer, sequence=EXPLICIT_SEQUENCES)
    states = SinkStates(client, T, 1, query)
    state = SinkState.start(batch, "run-1", micro_batch).moved(PUBLISHING, tail=client.slices.positions(T).last)
    assert states.swap(None, state)
    if landed:
        client.publish(T, [], tx_write_pointer=micro_batch.write_pointer)
    client.publish(T, [b"by someone else"])

    writer = StreamWriter(Options.parse({**options, "topic": str(T)}).for_write(), 0)
    replayed = [Stored(p, 0, 1, None, query, "run-2", batch) for p in range(2)]
    writer.commit(replayed, batch)
    assert states.get()[1].phase == COMMITTED
    writer.commit(replayed, batch)  # and once more: a replay of a committed batch changes nothing
    expected = (
        [b"earlier", b"a", b"b", b"c", b"by someone else"]
        if landed
        else [b"earlier", b"by someone else", b"a", b"b", b"c"]
    )
    # the pointer row is the commit's own writer's: a reader sees it once the block the test client's writer
    # holds before it is given back (within W/2 of its reservation: docs/ordering.md), and never twice
    deadline = time.monotonic() + 120
    while (got := [m.payload for m in client.fetch(T)]) != expected:
        assert time.monotonic() < deadline and len(got) < len(expected), got
        time.sleep(0.02)
    assert committed(client, tx) == expected


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _forget(folder: Path, batch: int) -> None:
    for name in (str(batch), f".{batch}.crc"):
        (folder / name).unlink(missing_ok=True)


def _batch_ids(folder: Path) -> list[int]:
    return [int(p.name) for p in folder.iterdir() if p.name.isdigit()] if folder.exists() else []


def _query_id(checkpoint: Path) -> str:
    import json

    return json.loads((checkpoint / "metadata").read_text())["id"]


def test_distributed_sweep_runs_regions_as_spark_tasks(
    spark, client: MessagingClient, hbase_address: str, prefix: str, region_splitter: Callable
) -> None:
    from tms_hbase.model.rows import message_key
    from tms_hbase.sweep.state import SweepState
    from tms_hbase_sweeper.spark import sweep

    old, live = TopicId("spark", "old"), TopicId("spark", "live")
    chain = {"ordering": "chain"}  # the counts are a chain's rows (a sequencer adds its counter row)
    client.create_topic(old, chain)
    client.create_topic(live, chain)
    for i in range(40):
        client.publish(old, [b"o%d" % i])
        client.publish(live, [b"l%d" % i])
    client.delete_topic(old)
    region_splitter(client.installation.messages.name, message_key(old, 1, 20))
    regions = client.installation.messages.regions()
    assert len(regions) >= 2
    report = sweep(spark, thrift=hbase_address, prefix=prefix, partitions=3, grace_seconds=900)
    assert report["messages_dropped"] == 40 and report["regions_swept"] == len(regions) + 1  # + payload table
    assert report["tx_snapshot_source"] == f"table {client.installation.txstate.name}"  # one source, not one per task
    assert report["tx_snapshot_age_seconds"] is not None and not report["invalid_list_skipped"]
    assert [m.payload for m in client.fetch(live)] == [b"l%d" % i for i in range(40)]
    records = SweepState(client.installation.txstate).records(client.installation.messages.name)
    assert all(records[r.start].completed for r in regions)


def test_the_library_does_not_import_the_sweeper() -> None:
    code = "import sys, tms_hbase.spark; assert not any(m.startswith('tms_hbase_sweeper') for m in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
