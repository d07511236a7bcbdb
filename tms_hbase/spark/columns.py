"""Messages as Arrow record batches, built column-wise: what a read task hands Spark.

Two paths. Any range goes through :meth:`MessagingClient.slices.fetch_range` (every rule of a fetch: TTL,
transactions, swept gaps, corrupt rows) and its messages are turned into columns in chunks. A range the
planner found to lie inside one pointer row (a piece of a bulk publish) is read faster: the library
still decides whether the row is readable, by fetching the range's first message, and the rest of the
piece is a scan of the payload table in large chunks, turned into columns without a ``Message`` per row.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import BinaryType, LongType, StructField, StructType, TimestampType

from tms_hbase.client import MessagingClient
from tms_hbase.errors import CorruptData
from tms_hbase.model.message import Message
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.rows import PAYLOAD_COLUMN, past_last, payload_key, pointer_prefix
from tms_hbase.model.topic import TopicId
from tms_hbase.tx import Transaction

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

    The first message comes from :meth:`MessagingClient.slices.fetch_range`, so a row that is expired, swept,
    rolled back for a transactional reader or corrupt is handled as a fetch handles it; the rest are
    payload-table rows, read in chunks of about :data:`BATCH_BYTES` (at most :data:`BATCH_ROWS` rows)
    and turned into columns whole (see :func:`_piece_batch`).
    """
    first = next(iter(client.slices.fetch_range(topic, start, end, transaction)), None)  # (the rest is dropped)
    if first is None:
        return
    generation, position, index = _ID.unpack(first.id)
    piece = _Piece(topic, generation, position, first.publish_time)
    prefix = pointer_prefix(topic, generation, pointer)
    stop = payload_key(topic, generation, pointer, end.index) if end.position == position else past_last(prefix)
    table = client.installation.payloads
    keys: list[bytes] = [payload_key(topic, generation, pointer, index)]
    payloads: list[bytes | None] = [first.payload]
    low, limit = payload_key(topic, generation, pointer, index + 1), FIRST_SCAN
    while low < stop:
        more_keys, more_payloads = table.scan_column(low, stop, PAYLOAD_COLUMN, limit)
        keys += more_keys
        payloads += more_payloads
        if len(more_keys) < limit:
            break
        yield piece.batch(keys, payloads)
        size = sum(map(len, cast(list[bytes], more_payloads)))  # (batch() found no None in them)
        limit = max(1, min(BATCH_ROWS, BATCH_BYTES * len(more_keys) // max(1, size)))  # rows of ~BATCH_BYTES
        low = more_keys[-1] + b"\x00"  # the first key after the last one read
        keys, payloads = [], []
    if keys:
        yield piece.batch(keys, payloads)


class _Piece:
    """Turns payload-table rows of one pointer row into record batches without Python work per row.

    The rows' keys all have the same length (the pointer's prefix, then the 8-byte sequence), so
    the sequences are a strided slice of the joined keys: a message's id is the position's 12-byte
    id prefix followed by its sequence, and its index is the sequence as a number.
    """

    def __init__(self, topic: TopicId, generation: int, position: int, time_ms: int) -> None:
        self.topic, self.generation, self.position = topic, generation, position
        self.id_prefix = _ID_PREFIX.pack(generation, position)
        self.time = pa.scalar(time_ms * 1000, ARROW_SCHEMA.field("publish_time").type)  # publish times are ms
        self.position_scalar = pa.scalar(position, pa.int64())

    def batch(self, keys: list[bytes], payloads: list[bytes | None]) -> pa.RecordBatch:
        count, width = len(keys), len(keys[0])
        joined = b"".join(keys)
        if len(joined) != count * width:
            raise self._corrupt(next(k for k in keys if len(k) != width), "its key is not of the pointer's length")
        if None in payloads:  # (bytes compare with None in C: no Python per row)
            raise self._corrupt(keys[payloads.index(None)], f"it has no {PAYLOAD_COLUMN.decode()} cell")
        ids = bytearray(_ID.size * count)
        indexes = bytearray(8 * count)  # int64 in the machine's byte order, as Arrow holds them
        prefix_size = len(self.id_prefix)
        for j in range(prefix_size):
            ids[j :: _ID.size] = self.id_prefix[j : j + 1] * count
        for j in range(8):  # byte j of every sequence (big-endian), from every key
            column = joined[width - 8 + j :: width]
            ids[prefix_size + j :: _ID.size] = column
            indexes[(7 - j if sys.byteorder == "little" else j) :: 8] = column
        columns = [
            pa.Array.from_buffers(pa.binary(_ID.size), count, [None, pa.py_buffer(ids)]).cast(pa.binary()),
            pa.repeat(self.time, count),
            pa.array(payloads, pa.binary()),
            pa.repeat(self.position_scalar, count),
            pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(indexes)]),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)

    def _corrupt(self, key: bytes, reason: str) -> CorruptData:
        return CorruptData(
            f"corrupt stored payload {int.from_bytes(key[-8:], 'big')} of the message row at position "
            f"{self.position} of {self.topic} (generation {self.generation}): {reason}",
            topic=str(self.topic),
            generation=self.generation,
            position=self.position,
        )
