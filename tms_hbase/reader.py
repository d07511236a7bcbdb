"""Consuming: read a topic generation's batch rows in position order and turn them into messages.

* TTL is applied at read: expired rows are never returned, swept or not.
* Positions are dense, so a gap below a row that exists means either the sweeper removed those rows
  or the scan crossed a region boundary while a writer added them; the gap is scanned again, and
  what is still missing then was swept.
* With a transaction, a row is accepted (no pointer, or visible), skipped (rolled back or invalid),
  or stops the whole fetch (in progress or above the read pointer), so order is kept.
* A pointer row expands to its payload-table rows in store order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .clock import now_ms
from .connection import HBaseConnection
from .errors import InvalidArgument
from .message_id import MessageId
from .metadata import MetadataCache
from .metrics import CLIENT_METRICS
from .rows import (
    MESSAGE_COLUMN,
    PAYLOAD_COLUMN,
    BatchRow,
    RowHeader,
    generation_prefix,
    message_key,
    payload_key,
    peek,
    pointer_prefix,
    position_of,
    sequence_of,
)
from .tables import TableNames
from .topic import TopicId
from .tx import Transaction

CHUNK_ROWS = 64
PAYLOAD_CHUNK = 1000


@dataclass(frozen=True)
class Message:
    """One consumed message: ``id`` (opaque bytes, sorts in consumption order), payload, publish time (ms)."""

    id: bytes
    payload: bytes
    publish_time: int


@dataclass(frozen=True)
class _Start:
    position: int
    index: int  # first message index wanted in the start row
    inclusive: bool


def _validate(start_message: object, start_time: object, inclusive: object, limit: object, transaction: object) -> None:
    if start_message is not None and start_time is not None:
        raise InvalidArgument("give start_message or start_time, not both")
    if start_time is not None and (isinstance(start_time, bool) or not isinstance(start_time, int) or start_time < 0):
        raise InvalidArgument(f"bad start_time {start_time!r}: expected milliseconds since the epoch, >= 0")
    if not isinstance(inclusive, bool):
        raise InvalidArgument(f"inclusive must be True or False, not {inclusive!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise InvalidArgument(f"bad limit {limit!r}: expected a positive integer or None")
    if transaction is not None and not isinstance(transaction, Transaction):
        raise InvalidArgument(
            f"transaction must be a tms_hbase.tx.Transaction, not {type(transaction).__name__} "
            "(decode Tephra bytes with TransactionCodec first)"
        )


class MessageReader:
    """Fetches messages in order; every fetch is a poll that ends at the topic's current tail."""

    def __init__(self, hbase: HBaseConnection, tables: TableNames, topics: MetadataCache) -> None:
        self.hbase = hbase
        self.tables = tables
        self.topics = topics

    def fetch(
        self,
        topic: TopicId,
        start_message: bytes | None = None,
        start_time: int | None = None,
        inclusive: bool = True,
        limit: int | None = None,
        transaction: Transaction | None = None,
    ) -> Iterator[Message]:
        """Validate and place the start now (bad input raises here), then iterate lazily."""
        _validate(start_message, start_time, inclusive, limit, transaction)
        meta = self.topics.get(topic)
        generation = meta.generation
        floor = now_ms() - meta.ttl * 1000
        if start_message is not None:
            mid = MessageId.decode(start_message)
            if mid.generation > generation:
                raise InvalidArgument(f"message id is from generation {mid.generation}; {topic} is at {generation}")
            if mid.generation == generation:
                start = _Start(mid.position, mid.index, inclusive)
            else:  # from before the topic was re-created: the new generation is all new
                start = _Start(self.seek(topic, generation, floor), 0, True)
        else:
            since = floor if start_time is None else max(floor, start_time + (0 if inclusive else 1))
            start = _Start(self.seek(topic, generation, since), 0, True)
        return self._iterate(topic, generation, start, floor, limit, transaction)

    def fetch_positions(
        self,
        topic: TopicId,
        generation: int,
        first: int,
        last: int,
        floor: int,
        transaction: Transaction | None = None,
        stopped: list[int] | None = None,
    ) -> Iterator[Message]:
        """The messages of batch rows ``first``..``last`` of one generation (a slice for parallel
        readers); with a transaction, the position it had to stop at is appended to ``stopped``."""
        return self._iterate(topic, generation, _Start(first, 0, True), floor, None, transaction, last, stopped)

    # -- positions ----------------------------------------------------------------------------

    def seek(self, topic: TopicId, generation: int, time_ms: int) -> int:
        """The first position whose publish time is >= ``time_ms`` (the tail + 1 if none): a binary
        search over positions that steps over swept gaps, O(log n) reads."""
        prefix = generation_prefix(topic, generation)
        first = self._first_at_or_after(prefix, 1, None)
        if first is None:
            return 1
        if first[1].publish_time >= time_ms:
            return first[0]
        last = self._last(prefix)
        if last[1].publish_time < time_ms:
            return last[0] + 1
        lo, hi, bound = first[0], last[0], last[0]  # time(lo) < t <= time(hi); probe below bound
        while bound - lo > 1:
            mid = (lo + bound) // 2
            found = self._first_at_or_after(prefix, mid, bound)
            if found is None:
                bound = mid  # nothing in [mid, bound)
            elif found[1].publish_time < time_ms:
                lo = found[0]
            else:
                hi = bound = found[0]
        return hi

    def _first_at_or_after(self, prefix: bytes, position: int, bound: int | None) -> tuple[int, RowHeader] | None:
        """The first row at ``position`` or after it (below ``bound``): a get, then a scan if swept."""
        key = prefix + position.to_bytes(8, "big")
        data = self.hbase.run("read message row", lambda c: c.table(self.tables.messages).row(key))
        if MESSAGE_COLUMN in data:
            return position, peek(data[MESSAGE_COLUMN])
        stop = prefix + (b"\xff" * 8 if bound is None else bound.to_bytes(8, "big"))
        rows = self._scan(key, stop, 1)
        return (position_of(rows[0][0]), peek(rows[0][1])) if rows else None

    def _last(self, prefix: bytes) -> tuple[int, RowHeader]:
        rows = self.hbase.run(
            "read tail",
            lambda c: list(
                c.table(self.tables.messages).scan(
                    row_start=prefix + b"\xff" * 8, row_stop=prefix, reverse=True, limit=1, batch_size=1
                )
            ),
        )
        key, data = rows[0]
        return position_of(key), peek(data[MESSAGE_COLUMN])

    def _scan(self, start: bytes, stop: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        def scan(conn) -> list[tuple[bytes, bytes]]:
            table = conn.table(self.tables.messages)
            return [
                (k, v[MESSAGE_COLUMN])
                for k, v in table.scan(row_start=start, row_stop=stop, limit=limit, batch_size=limit)
            ]

        with CLIENT_METRICS.fetch_seconds.time():
            return self.hbase.run("scan messages", scan)

    # -- rows to messages ---------------------------------------------------------------------

    def _rows(self, topic: TopicId, generation: int, start: int, first: int) -> Iterator[tuple[int, BatchRow]]:
        """Rows from ``start`` in position order, in chunks (the first of ``first`` rows: a fetch with a
        small limit reads no more); gaps are scanned again (see module doc)."""
        prefix = generation_prefix(topic, generation)
        end = prefix + b"\xff" * 8
        expected = start
        size = first
        while True:
            chunk = self._scan(message_key(topic, generation, expected), end, size)
            for key, value in chunk:
                position = position_of(key)
                if position > expected:  # rows the scan may have raced past, or swept ones
                    yield from self._range(topic, generation, expected, key)
                yield position, BatchRow.decode(value)
                expected = position + 1
            if len(chunk) < size:
                return  # the tail as it was when this poll read it
            size = CHUNK_ROWS

    def _range(self, topic: TopicId, generation: int, start: int, stop: bytes) -> Iterator[tuple[int, BatchRow]]:
        """Every row from position ``start`` up to (not including) row key ``stop``."""
        while True:
            chunk = self._scan(message_key(topic, generation, start), stop, CHUNK_ROWS)
            for key, value in chunk:
                start = position_of(key) + 1
                yield start - 1, BatchRow.decode(value)
            if len(chunk) < CHUNK_ROWS:
                return

    def _iterate(
        self,
        topic: TopicId,
        generation: int,
        start: _Start,
        floor: int,
        limit: int | None,
        transaction: Transaction | None,
        end: int | None = None,
        stopped: list[int] | None = None,
    ) -> Iterator[Message]:
        remaining = limit
        now = now_ms()
        first_chunk = CHUNK_ROWS if limit is None else min(limit, CHUNK_ROWS)  # every row holds a message or more
        if end is not None:
            first_chunk = max(1, min(first_chunk, end - start.position + 1))
        for position, row in self._rows(topic, generation, start.position, first_chunk):
            if end is not None and position > end:
                return
            if row.publish_time < floor or (row.expires_at is not None and row.expires_at <= now):
                continue
            pointer = row.tx_pointer
            if transaction is not None and pointer is not None:
                if pointer < 0 or transaction.is_invalid(pointer):
                    continue
                if not transaction.is_visible(pointer):
                    if stopped is not None:
                        stopped.append(position)
                    return  # in progress or not yet committed for this reader: keep the order
            first_index = 0
            if position == start.position:
                first_index = start.index if start.inclusive else start.index + 1
            if row.pointer:
                messages = self._stored(topic, generation, abs(pointer), position, row, first_index)
            else:
                messages = (
                    Message(bytes(MessageId(generation, position, i)), payload, row.publish_time)
                    for i, payload in enumerate(row.payloads)
                    if i >= first_index
                )
            for message in messages:
                yield message
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return

    def _stored(
        self, topic: TopicId, generation: int, pointer: int, position: int, row: BatchRow, first_index: int
    ) -> Iterator[Message]:
        """The payload-table rows of a pointer row, in store order, from sequence ``first_index``."""
        stop = pointer_prefix(topic, generation, pointer) + b"\xff" * 8
        sequence = max(first_index, 1)
        while True:
            start = payload_key(topic, generation, pointer, sequence)

            def scan(conn, start: bytes = start) -> list[tuple[bytes, bytes]]:
                table = conn.table(self.tables.payloads)
                rows = table.scan(row_start=start, row_stop=stop, limit=PAYLOAD_CHUNK, batch_size=PAYLOAD_CHUNK)
                return [(k, v[PAYLOAD_COLUMN]) for k, v in rows]

            rows = self.hbase.run(f"read stored payloads of {topic}", scan)
            for key, payload in rows:
                seq = sequence_of(key)
                yield Message(bytes(MessageId(generation, position, seq)), payload, row.publish_time)
                sequence = seq + 1
            if len(rows) < PAYLOAD_CHUNK:
                return
