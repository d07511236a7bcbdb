"""Inspecting a topic without consuming it (docs/design.md, requirement 20): its messages with their batch row,
publish time, transaction write pointer and that transaction's state, and corrupt rows reported as
such (with their position) instead of stopping the inspection.

Rows are read in position order like the reader reads them (expired rows are not shown, since no
reader returns them). A pointer row is expanded through the reader, so stored payloads show too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tms_hbase.errors import CorruptData, InvalidArgument
from tms_hbase.fetch.reader import MessageReader
from tms_hbase.isolation.fate import TxFate, fate
from tms_hbase.model.inspection import Cursor, Entry
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.record import NONE
from tms_hbase.model.rows import (
    COUNTER_COLUMN,
    MESSAGE_COLUMN,
    BatchRow,
    generation_prefix,
    message_key,
    peek,
    pointer_prefix,
    position_of,
)
from tms_hbase.model.topic import TopicId
from tms_hbase.model.transaction import Transaction
from tms_hbase.storage.hbase import Table

CHUNK_ROWS = 64
ROLLED_BACK = "rolled back"


def state_of(view: Transaction | None, pointer: int | None) -> str | None:
    """The state of the transaction that wrote at ``pointer``, as ``view`` sees it."""
    if pointer is None:
        return None
    if pointer < 0:
        return ROLLED_BACK
    if view is None:
        return "unknown"
    return fate(view, pointer).value


class Inspector:
    """Reads a topic generation's rows for people (``tms-admin topic tail``)."""

    def __init__(self, messages: Table, payloads: Table, reader: MessageReader) -> None:
        self.messages = messages
        self.payloads = payloads
        self.reader = reader

    def start(
        self,
        topic: TopicId,
        generation: int,
        *,
        from_id: bytes | None = None,
        from_time: int | None = None,
        last: int | None = None,
    ) -> Cursor:
        """The cursor of the first message to show: a message id (inclusive), the first message
        published at ``from_time`` (ms) or later, the ``last`` N messages, or the beginning."""
        if sum(x is not None for x in (from_id, from_time, last)) > 1:
            raise InvalidArgument("give at most one of a start id, a start time or a number of last messages")
        if from_id is not None:
            mid = MessageId.decode(from_id)
            if mid.generation != generation:
                raise InvalidArgument(f"message id is from generation {mid.generation}; {topic} is at {generation}")
            return Cursor(mid.position, mid.index)
        if from_time is not None:
            return Cursor(self.reader.seek(topic, generation, from_time))
        if last is not None:
            return self._last(topic, generation, last)
        return Cursor(1)

    def entries(
        self,
        topic: TopicId,
        generation: int,
        cursor: Cursor,
        *,
        ttl: int,
        view: Callable[[], Transaction] | None,
        transactional: bool = False,
    ) -> Iterator[Entry]:
        """Messages (and corrupt rows) from ``cursor`` to the current tail. ``view`` gives the
        transaction state (called once, at the first transactional message). ``transactional`` shows
        what a transactional reader would see: rolled-back and invalid messages are left out and the
        inspection stops at the first message of a transaction in progress."""
        states: list[Transaction] = []
        now = self.reader.hbase_now()
        floor = now - ttl * 1000
        for position, value in self._rows(topic, generation, cursor.position):
            first_index = cursor.index if position == cursor.position else 0
            try:
                row = BatchRow.decode(value)
            except CorruptData as exc:
                yield Entry(position, 0, error=f"corrupt row at position {position} of {topic}: {exc}")
                continue
            if row.publish_time < floor or (row.expires_at is not None and row.expires_at <= now):
                continue
            if row.tx_pointer is not None and row.tx_pointer > 0 and view is not None and not states:
                states.append(view())
            state = state_of(states[0] if states else None, row.tx_pointer)
            if transactional and state in (ROLLED_BACK, TxFate.INVALID.value):
                continue
            if transactional and state in (TxFate.IN_PROGRESS.value, "unknown"):
                return
            if row.pointer:
                row_ids = MessageId(generation, position, 0), MessageId(generation, position + 1, 0)
                stored = self.reader.fetch_range(topic, *row_ids)  # the payloads the row points at
                messages = [(MessageId.decode(m.id).index, m.payload, (m.key, m.headers)) for m in stored]
            else:
                extras = row.extras or [NONE] * len(row.payloads)
                messages = [(i, p, e) for i, (p, e) in enumerate(zip(row.payloads, extras, strict=True))]
            for index, payload, (key, headers) in messages:
                if index >= first_index:
                    mid = bytes(MessageId(generation, position, index))
                    yield Entry(
                        position, index, mid, row.publish_time, row.tx_pointer, state, payload, None, key, headers
                    )

    def _rows(self, topic: TopicId, generation: int, start: int) -> Iterator[tuple[int, bytes]]:
        """Raw message cells from ``start`` to the tail; a gap below a row is scanned again once (a
        scan that crossed a region boundary while a writer added rows there). In a sequencer generation
        the reader's walk (:meth:`.SequencerReads.cells`): it ends before a hole not due yet, so a
        ``--follow`` that goes on after the last row shown never passes a batch that lands below it."""
        if self.reader.topics.get(topic).sequencer:
            for position, _, value in self.reader.sequencer.cells(topic, generation, start, tolerant=True):
                yield position, value or b""  # (a row without the cell: reported as corrupt)
            return
        end = generation_prefix(topic, generation) + b"\xff" * 8
        expected = max(1, start)
        while True:
            chunk = self._scan(message_key(topic, generation, expected), end)
            for key, value in chunk:
                position = position_of(key)
                if position > expected:
                    yield from self._scan(message_key(topic, generation, expected), key, raw=False)
                yield position, value
                expected = position + 1
            if len(chunk) < CHUNK_ROWS:
                return

    def _scan(self, start: bytes, stop: bytes, raw: bool = True) -> list:
        rows = self.messages.scan(start, stop, limit=CHUNK_ROWS, columns=[MESSAGE_COLUMN])
        if raw:
            return [(k, cells[MESSAGE_COLUMN]) for k, cells in rows]
        return [(position_of(k), cells[MESSAGE_COLUMN]) for k, cells in rows]

    def _last(self, topic: TopicId, generation: int, count: int) -> Cursor:
        """The cursor ``count`` messages before the tail, counted backwards row by row."""
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise InvalidArgument(f"bad number of last messages {count!r}: expected a positive integer")
        prefix = generation_prefix(topic, generation)
        high = prefix + b"\xff" * 8
        seen = 0
        position = 1
        while True:
            rows = self.messages.scan(high, prefix, reverse=True, limit=CHUNK_ROWS, columns=[MESSAGE_COLUMN])
            for key, cells in rows:
                position = position_of(key)
                try:
                    head = peek(cells[MESSAGE_COLUMN])
                except CorruptData:
                    continue
                if head.tx_pointer is not None and not head.payload_count:
                    counter = self.payloads.get_cell(
                        pointer_prefix(topic, generation, abs(head.tx_pointer)), COUNTER_COLUMN
                    )
                    size, first = (0 if counter is None else int.from_bytes(counter, "big", signed=True)), 1
                else:
                    size, first = head.payload_count, 0
                seen += size
                if seen >= count:
                    return Cursor(position, first + seen - count)
            if len(rows) < CHUNK_ROWS or position == 1:
                return Cursor(position)
            high = message_key(topic, generation, position - 1)
