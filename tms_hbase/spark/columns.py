"""Messages as Arrow record batches, built column-wise: what a read task hands Spark.

A message's key and headers are the columns ``key`` (binary, null: none) and ``headers`` (an array of
``struct<name: string, value: binary>``, empty: none), as Kafka's Spark source has them.

Two paths. Any range goes through :meth:`MessagingClient.slices.fetch_range` (every rule of a fetch: TTL,
transactions, swept gaps, corrupt rows) and its messages are turned into columns in chunks. A range the
planner found to lie inside one pointer row (a piece of a bulk publish) is read faster: the library
still decides whether the row is readable, by fetching the range's first message, and then the
piece is a scan of the payload table in large chunks, turned into columns without a ``Message`` per row.
"""

from __future__ import annotations

import itertools
import struct
import sys
from collections.abc import Iterator, Sequence
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import ArrayType, BinaryType, LongType, StringType, StructField, StructType, TimestampType

from tms_hbase.client import MessagingClient
from tms_hbase.errors import CorruptData
from tms_hbase.model.message import Message
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.record import NONE, Extra, decode_all
from tms_hbase.model.rows import EXTRA_COLUMN, PAYLOAD_COLUMN, past_last, payload_key, pointer_prefix
from tms_hbase.model.topic import TopicId
from tms_hbase.tx import Transaction

HEADER = StructType([StructField("name", StringType(), False), StructField("value", BinaryType(), False)])
SCHEMA = StructType(
    [
        StructField("id", BinaryType(), False),
        StructField("publish_time", TimestampType(), False),
        StructField("payload", BinaryType(), False),
        StructField("position", LongType(), False),
        StructField("index", LongType(), False),
        StructField("key", BinaryType(), True),
        StructField("headers", ArrayType(HEADER, containsNull=False), False),
    ]
)
ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")
HEADERS_TYPE = cast(pa.ListType, ARROW_SCHEMA.field("headers").type)
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
    extras: list[Extra] = []
    size = 0
    for message in messages:
        _, position, index = _ID.unpack(message.id)
        ids.append(message.id)
        times.append(message.publish_time)
        payloads.append(message.payload)
        positions.append(position)
        indexes.append(index)
        extras.append((message.key, message.headers))
        size += len(message.payload)
        if len(ids) == BATCH_ROWS or size >= BATCH_BYTES:
            yield _batch(ids, pa.array(times, pa.int64()), payloads, pa.array(positions, pa.int64()), indexes, extras)
            ids, times, payloads, positions, indexes, extras, size = [], [], [], [], [], [], 0
    if ids:
        yield _batch(ids, pa.array(times, pa.int64()), payloads, pa.array(positions, pa.int64()), indexes, extras)


def extra_columns(extras: Sequence[Extra]) -> tuple[pa.Array, pa.Array]:
    """The ``key`` and ``headers`` columns of messages with these keys and headers."""
    keys = pa.array([key for key, _ in extras], pa.binary())
    offsets = pa.array(list(itertools.accumulate((len(headers) for _, headers in extras), initial=0)), pa.int32())
    pairs = [pair for _, headers in extras for pair in headers]
    names, values = zip(*pairs, strict=True) if pairs else ((), ())
    fields = list(HEADERS_TYPE.value_type)
    flat = pa.StructArray.from_arrays([pa.array(names, pa.string()), pa.array(values, pa.binary())], fields=fields)
    return keys, pa.ListArray.from_arrays(offsets, flat, type=HEADERS_TYPE)


def _no_extras(count: int) -> tuple[pa.Array, pa.Array]:
    """The ``key`` and ``headers`` columns of ``count`` messages with neither (no Python step per message)."""
    offsets = pa.Array.from_buffers(pa.int32(), count + 1, [None, pa.py_buffer(bytes(4 * (count + 1)))])
    fields = list(HEADERS_TYPE.value_type)
    flat = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())], fields=fields)
    return pa.nulls(count, pa.binary()), pa.ListArray.from_arrays(offsets, flat, type=HEADERS_TYPE)


def within_time(batch: pa.RecordBatch, start_ms: int | None, end_ms: int | None) -> pa.RecordBatch:
    """The messages of ``batch`` published in [start_ms, end_ms) (ms; None: unbounded)."""
    micros = batch.column("publish_time").cast(pa.int64())
    keep = pc.greater_equal(micros, (start_ms or 0) * 1000)
    if end_ms is not None:
        keep = pc.and_(keep, pc.less(micros, end_ms * 1000))
    return batch.filter(keep)


def _batch(
    ids: list[bytes],
    times_ms: pa.Array,
    payloads: list[bytes],
    positions: pa.Array,
    indexes: list[int],
    extras: list[Extra],
) -> pa.RecordBatch:
    micros = pc.multiply(times_ms, 1000).cast(ARROW_SCHEMA.field("publish_time").type)  # publish times are ms
    columns = [
        pa.array(ids, pa.binary()),
        micros,
        pa.array(payloads, pa.binary()),
        positions,
        pa.array(indexes, pa.int64()),
        *(extra_columns(extras) if extras.count(NONE) < len(extras) else _no_extras(len(extras))),
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

    The first message is fetched with :meth:`MessagingClient.slices.fetch_range`, so a row that is expired,
    swept, rolled back for a transactional reader or corrupt is handled as a fetch handles it; then the
    piece from that message on is read as payload-table rows (payload, key and headers), in chunks of about
    :data:`BATCH_BYTES` (at most :data:`BATCH_ROWS` rows), and turned into columns whole (see :class:`_Piece`).
    """
    first = next(iter(client.slices.fetch_range(topic, start, end, transaction)), None)  # (the rest is dropped)
    if first is None:
        return
    generation, position, index = _ID.unpack(first.id)
    piece = _Piece(topic, generation, position, first.publish_time)
    prefix = pointer_prefix(topic, generation, pointer)
    stop = payload_key(topic, generation, pointer, end.index) if end.position == position else past_last(prefix)
    table = client.installation.payloads
    low, limit = payload_key(topic, generation, pointer, index), FIRST_SCAN  # (the first message read again)
    while low < stop:
        keys, (payloads, extras) = table.scan_columns(low, stop, (PAYLOAD_COLUMN, EXTRA_COLUMN), limit)
        if keys:
            yield piece.batch(keys, payloads, extras)
        if len(keys) < limit:
            break
        size = sum(map(len, cast(list[bytes], payloads)))  # (batch() found no None in them)
        limit = max(1, min(BATCH_ROWS, BATCH_BYTES * len(keys) // max(1, size)))  # rows of ~BATCH_BYTES
        low = keys[-1] + b"\x00"  # the first key after the last one read


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

    def batch(self, keys: list[bytes], payloads: list[bytes | None], extras: list[bytes | None]) -> pa.RecordBatch:
        """The messages of payload-table rows with these keys, payload cells and key-and-header cells (None:
        the message has neither, as every message stored before keys existed)."""
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
            *(_no_extras(count) if extras.count(None) == count else extra_columns(self._extras(keys, extras))),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)

    def _extras(self, keys: list[bytes], cells: list[bytes | None]) -> list[Extra]:
        """The keys and headers in the rows' key-and-header cells."""
        extras = []
        for key, cell in zip(keys, cells, strict=True):
            try:
                extras.append(NONE if cell is None else decode_all(cell, 0, 1)[0][0])
            except CorruptData as exc:
                raise self._corrupt(key, str(exc)) from None
        return extras

    def _corrupt(self, key: bytes, reason: str) -> CorruptData:
        return CorruptData(
            f"corrupt stored payload {int.from_bytes(key[-8:], 'big')} of the message row at position "
            f"{self.position} of {self.topic} (generation {self.generation}): {reason}",
            topic=str(self.topic),
            generation=self.generation,
            position=self.position,
        )
