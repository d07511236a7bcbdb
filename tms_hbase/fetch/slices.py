"""The reads that split a topic among many workers (the Spark data source, through ``client.slices``): the
positions of a time range, batch rows described without their payloads, and the sequences of the payloads
stored under a transaction's write pointer. Each range they find is then read with
:meth:`.MessageReader.fetch_range`, which applies the rules of a fetch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from tms_hbase.fetch.reader import PAYLOAD_CHUNK, MessageReader
from tms_hbase.model.rows import (
    F_TX,
    MAX_POSITION,
    MESSAGE_COLUMN,
    VERSION,
    generation_prefix,
    message_count,
    message_key,
    past_last,
    payload_key,
    peek_row,
    pointer_prefix,
    position_of,
    sequence_of,
)
from tms_hbase.model.slices import BatchInfo, PositionRange
from tms_hbase.model.topic import TopicId
from tms_hbase.ordering.lookup import CHUNK_ROWS
from tms_hbase.storage.hbase import KEYS_ONLY

# An HBase filter that keeps the rows whose cell carries a transaction write pointer: the cell starts
# with the format version (1) and the flags byte, which has F_TX (1) set. Only the first two bytes are
# matched, both below 0x80, so the regex sees them unchanged whatever charset HBase decodes with.
_TX_FLAGS = "".join(f"\\x{flags:02x}" for flags in range(0x80) if flags & F_TX)
_TRANSACTIONAL_ROWS = f"ValueFilter(=, 'regexstring:^\\x{VERSION:02x}[{_TX_FLAGS}]')"


def positions(
    reader: MessageReader, topic: TopicId, start_time: int | None = None, end_time: int | None = None
) -> PositionRange:
    """The positions of the current generation from the first row not expired and published at or
    after ``start_time`` up to the last row before the first one published at or after ``end_time``
    (ms; None: unbounded; both found with :meth:`.MessageReader.seek`). In a chain generation every row in the span
    is dated in [start_time, end_time); in a sequencer generation rows in it may be dated up to D
    outside (docs/ordering.md), as with Kafka's offsetsForTimes, and without a start time (or one
    before the TTL) the span starts at the seek's lower bound: reads skip expired rows anyway."""
    meta = reader.topics.get(topic)
    generation = meta.generation
    floor = reader.hbase_now() - meta.ttl * 1000
    if start_time is None or start_time <= floor:
        first = reader.seek(topic, generation, floor, exact=False)
    else:
        first = reader.seek(topic, generation, start_time)
    last = reader.tail(topic, generation) if end_time is None else reader.seek(topic, generation, end_time) - 1
    return PositionRange(generation, first, last)


def batches(
    reader: MessageReader, topic: TopicId, generation: int, first: int, last: int, *, transactional_only: bool = False
) -> Iterator[BatchInfo]:
    """The batch rows at positions ``first``..``last``, described without their payloads being
    decoded. ``transactional_only`` keeps only rows with a write pointer, filtered in HBase."""
    prefix = generation_prefix(topic, generation)
    stop = message_key(topic, generation, last + 1) if last < MAX_POSITION else past_last(prefix)
    start = first
    while start <= last:
        key = message_key(topic, generation, start)
        found = reader.messages.scan(
            key, stop, limit=CHUNK_ROWS, filter=_TRANSACTIONAL_ROWS if transactional_only else None
        )
        rows = [(k, v.get(MESSAGE_COLUMN)) for k, v in found]
        for key, cell in rows:
            head = peek_row(key, cell)  # CorruptData naming the row if it does not decode
            count = message_count(cast(bytes, cell))  # peek_row raised CorruptData if there was no cell
            yield BatchInfo(position_of(key), head.publish_time, head.tx_pointer, count)
        if len(rows) < CHUNK_ROWS or position_of(rows[-1][0]) == MAX_POSITION:
            return
        start = position_of(rows[-1][0]) + 1


def stored_sequences(
    reader: MessageReader,
    topic: TopicId,
    generation: int,
    write_pointer: int,
    start: int = 0,
    stop: int | None = None,
    limit: int = PAYLOAD_CHUNK,
    *,
    reverse: bool = False,
) -> list[int]:
    """Sequences in [start, stop) of the payloads stored under a write pointer: the lowest ``limit`` of
    them in ascending order, or the highest in descending order with ``reverse``. Keys only."""
    prefix = pointer_prefix(topic, generation, write_pointer)
    low = payload_key(topic, generation, write_pointer, max(start, 1))  # sequence 0: the counter row's place
    high = past_last(prefix) if stop is None else payload_key(topic, generation, write_pointer, stop)
    if high <= low:
        return []
    below_low = prefix if start <= 1 else payload_key(topic, generation, write_pointer, start - 1)
    rows = reader.payloads.scan(
        high if reverse else low,
        below_low if reverse else high,  # a reverse scan stops above its (exclusive) stop key
        limit=limit + 1 if reverse else limit,
        reverse=reverse,
        filter=KEYS_ONLY,
    )
    keys = [k for k, _ in rows]
    if reverse:  # a reverse scan starts at its (inclusive) start key: drop ``high`` itself
        keys = [k for k in keys if k < high][:limit]
    return [sequence_of(k) for k in keys]
