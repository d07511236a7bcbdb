"""Reading a topic with Spark: the batch reader, the stream reader, and the executors' side of both.

The driver plans id ranges (:mod:`.planning`); each task fetches its range with
:meth:`MessagingClient.slices.fetch_range` and hands Spark Arrow record batches, not pickled rows.
Stream offsets are ``{"generation", "position", "index"}``: the id of the next message to read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from tms_hbase.client import MessagingClient
from tms_hbase.errors import InvalidArgument
from tms_hbase.model.isolation import COMMITTED
from tms_hbase.model.message_id import MessageId
from tms_hbase.spark.columns import SCHEMA, piece_batches, record_batches, within_time
from tms_hbase.spark.options import Options
from tms_hbase.spark.planning import Range, admit, batch_range, check_generation, first_unreadable, snapshot, split
from tms_hbase.tx import Transaction, TransactionCodec


class IdRange(InputPartition):
    """One task's share of a read: message ids [start, end), the encoded read snapshot if transactional,
    and the write pointer of the pointer row the range lies in, if it lies in one (a piece of a bulk
    publish, read from the payload table in bulk)."""

    def __init__(self, start: bytes, end: bytes, tx: bytes | None, pointer: int | None = None) -> None:
        super().__init__((start, end))
        self.start, self.end, self.tx, self.pointer = start, end, tx, pointer


def id_ranges(ranges: list[Range], tx: Transaction | None) -> list[InputPartition]:
    """The planned ranges as Spark partitions."""
    encoded = None if tx is None else TransactionCodec.encode(tx)
    return [IdRange(bytes(r.start), bytes(r.end), encoded, r.pointer) for r in ranges]


def check_schema(schema: StructType | None) -> None:
    """A user-given read schema must be the topic schema (Spark passes ours when none is given)."""
    if schema is not None and schema != SCHEMA:
        raise InvalidArgument(f"format 'tms' reads with its own schema {SCHEMA.simpleString()}, not {schema}")


def read_range(options: Options, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """On an executor: the messages of one id range as Arrow record batches."""
    if not isinstance(partition, IdRange):
        return  # Spark's stand-in partition of an empty read
    tx = None if partition.tx is None else TransactionCodec.decode(partition.tx)
    start, end = MessageId.decode(partition.start), MessageId.decode(partition.end)
    with options.client() as client:
        if partition.pointer is not None:
            yield from piece_batches(client, options.topic, start, end, partition.pointer, tx)
        else:
            yield from record_batches(client.slices.fetch_range(options.topic, start, end, tx))


class BatchReader(DataSourceReader):
    """``spark.read.format("tms")``: the topic's messages within the options' bounds, as of now."""

    def __init__(self, options: Options, partitions: int) -> None:
        self.options = options.for_batch()
        self.default_partitions = partitions

    def partitions(self) -> list[InputPartition]:
        options = self.options
        with options.client() as client:
            start, end = batch_range(client, options)
            tx = None
            if options.transactional:  # the tail was read above, before the snapshot: see first_unreadable
                tx = snapshot(options)
                last = end.position if end.index > 0 else end.position - 1
                cut = first_unreadable(client, options.topic, start.generation, start.position, last, tx)
                if cut is not None:
                    end = max(start, min(end, MessageId(start.generation, cut, 0)))
            ranges = split(client, options.topic, start, end, options.partitions or self.default_partitions)
        return id_ranges(ranges, tx)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        batches = read_range(self.options, partition)
        start, end = self.options.starting_time, self.options.ending_time
        if start is None and end is None:
            return batches
        # the planned ids cover the time bounds; in a sequencer topic (times ordered up to D) they may hold
        # a few messages outside them, which a time-bounded read must not return
        return (within_time(batch, start, end) for batch in batches)


def offset(message_id: MessageId) -> dict:
    return {"generation": message_id.generation, "position": message_id.position, "index": message_id.index}


def from_offset(value: dict) -> MessageId:
    try:
        return MessageId(int(value["generation"]), int(value["position"]), int(value["index"]))
    except (KeyError, TypeError, ValueError):
        raise InvalidArgument(f"not an offset of format 'tms': {value!r}") from None


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("tms")``: micro-batches of the messages published since the last one.

    Lives in one driver-side process for the whole run of a query (a copy is pickled to the executors
    for :meth:`read`, which uses only the options and the partition).
    """

    def __init__(self, options: Options, partitions: int) -> None:
        self.options = options.for_stream()
        self.default_partitions = partitions
        self._client: MessagingClient | None = None
        self._target: int | None = None  # Trigger.AvailableNow: the tail when the query started

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    @property
    def client(self) -> MessagingClient:
        if self._client is None:
            self._client = self.options.client()
        return self._client

    def initialOffset(self) -> dict:
        options, topic = self.options, self.options.topic
        positions = self.client.slices.positions(topic)  # TopicNotFound here, when the query starts
        generation = positions.generation
        given = options.starting_id
        if given is not None and given.generation > generation:
            raise InvalidArgument(f"startingId is of generation {given.generation}; {topic} is at {generation}")
        if given is not None and given.generation == generation:
            return offset(given)
        if options.starting_time is not None:
            first = self.client.slices.positions(topic, start_time_ms=options.starting_time).first
            return offset(MessageId(generation, first, 0))
        if options.starting_offsets == "latest":
            return offset(MessageId(generation, positions.last + 1, 0))
        return offset(MessageId(generation, positions.first, 0))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_messages_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_offset(start)
        tail = self._tail(begin.generation)
        tx = self._view()  # after the tail: see admit
        most = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return offset(admit(self.client, self.options.topic, begin, tail, tx, most))

    def reportLatestOffset(self) -> dict | None:
        positions = self.client.slices.positions(self.options.topic)
        return offset(MessageId(positions.generation, positions.last + 1, 0))

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.client.slices.positions(self.options.topic).last

    def _tail(self, generation: int) -> int:
        check_generation(self.client, self.options.topic, generation)
        tail = self.client.slices.positions(self.options.topic).last
        return tail if self._target is None else min(tail, self._target)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        first, last = from_offset(start), from_offset(end)
        if last <= first:
            return []
        check_generation(self.client, self.options.topic, first.generation)
        # Nothing in [first, last) was in progress for the snapshot latestOffset took, so it is all
        # committed or invalid for any later snapshot too: a fresh one reads the same (also on replay).
        tx = self._view()
        count = self.options.partitions or self.default_partitions
        return id_ranges(split(self.client, self.options.topic, first, last, count), tx)

    def _view(self) -> Transaction | None:
        """What a micro-batch reads: a snapshot from the transaction server (``transactional=true``), every
        row as stored (``isolation=uncommitted`` or ``transactional=false``), else committed messages only,
        by the installation's transaction state as a subscription reads them (:mod:`tms_hbase.isolation.committed`)."""
        options = self.options
        if options.transactional:
            return snapshot(options)
        if options.transactional is False or options.isolation != COMMITTED:
            return None
        return self.client.slices.committed_view()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.options, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, and the topic keeps its messages."""

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
