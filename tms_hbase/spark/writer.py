"""Writing a DataFrame's ``payload`` column (and ``key`` and ``headers``, if it has them: see
:mod:`.write_columns`) to a topic, as one transaction per job or per micro-batch.

Every write is a long transaction: tasks store their payloads under its write pointer at sequences
fixed by (partition, row in partition), so a retried or speculative task overwrites instead of adding;
the driver's commit publishes one pointer row and commits, and every message becomes visible at once,
in partition order. docs/spark.md has the exactly-once argument for streams.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from tms_hbase.client import MessagingClient
from tms_hbase.errors import InvalidArgument, PublishOutcomeUnknown, TmsError, TransactionNotInProgress
from tms_hbase.model.published import PublishResult
from tms_hbase.model.record import Record
from tms_hbase.model.rows import batch_size
from tms_hbase.model.topic import TopicId
from tms_hbase.publish.writer import EXPLICIT_SEQUENCES
from tms_hbase.spark.options import Options
from tms_hbase.spark.sink_state import ABORTED, COMMITTED, OPEN, PUBLISHING, SinkState, SinkStates
from tms_hbase.spark.write_columns import WriteColumns, messages
from tms_hbase.tx import Transaction, TransactionCodec

log = logging.getLogger(__name__)

PARTITION_SHIFT = 32  # sequence = 2**40 + (partition << 32) + row: 2**32 rows a partition
PUBLISH_ATTEMPTS = 3
# Local properties Spark sets on the tasks of a streaming query's micro-batch.
QUERY_ID = "sql.streaming.queryId"  # the query's id, kept in its checkpoint across restarts
BATCH_ID = "streaming.sql.batchId"
RUN_ID = "spark.jobGroup.id"  # the run's id: new at every (re)start of the query


@dataclass
class Stored(WriterCommitMessage):
    """What one task stored: ``count`` payloads of partition ``partition`` under ``write_pointer`` in
    topic generation ``generation``; for a stream, of which query, run and micro-batch."""

    partition: int
    count: int
    generation: int
    write_pointer: int | None
    query: str | None = None
    run: str | None = None
    batch: int | None = None


def store_partition(
    client: MessagingClient,
    options: Options,
    payloads: Iterator[bytes | Record],
    write_pointer: int,
    partition: int,
) -> int:
    """Store one partition's messages at sequences fixed by (partition, row); returns how many. Bad input
    (a key or headers over their limits) is an InvalidArgument naming the partition and rows."""
    base = EXPLICIT_SEQUENCES + (partition << PARTITION_SHIFT)
    limit = client.max_batch_bytes
    stored, size = 0, 0
    chunk: list[bytes | Record] = []

    def store() -> None:
        try:
            client.store(options.topic, chunk, write_pointer, sequence=base + stored)
        except InvalidArgument as exc:
            raise type(exc)(f"rows {stored} to {stored + len(chunk) - 1} of partition {partition}: {exc}") from None

    for payload in payloads:
        cost = len(payload) + 4 if type(payload) is bytes else batch_size((payload,))
        if chunk and (len(chunk) == options.batch_size or size + cost > limit):
            store()
            stored, chunk, size = stored + len(chunk), [], 0
        chunk.append(payload)
        size += cost
    if chunk:
        store()
        stored += len(chunk)
    if stored >= 1 << PARTITION_SHIFT:
        raise InvalidArgument(f"partition {partition} holds {stored} rows; at most 2**32 - 1: repartition")
    return stored


def publish_pointer(client: MessagingClient, topic: TopicId, write_pointer: int) -> PublishResult:
    """Publish the pointer row of a write pointer, finishing a publish whose answer was lost exactly once."""
    resume = None
    for attempt in range(PUBLISH_ATTEMPTS):
        try:
            return client.publish(topic, [], tx_write_pointer=write_pointer, resume=resume)
        except PublishOutcomeUnknown as exc:
            if attempt == PUBLISH_ATTEMPTS - 1:
                raise
            resume = exc
    raise AssertionError("unreachable")


def commit_transaction(options: Options, tx: Transaction) -> None:
    """Commit a long transaction; one that an earlier attempt committed already counts as committed."""
    with options.tx_client() as tx_client:
        try:
            tx_client.can_commit(tx, [])
            tx_client.commit(tx)
        except TransactionNotInProgress:
            if tx.write_pointer in tx_client.snapshot().invalid:
                raise TmsError(
                    f"transaction {tx.write_pointer} was invalidated before it could commit: its messages "
                    "stay invisible to transactional readers"
                ) from None


def abort_transaction(options: Options, tx: Transaction | None) -> None:
    """Abort (a long transaction becomes invalid); best effort, as Spark calls it on failure paths."""
    if tx is None:
        return
    try:
        with options.tx_client() as tx_client:
            tx_client.abort(tx)
    except TmsError as exc:
        log.warning("could not abort transaction %d: %s", tx.write_pointer, exc)


def _generation(client: MessagingClient, options: Options, stored: list[Stored]) -> int:
    """The topic's generation, which must be the one the tasks stored in."""
    current = client.get_topic(options.topic).generation
    for message in stored:
        if message.count and message.generation != current:
            raise TmsError(
                f"topic {options.topic} was deleted and re-created while the write ran (generation "
                f"{message.generation}, now {current}): nothing was published"
            )
    return current


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format("tms")``: the whole job is one long transaction, started when it is planned."""

    def __init__(self, options: Options, columns: WriteColumns, tx: bytes) -> None:
        self.options, self.columns, self.tx = options, columns, tx

    @classmethod
    def create(cls, options: Options, schema: StructType, overwrite: bool) -> BatchWriter:
        """On the driver: check the topic and the data, then start the transaction."""
        if overwrite:
            raise InvalidArgument("topics are append-only: write with mode('append')")
        columns = WriteColumns.of(schema)
        with options.client() as client:
            client.get_topic(options.topic)  # TopicNotFound before any work
        with options.tx_client() as tx_client:
            tx = tx_client.start_long()
        return cls(options, columns, TransactionCodec.encode(tx))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Stored:
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        pointer = TransactionCodec.decode(self.tx).write_pointer
        with self.options.client() as client:
            generation = client.get_topic(self.options.topic).generation
            count = store_partition(client, self.options, messages(iterator, self.columns), pointer, partition)
        return Stored(partition, count, generation, pointer)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Publish the pointer row and commit: every stored message becomes visible at once."""
        tx = TransactionCodec.decode(self.tx)
        stored = [m for m in messages if isinstance(m, Stored)]
        handle = None
        with self.options.client() as client:
            _generation(client, self.options, stored)
            if any(m.count for m in stored):
                handle = publish_pointer(client, self.options.topic, tx.write_pointer)
            try:
                commit_transaction(self.options, tx)
            except TmsError:
                if handle is not None:
                    client.rollback(self.options.topic, handle)
                raise

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """The job failed: the transaction becomes invalid and nothing stored is ever visible."""
        abort_transaction(self.options, TransactionCodec.decode(self.tx))


class StreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("tms")``: one long transaction per micro-batch, published once.

    The first task of a micro-batch to need it starts the transaction and records it in the query's
    sink state (compare-and-set); the driver's commit moves the state to ``publishing``, publishes the
    pointer row, commits, and moves it to ``committed``. A micro-batch Spark replays after a crash finds
    its state and is not stored or published again.
    """

    def __init__(self, options: Options, columns: WriteColumns) -> None:
        self.options, self.columns = options, columns

    @classmethod
    def create(cls, options: Options, schema: StructType, overwrite: bool) -> StreamWriter:
        if overwrite:
            raise InvalidArgument("topics are append-only: write with outputMode('append')")
        columns = WriteColumns.of(schema)
        with options.client() as client:
            client.get_topic(options.topic)
        return cls(options, columns)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Stored:
        context = TaskContext.get()
        if context is None:
            raise TmsError("a stream writer writes in Spark tasks only")
        query, run = _task_property(context, QUERY_ID), _task_property(context, RUN_ID)
        batch, partition = int(_task_property(context, BATCH_ID)), context.partitionId()
        payloads = messages(iterator, self.columns)
        first = next(payloads, None)
        with self.options.client() as client:
            generation = client.get_topic(self.options.topic).generation
            if first is None:  # nothing to store: no transaction needed
                return Stored(partition, 0, generation, None, query, run, batch)
            tx = self._transaction(client, generation, query, run, batch)
            if tx is None:  # stored by an earlier run of the query: Spark replays it, the commit finishes it
                return Stored(partition, 0, generation, None, query, run, batch)
            count = store_partition(client, self.options, _chain(first, payloads), tx.write_pointer, partition)
        return Stored(partition, count, generation, tx.write_pointer, query, run, batch)

    def _transaction(
        self, client: MessagingClient, generation: int, query: str, run: str, batch: int
    ) -> Transaction | None:
        """The micro-batch's transaction, started by the first task that needs it (None: already stored)."""
        states = SinkStates(client, self.options.topic, generation, query)
        while True:
            raw, state = states.get()
            if state is not None and (
                state.batch > batch or (state.batch == batch and state.phase in (PUBLISHING, COMMITTED))
            ):
                return None
            if state is not None and (state.batch, state.phase, state.run) == (batch, OPEN, run):
                return state.transaction()
            if state is not None and state.phase == PUBLISHING:
                raise TmsError(
                    f"micro-batch {state.batch} of query {query} is half published; it must be finished before "
                    f"micro-batch {batch}: restart the query from its checkpoint"
                )
            with self.options.tx_client() as tx_client:
                tx = tx_client.start_long()
            if states.swap(raw, SinkState.start(batch, run, tx)):
                if state is not None and state.phase == OPEN:  # an earlier run's; nothing of it was published
                    abort_transaction(self.options, state.transaction())
                return tx
            abort_transaction(self.options, tx)  # another task was first: use its transaction

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        stored = [m for m in messages if isinstance(m, Stored)]
        if not stored:
            return
        query, run = _stream_task(stored[0])
        pointers = {m.write_pointer for m in stored if m.count}
        with self.options.client() as client:
            generation = _generation(client, self.options, stored)
            states = SinkStates(client, self.options.topic, generation, query)
            while True:
                raw, state = states.get()
                if state is not None and (state.batch > batchId or (state.batch, state.phase) == (batchId, COMMITTED)):
                    return  # published before: a replay after a crash
                if state is not None and (state.batch, state.phase) == (batchId, PUBLISHING):
                    return self._finish(client, states, raw, state)
                if not pointers:  # nothing stored by this run, none of it published
                    stale = state.transaction() if state is not None and state.phase == OPEN else None
                    if states.swap(raw, SinkState(batchId, COMMITTED, run)):
                        abort_transaction(self.options, stale)
                        return
                    continue
                if (
                    state is None
                    or (state.batch, state.phase, state.run) != (batchId, OPEN, run)
                    or {state.open_transaction().write_pointer} != pointers
                ):
                    raise TmsError(
                        f"the state of query {query} on topic {self.options.topic} changed during micro-batch "
                        f"{batchId} ({state}): is another run of the query writing?"
                    )
                publishing = state.moved(PUBLISHING, tail=client.slices.positions(self.options.topic).last)
                if states.swap(raw, publishing):
                    return self._finish(client, states, publishing.encode(), publishing)

    def _finish(self, client: MessagingClient, states: SinkStates, raw: bytes | None, state: SinkState) -> None:
        """Publish the pointer row unless it is there already (found after ``tail``), commit, record it."""
        tx, before = state.open_transaction(), state.publishing_tail()
        topic = self.options.topic
        generation = client.get_topic(topic).generation
        tail = client.slices.positions(topic).last
        rows = client.slices.batches(topic, generation, before + 1, tail, transactional_only=True)
        if not any(row.messages is None and abs(row.tx_write_pointer or 0) == tx.write_pointer for row in rows):
            publish_pointer(client, topic, tx.write_pointer)
        commit_transaction(self.options, tx)
        while not states.swap(raw, state.moved(COMMITTED)):
            raw, now = states.get()
            if now != state:
                return  # (only a later run's commit of this batch moves it on)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """The micro-batch failed: its transaction becomes invalid; a retry of the batch starts another."""
        stored = [m for m in messages if isinstance(m, Stored)]
        if not stored:
            return
        query, run = _stream_task(stored[0])
        with self.options.client() as client:
            generation = client.get_topic(self.options.topic).generation
            states = SinkStates(client, self.options.topic, generation, query)
            raw, state = states.get()
            if (
                state is not None
                and (state.batch, state.phase, state.run) == (batchId, OPEN, run)
                and states.swap(raw, state.moved(ABORTED))
            ):
                abort_transaction(self.options, state.transaction())


def _task_property(context: TaskContext, key: str) -> str:
    """A local property Spark sets on the tasks of a streaming micro-batch."""
    value = context.getLocalProperty(key)
    if value is None:
        raise TmsError(f"Spark did not set the task property {key}: is this a streaming write?")
    return value


def _stream_task(stored: Stored) -> tuple[str, str]:
    """The query and run a stream writer's task recorded (StreamWriter.write sets both)."""
    if stored.query is None or stored.run is None:
        raise TmsError(f"a commit message without its query and run reached the stream writer: {stored}")
    return stored.query, stored.run


def _chain(first: bytes | Record, rest: Iterator[bytes | Record]) -> Iterator[bytes | Record]:
    yield first
    yield from rest
