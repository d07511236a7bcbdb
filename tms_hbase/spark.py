"""Spark through PySpark: bulk transactional publish from executors, and topics read as DataFrames.

Bulk publish (the seed's case for the payload table): the driver starts a long transaction; every
partition stores its payloads under the transaction's write pointer with **deterministic keys**
(partition index and position in the partition), so a retried or speculative task overwrites what an
earlier attempt stored instead of adding copies; at commit the driver publishes one pointer row and
commits, and all messages become visible to transactional readers at once. A failed job invalidates
the transaction: nothing becomes visible, and the sweeper's TTL rule removes what was stored.

Reading: the driver finds the topic's position range (binary search for times), splits it into
contiguous slices, and each task fetches its slice; rows come with ``position``/``index`` columns
whose order is the topic's order.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .client import MessagingClient
from .clock import now_ms
from .errors import InvalidArgument, TmsError
from .message_id import MessageId
from .topic import TopicId
from .tx.client import TransactionClient
from .tx.transaction import Transaction
from .wire import RollbackDetail
from .writer import EXPLICIT_SEQUENCES

PARTITION_SHIFT = 32  # sequence = EXPLICIT_SEQUENCES + (partition << 32) + index: 2**32 payloads a partition
PYTHON_ENV = "PYSPARK_PYTHON"


def use_current_python() -> str:
    """Make local-mode Spark start its Python workers on this interpreter (the one that has tms-hbase),
    unless ``$PYSPARK_PYTHON`` already names one. Call it before the SparkSession is created; returns
    the interpreter the workers will run. On a cluster, install tms-hbase on the executors instead."""
    return os.environ.setdefault(PYTHON_ENV, sys.executable)


def check_workers(spark: Any) -> None:
    """In local mode, fail fast with a clear error when Spark's Python workers cannot import tms-hbase
    (PySpark starts them with ``$PYSPARK_PYTHON`` or ``python3`` from PATH, not with the driver's Python).
    ``spark`` is a SparkSession or a SparkContext."""
    context = getattr(spark, "sparkContext", spark)
    if not str(context.master).startswith("local"):
        return
    reason = _worker_import_error(str(context.pythonExec))
    if reason:
        raise TmsError(
            f"Spark's Python workers run {context.pythonExec!r}, which cannot import tms_hbase ({reason}); "
            "call tms_hbase.spark.use_current_python() before creating the SparkSession, or set PYSPARK_PYTHON "
            "to an interpreter that has tms-hbase installed"
        )


@functools.cache
def _worker_import_error(python: str) -> str | None:
    """Why ``python`` cannot import the packages a Spark task needs (None if it can); checked once per interpreter."""
    if python == sys.executable:
        return None
    executable = shutil.which(python)
    if executable is None:
        return "no such interpreter"
    try:
        done = subprocess.run(
            [executable, "-c", "import happybase, tms_hbase"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    lines = done.stderr.strip().splitlines()
    return None if done.returncode == 0 else (lines[-1] if lines else f"exit code {done.returncode}")


@dataclass(frozen=True)
class Where:
    """How executors reach HBase (picklable): the Thrift address and the table prefix."""

    address: str | None = None
    prefix: str | None = None

    def client(self) -> MessagingClient:
        return MessagingClient(self.address, self.prefix, create_tables=False)


def _store_partition(
    where: Where, topic: str, write_pointer: int, batch: int, index: int, rows: Iterable[Any]
) -> Iterator[int]:
    """Store one partition's payloads at sequences fixed by (partition, position in partition)."""
    sequence = EXPLICIT_SEQUENCES + (index << PARTITION_SHIFT)
    stored = 0
    with where.client() as client:
        rows = iter(rows)
        while chunk := list(itertools.islice(rows, batch)):
            payloads = [_payload(row) for row in chunk]
            client.store(topic, payloads, write_pointer, sequence=sequence + stored)
            stored += len(payloads)
    yield stored


def _payload(row: Any) -> bytes:
    value = row[0] if isinstance(row, tuple) or hasattr(row, "__fields__") else row
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    if not isinstance(value, bytes):
        raise InvalidArgument(f"payloads must be bytes or strings, not {type(value).__name__}")
    return value


class BulkPublish:
    """One bulk transactional publish: ``start()``, ``store(data)`` (any number of times), then
    ``commit()`` or ``abort()``. :func:`publish` does all of it."""

    def __init__(
        self, topic: TopicId | str, tx_client: TransactionClient, *, where: Where | None = None, batch: int = 1000
    ) -> None:
        self.topic = topic if isinstance(topic, TopicId) else TopicId.parse(topic)
        self.tx_client = tx_client
        self.where = where or Where()
        self.batch = batch
        self.tx: Transaction | None = None
        self.stored = 0

    def start(self) -> Transaction:
        with self.where.client() as client:
            client.get_topic(self.topic)  # TopicNotFound before any work
        self.tx = self.tx_client.start_long()
        return self.tx

    def store(self, data: Any, column: str | None = None) -> int:
        """Store a DataFrame column (``column``, or its only column) or an RDD of bytes/str, in parallel."""
        tx = self._running()
        rdd = data.select(column).rdd if column is not None else getattr(data, "rdd", data)
        check_workers(rdd.context)
        where, topic, pointer, batch = self.where, str(self.topic), tx.write_pointer, self.batch
        counts = rdd.mapPartitionsWithIndex(lambda i, rows: _store_partition(where, topic, pointer, batch, i, rows))
        stored = sum(counts.collect())
        self.stored += stored
        return stored

    def commit(self) -> RollbackDetail:
        """Publish the pointer row and commit: every stored message becomes visible at once."""
        tx = self._running()
        with self.where.client() as client:
            handle = client.publish(self.topic, [], tx_write_pointer=tx.write_pointer)
        try:
            self.tx_client.can_commit(tx, [])
            self.tx_client.commit(tx)
        except TmsError:
            with self.where.client() as client:
                client.rollback(self.topic, handle)
            self.abort()
            raise
        self.tx = None
        return handle

    def abort(self) -> None:
        """Abort (a long transaction becomes invalid): nothing stored is ever visible to transactions."""
        if self.tx is not None:
            self.tx_client.abort(self.tx)
            self.tx = None

    def _running(self) -> Transaction:
        if self.tx is None:
            raise TmsError("the bulk publish is not started (or already finished)")
        return self.tx


def publish(data: Any, topic: TopicId | str, tx_client: TransactionClient, **options: Any) -> RollbackDetail:
    """Publish a DataFrame column or an RDD as one transaction; on any failure it is aborted and re-raised."""
    column = options.pop("column", None)
    job = BulkPublish(topic, tx_client, **options)
    job.start()
    try:
        job.store(data, column)
        return job.commit()
    except BaseException:
        job.abort()
        raise


def _read_slice(
    where: Where,
    topic: str,
    generation: int,
    first: int,
    last: int,
    floor: int,
    tx: bytes | None,
    ids: tuple[bytes | None, bytes | None] = (None, None),
) -> Iterator[tuple]:
    from .tx.codec import TransactionCodec

    transaction = None if tx is None else TransactionCodec.decode(tx)
    stopped: list[int] = []
    with where.client() as client:
        for m in client._reader.fetch_positions(
            TopicId.parse(topic), generation, first, last, floor, transaction, stopped
        ):
            if (ids[0] is not None and m.id < ids[0]) or (ids[1] is not None and m.id >= ids[1]):
                continue
            mid = MessageId.decode(m.id)
            yield (m.id, m.publish_time, m.payload, mid.position, mid.index, None)
    if stopped:
        yield (None, None, None, stopped[0], None, stopped[0])  # where this slice had to stop


def read(
    spark: Any,
    topic: TopicId | str,
    *,
    where: Where | None = None,
    start_time: int | None = None,
    end_time: int | None = None,
    start_message: bytes | None = None,
    end_message: bytes | None = None,
    transaction: Transaction | None = None,
    partitions: int | None = None,
) -> Any:
    """The topic's messages with publish time in [start_time, end_time) and id in [start_message,
    end_message) as a DataFrame (id, publish_time, payload, position, index), ordered by (position, index).

    With a transaction the result ends before the first message it cannot see yet, as a fetch does.
    """
    from pyspark.sql.types import BinaryType, LongType, StructField, StructType

    from .tx.codec import TransactionCodec

    check_workers(spark)
    where = where or Where()
    topic = topic if isinstance(topic, TopicId) else TopicId.parse(topic)
    with where.client() as client:
        meta = client.get_topic(topic)
        floor = now_ms() - meta.ttl * 1000
        first = client._reader.seek(topic, meta.generation, max(floor, start_time or 0))
        last = client._reader.seek(topic, meta.generation, end_time) - 1 if end_time is not None else None
        if last is None:
            last = client._reader.seek(topic, meta.generation, 2**62) - 1
    bounds_ids = (start_message, end_message)
    for edge in bounds_ids:
        if edge is not None:
            MessageId.decode(edge)  # a clear error for a corrupt id, before any task runs
    if start_message is not None and MessageId.decode(start_message).generation == meta.generation:
        first = max(first, MessageId.decode(start_message).position)
    if end_message is not None:
        end_id = MessageId.decode(end_message)
        if end_id.generation < meta.generation:
            last = first - 1  # the range ends before this generation begins
        elif end_id.generation == meta.generation:
            last = min(last, end_id.position)
    slices = max(1, partitions or spark.sparkContext.defaultParallelism)
    step = max(1, -(-(last - first + 1) // slices))
    bounds = [(p, min(last, p + step - 1)) for p in range(first, last + 1, step)]
    tx = None if transaction is None else TransactionCodec.encode(transaction)
    args = (where, str(topic), meta.generation, floor, tx, bounds_ids)
    rdd = spark.sparkContext.parallelize(bounds, max(1, len(bounds))).flatMap(
        lambda b: _read_slice(args[0], args[1], args[2], b[0], b[1], args[3], args[4], args[5])
    )
    if transaction is not None:
        stops = rdd.filter(lambda r: r[5] is not None).map(lambda r: r[5]).collect()
        cut = min(stops) if stops else None
        rdd = rdd.filter(lambda r: r[5] is None and (cut is None or r[3] < cut))
    else:
        rdd = rdd.filter(lambda r: r[5] is None)
    schema = StructType(
        [
            StructField("id", BinaryType(), False),
            StructField("publish_time", LongType(), False),
            StructField("payload", BinaryType(), False),
            StructField("position", LongType(), False),
            StructField("index", LongType(), False),
        ]
    )
    return spark.createDataFrame(rdd.map(lambda r: r[:5]), schema)


def _sweep_partition(where: Where, options: dict[str, Any], regions: Iterable[Any]) -> Iterator[dict]:
    from compactor.sweep import Sweeper

    with where.client() as client:
        yield Sweeper(client.hbase, client.tables, **options).sweep_regions(list(regions)).as_dict()


def sweep(spark: Any, *, where: Where | None = None, partitions: int | None = None, **options: Any) -> dict:
    """One sweep with the regions of both tables as Spark tasks, for tables too big for one process.

    ``options`` are the Sweeper's (``grace_seconds``, ``dry_run``, ``max_rows_per_second``, ...). Each
    region is still swept under its lease, so this can run next to ``tms-sweeper`` daemons. Returns
    the tasks' reports added up.
    """
    from compactor.sweep import Sweeper, SweepReport

    check_workers(spark)
    where = where or Where()
    with where.client() as client:
        regions = Sweeper(client.hbase, client.tables).regions()
    slices = max(1, min(len(regions), partitions or spark.sparkContext.defaultParallelism))
    reports = (
        spark.sparkContext.parallelize(regions, slices)
        .mapPartitions(lambda rs: _sweep_partition(where, options, rs))
        .collect()
    )
    total = SweepReport(dry_run=bool(options.get("dry_run")))
    for report in reports:
        for key, value in report.items():
            if isinstance(value, bool):
                setattr(total, key, getattr(total, key) or value)
            elif key == "invalid_transactions":
                total.invalid_transactions = max(total.invalid_transactions, value)
            elif key == "tx_snapshot_source":  # the same source in every task
                total.tx_snapshot_source = total.tx_snapshot_source or value
            elif key == "tx_snapshot_age_seconds":  # the oldest view any task used (None: none had one)
                ages = [age for age in (total.tx_snapshot_age_seconds, value) if age is not None]
                total.tx_snapshot_age_seconds = max(ages, default=None)
            else:
                setattr(total, key, getattr(total, key) + value)
    return total.as_dict()
