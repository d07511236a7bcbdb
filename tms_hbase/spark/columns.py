"""Messages as Arrow record batches, built column-wise: what a read task hands Spark.

Two paths. Any range goes through :meth:`MessagingClient.fetch_range` (every rule of a fetch: TTL,
transactions, swept gaps, corrupt rows) and its messages are turned into columns in chunks. A range the
planner found to lie inside one pointer row (a piece of a bulk publish) is read faster: the library
still decides whether the row is readable, by fetching the range's first message, and the rest of the
piece is a scan of the payload table in large chunks, turned into columns without a ``Message`` per row.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import BinaryType, LongType, StructField, StructType, TimestampType

from ..client import MessagingClient
from ..errors import CorruptData
from ..message_id import MessageId
from ..reader import Message
from ..rows import PAYLOAD_COLUMN, past_last, payload_key, pointer_prefix
from ..topic import TopicId
from ..tx import Transaction

SCHEMA = StructType(
    [
        StructField("id", BinaryType(), False),
        StructField("publish_time", TimestampType(), False),
        StructField("payload", BinaryType(), False),
        StructField("position", LongType(), False),
        StructField("index", LongType(), False),
    ]
)
ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")
BATCH_ROWS = 8192  # messages per Arrow record batch, about
BATCH_BYTES = 8 * 1024 * 1024  # payload bytes per record batch, about
FIRST_SCAN = 1000  # payload rows in the first scan of a piece, before their size is known
_ID = struct.Struct(">IQQ")
_ID_PREFIX = struct.Struct(">IQ")  # generation, position: an id without its index


def record_batches(messages: Iterator[Message]) -> Iterator[pa.RecordBatch]:
    """Messages as record batches of :data:`SCHEMA` (position and index decoded from the id)."""
    ids: list[bytes] = []
    times: list[int] = []
    payloads: list[bytes] = []
    positions: list[int] = []
    indexes: list[int] = []
    size = 0
    for message in messages:
        _, position, index = _ID.unpack(message.id)
        ids.append(message.id)
        times.append(message.publish_time)
        payloads.append(message.payload)
        positions.append(position)
        indexes.append(index)
        size += len(message.payload)
        if len(ids) == BATCH_ROWS or size >= BATCH_BYTES:
            yield _batch(ids, pa.array(times, pa.int64()), payloads, pa.array(positions, pa.int64()), indexes)
            ids, times, payloads, positions, indexes, size = [], [], [], [], [], 0
    if ids:
        yield _batch(ids, pa.array(times, pa.int64()), payloads, pa.array(positions, pa.int64()), indexes)


def within_time(batch: pa.RecordBatch, start_ms: int | None, end_ms: int | None) -> pa.RecordBatch:
    """The messages of ``batch`` published in [start_ms, end_ms) (ms; None: unbounded)."""
    micros = batch.column("publish_time").cast(pa.int64())
    keep = pc.greater_equal(micros, (start_ms or 0) * 1000)
    if end_ms is not None:
        keep = pc.and_(keep, pc.less(micros, end_ms * 1000))
    return batch.filter(keep)


def _batch(
    ids: list[bytes], times_ms: pa.Array, payloads: list[bytes], positions: pa.Array, indexes: list[int]
) -> pa.RecordBatch:
    micros = pc.multiply(times_ms, 1000).cast(ARROW_SCHEMA.field("publish_time").type)  # publish times are ms
    columns = [
        pa.array(ids, pa.binary()),
        micros,
        pa.array(payloads, pa.binary()),
        positions,
        pa.array(indexes, pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def piece_batches(
    client: MessagingClient,
    topic: TopicId,
    start: MessageId,
    end: MessageId,
    pointer: int,
    transaction: Transaction | None,
) -> Iterator[pa.RecordBatch]:
    """The messages with ``start`` <= id < ``end``, all of the pointer row at ``start.position`` whose
    payloads are stored under write pointer ``pointer`` (``end`` at most the next position's start).

    The first message comes from :meth:`MessagingClient.fetch_range`, so a row that is expired, swept,
    rolled back for a transactional reader or corrupt is handled as a fetch handles it; the rest are
    payload-table rows, read in chunks of :data:`BATCH_ROWS` (fewer for big payloads).
    """
    first = next(iter(client.fetch_range(topic, start, end, transaction)), None)  # (the rest is dropped)
    if first is None:
        return
    generation, position, index = _ID.unpack(first.id)
    id_prefix = _ID_PREFIX.pack(generation, position)
    prefix = pointer_prefix(topic, generation, pointer)
    stop = payload_key(topic, generation, pointer, end.index) if end.position == position else past_last(prefix)
    table = client.installation.payloads
    ids, payloads, indexes = [first.id], [first.payload], [index]
    low, limit = payload_key(topic, generation, pointer, index + 1), FIRST_SCAN
    while low < stop:
        rows = table.scan_column(low, stop, PAYLOAD_COLUMN, limit)
        size = 0
        for key, payload in rows:
            sequence = key[-8:]
            if payload is None:
                raise CorruptData(
                    f"corrupt stored payload {int.from_bytes(sequence, 'big')} of the message row at position "
                    f"{position} of {topic} (generation {generation}): it has no {PAYLOAD_COLUMN.decode()} cell",
                    topic=str(topic),
                    generation=generation,
                    position=position,
                )
            ids.append(id_prefix + sequence)
            payloads.append(payload)
            indexes.append(int.from_bytes(sequence, "big"))
            size += len(payload)
        if len(rows) < limit:
            break
        yield _piece_batch(ids, first.publish_time, payloads, position, indexes)
        ids, payloads, indexes = [], [], []
        limit = max(1, min(BATCH_ROWS, BATCH_BYTES * len(rows) // max(1, size)))  # rows of ~BATCH_BYTES
        low = rows[-1][0] + b"\x00"  # the first key after the last one read
    if ids:
        yield _piece_batch(ids, first.publish_time, payloads, position, indexes)


def _piece_batch(
    ids: list[bytes], time_ms: int, payloads: list[bytes], position: int, indexes: list[int]
) -> pa.RecordBatch:
    count = len(ids)
    return _batch(
        ids, pa.array([time_ms] * count, pa.int64()), payloads, pa.array([position] * count, pa.int64()), indexes
    )
