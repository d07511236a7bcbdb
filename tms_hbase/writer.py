"""Publishing: append one batch row per publish at the next dense position of its topic generation.

The protocol (docs/ordering.md has the argument for why it holds):

* a batch is one cell, written with checkAndPut-if-absent at ``tail + 1``; it appears whole or not at all;
* the loser of a race reads the row that beat it (learning its publish time) and tries the next position;
* publish time is ``max(now, predecessor's publish time)``, so times never decrease along positions;
* every row carries this writer's id and batch number: when the answer to a checkAndPut is lost, the
  writer reads that position back and recognises its own batch instead of storing it twice;
* a writer never holds a lock, so a writer that dies blocks nobody;
* every row carries the generation's running totals (messages, bytes), its predecessor's plus its own,
  so lag and topic size are subtractions (the predecessor is read anyway: the tail or the row that won).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from .clock import now_ms
from .connection import HBaseConnection, mutation
from .errors import HBaseUnavailable, InvalidArgument, PublishOutcomeUnknown
from .metadata import MetadataCache
from .metrics import CLIENT_METRICS
from .rows import (
    COUNTER_COLUMN,
    MESSAGE_COLUMN,
    PAYLOAD_COLUMN,
    BatchRow,
    RowHeader,
    Totals,
    batch_size,
    generation_prefix,
    message_key,
    payload_key,
    peek,
    pointer_prefix,
    position_of,
    with_tx_pointer,
)
from .storage import Table
from .tables import TableNames
from .topic import TopicId
from .wire import RollbackDetail

log = logging.getLogger(__name__)

DEFAULT_MAX_BATCH_BYTES = 16 * 1024 * 1024
# A cached tail older than this is re-read before use. It must stay far below the sweeper's grace
# period (rows are deleted only when older than TTL + grace), so a writer never writes into a
# position the sweeper has freed.
TAIL_MAX_AGE = 30.0
# Sequences a caller names itself (``store(..., sequence=)``) start here, far above what the counter hands out.
EXPLICIT_SEQUENCES = 2**40
# After this many lost races in a row, jump to the real tail instead of walking forward.
_WALK_LIMIT = 4


@dataclass(frozen=True)
class Resume:
    """Where an interrupted publish may have landed: re-check from ``position`` for this batch."""

    topic: TopicId
    generation: int
    position: int
    batch_no: int


@dataclass
class _Tail:
    generation: int
    position: int  # last position known to exist (0: the generation is empty)
    publish_time: int  # its publish time
    seen_at: float  # time.monotonic() when it was known
    totals: Totals | None = None  # its running totals (None: a row from before totals existed)


def validate_payloads(payloads: object, max_batch_bytes: int, *, allow_empty: bool) -> tuple[bytes, ...]:
    """Payloads as a tuple of bytes, or InvalidArgument (nothing is written on bad input)."""
    if isinstance(payloads, (bytes, bytearray, memoryview, str)) or not isinstance(payloads, Sequence):
        raise InvalidArgument("payloads must be a list of bytes (e.g. [b'event'])")
    result = []
    for i, payload in enumerate(payloads):
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise InvalidArgument(f"payload {i} is {type(payload).__name__}, not bytes")
        result.append(bytes(payload))
    if not result and not allow_empty:
        raise InvalidArgument("nothing to publish: the list of payloads is empty")
    size = batch_size(result)
    if size > max_batch_bytes:
        raise InvalidArgument(f"batch of {size} bytes is over the limit of {max_batch_bytes} bytes; split it")
    return tuple(result)


def validate_write_pointer(pointer: object) -> int:
    if isinstance(pointer, bool) or not isinstance(pointer, int) or not 0 < pointer < 2**63:
        raise InvalidArgument(f"bad transaction write pointer {pointer!r}: expected a positive 64-bit integer")
    return pointer


class MessageWriter:
    """Appends batches to topics for one writer identity (thread-safe)."""

    def __init__(
        self,
        hbase: HBaseConnection,
        tables: TableNames,
        topics: MetadataCache,
        *,
        writer_id: bytes | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> None:
        self.hbase = hbase
        self.tables = tables
        self.topics = topics
        self.writer_id = writer_id or uuid.uuid4().bytes
        self.max_batch_bytes = max_batch_bytes
        self._batch_numbers = itertools.count(1)
        self._tails: dict[TopicId, _Tail] = {}
        self._lock = threading.Lock()

    # -- publish ------------------------------------------------------------------------------

    def publish(
        self,
        topic: TopicId,
        payloads: Sequence[bytes],
        tx_write_pointer: int | None = None,
        ttl: float | None = None,
        resume: Resume | None = None,
    ) -> RollbackDetail | None:
        """Append one batch; returns the rollback detail of a transactional publish, else None.

        ``resume`` (from a PublishOutcomeUnknown) retries an interrupted publish exactly once: an
        interrupted attempt can only have landed at the position it aimed at, so that position is
        tried again, and finding this writer's batch number there means it is done.
        """
        pointer = None if tx_write_pointer is None else validate_write_pointer(tx_write_pointer)
        batch = validate_payloads(payloads, self.max_batch_bytes, allow_empty=pointer is not None)
        ttl_ms = _ttl_ms(ttl)
        meta = self.topics.get(topic)
        if ttl_ms is not None and ttl_ms > meta.ttl * 1000:
            raise InvalidArgument(f"per-message ttl {ttl}s is longer than the topic's ttl of {meta.ttl}s")
        if resume is not None and (resume.topic != topic or resume.generation != meta.generation):
            resume = None  # the topic was re-created since: the interrupted batch is gone with it
        if resume is None:
            with self._lock:
                batch_no = next(self._batch_numbers)
        else:
            batch_no = resume.batch_no
        position = self._append(topic, meta.generation, batch, pointer, ttl_ms, batch_no, resume)
        if pointer is None:
            return None
        return RollbackDetail(str(topic), pointer, meta.generation, position, position)

    def _append(
        self,
        topic: TopicId,
        generation: int,
        payloads: tuple[bytes, ...],
        tx_pointer: int | None,
        ttl_ms: int | None,
        batch_no: int,
        resume: Resume | None = None,
    ) -> int:
        if resume is None:
            tail = self._tail(topic, generation)
            position, predecessor_time, predecessor_totals = tail.position + 1, tail.publish_time, tail.totals
        else:
            # An interrupted attempt can only land where it was aimed: try that position again.
            position = resume.position
            before = self._read_row(message_key(topic, generation, position - 1)) if position > 1 else None
            predecessor_time = before.publish_time if before else 0
            predecessor_totals = before.totals if before else Totals(0, 0)
        own = self._own_count(topic, generation, payloads, tx_pointer)
        losses = link_failures = 0
        while True:
            now = now_ms()
            row = BatchRow(
                publish_time=max(now, predecessor_time),
                writer_id=self.writer_id,
                batch_no=batch_no,
                payloads=payloads,
                tx_pointer=tx_pointer,
                expires_at=None if ttl_ms is None else now + ttl_ms,
                pointer=tx_pointer is not None and not payloads,
                # after a row without totals (an older writer's), counting starts again from this row
                totals=(predecessor_totals or Totals(0, 0)).plus(*own),
            )
            key = message_key(topic, generation, position)
            try:
                won = self._put_if_absent(key, row.encode())
            except HBaseUnavailable as exc:
                # The put may have landed. Retry the same position: if it did land, that retry loses
                # and the read below recognises our own batch.
                link_failures += 1
                if link_failures > self.hbase.retries:
                    raise self._unknown(exc, Resume(topic, generation, position, batch_no)) from exc
                log.info("publish to %s: answer lost at position %d, checking", topic, position)
                won = False
            if won:
                self._remember(topic, _Tail(generation, position, row.publish_time, time.monotonic(), row.totals))
                return position
            try:
                existing = self._read_row(key)
            except HBaseUnavailable as exc:
                raise self._unknown(exc, Resume(topic, generation, position, batch_no)) from exc
            if existing is None:
                continue  # the link failed before the put landed: try the same position again
            if existing.writer_id == self.writer_id and existing.batch_no == batch_no:
                tail = _Tail(generation, position, existing.publish_time, time.monotonic(), existing.totals)
                self._remember(topic, tail)
                return position  # our own earlier attempt landed
            losses += 1
            CLIENT_METRICS.races_lost.inc()
            if losses % _WALK_LIMIT == 0:
                tail = self._read_tail(topic, generation)
                position, predecessor_time, predecessor_totals = tail.position + 1, tail.publish_time, tail.totals
            else:
                position, predecessor_time, predecessor_totals = position + 1, existing.publish_time, existing.totals

    @staticmethod
    def _unknown(exc: HBaseUnavailable, resume: Resume) -> PublishOutcomeUnknown:
        return PublishOutcomeUnknown(
            f"{exc} (the batch may or may not be stored at position {resume.position} of {resume.topic}; "
            "pass this error as resume= to finish the publish exactly once)",
            resume,
        )

    def _tail(self, topic: TopicId, generation: int) -> _Tail:
        with self._lock:
            tail = self._tails.get(topic)
        if tail is not None and tail.generation == generation and time.monotonic() - tail.seen_at < TAIL_MAX_AGE:
            return tail
        return self._read_tail(topic, generation)

    def _remember(self, topic: TopicId, tail: _Tail) -> None:
        with self._lock:
            known = self._tails.get(topic)
            if known is None or known.generation != tail.generation or known.position <= tail.position:
                self._tails[topic] = tail

    def _read_tail(self, topic: TopicId, generation: int) -> _Tail:
        """The last row of the generation, found with a one-row reverse scan."""
        prefix = generation_prefix(topic, generation)
        seen_at = time.monotonic()
        rows = self.hbase.run(
            f"read tail of {topic}",
            lambda c: list(
                c.table(self.tables.messages).scan(
                    row_start=prefix + b"\xff" * 8, row_stop=prefix, reverse=True, limit=1, batch_size=1
                )
            ),
        )
        if not rows:
            return _Tail(generation, 0, 0, seen_at, Totals(0, 0))
        key, data = rows[0]
        head = peek(data[MESSAGE_COLUMN])
        return _Tail(generation, position_of(key), head.publish_time, seen_at, head.totals)

    def _own_count(
        self, topic: TopicId, generation: int, payloads: tuple[bytes, ...], tx_pointer: int | None
    ) -> tuple[int, int]:
        """(messages, bytes) this batch adds to the totals. A pointer row counts the payloads its
        pointer's counter handed out (one read); their bytes are not known here and count 0."""
        if payloads or tx_pointer is None:
            return len(payloads), sum(map(len, payloads))
        counter = Table(self.hbase, self.tables.payloads).get_cell(
            pointer_prefix(topic, generation, tx_pointer), COUNTER_COLUMN
        )
        return (0 if counter is None else int.from_bytes(counter, "big", signed=True)), 0

    def _read_row(self, key: bytes) -> RowHeader | None:
        data = self.hbase.run("read message row", lambda c: c.table(self.tables.messages).row(key))
        value = data.get(MESSAGE_COLUMN)
        return None if value is None else peek(value)

    def _put_if_absent(self, key: bytes, value: bytes) -> bool:
        put = mutation(MESSAGE_COLUMN, value)
        table = self.tables.messages.encode()
        return self.hbase.run(
            "publish",
            lambda c: c.client.checkAndPut(table, key, MESSAGE_COLUMN, None, put, {}),
            idempotent=False,
        )

    # -- store --------------------------------------------------------------------------------

    def store(
        self, topic: TopicId, payloads: Sequence[bytes], tx_write_pointer: int, sequence: int | None = None
    ) -> None:
        """Store payloads in the payload table under a write pointer, after any stored before.

        Many processes may store under one pointer at once: each call reserves a range of sequence
        numbers with an atomic increment, so their keys never collide. With ``sequence`` the caller
        names the first one itself (deterministic keys: storing the same payloads again, as a retried
        Spark task does, overwrites instead of adding); it must be >= 2**40, above the counter's range.
        """
        pointer = validate_write_pointer(tx_write_pointer)
        batch = validate_payloads(payloads, self.max_batch_bytes, allow_empty=False)
        meta = self.topics.get(topic)
        if sequence is not None:
            if isinstance(sequence, bool) or not isinstance(sequence, int) or not sequence >= EXPLICIT_SEQUENCES:
                raise InvalidArgument(f"bad sequence {sequence!r}: explicit sequences start at {EXPLICIT_SEQUENCES}")
            if sequence + len(batch) > 2**64:
                raise InvalidArgument("sequence range past 2**64")
            first = sequence
        else:
            counter = pointer_prefix(topic, meta.generation, pointer)
            last = self.hbase.run(
                f"reserve payload sequence in {topic}",
                lambda c: c.table(self.tables.payloads).counter_inc(counter, COUNTER_COLUMN, len(batch)),
                idempotent=False,
            )
            first = last - len(batch) + 1

        def put(conn) -> None:
            with conn.table(self.tables.payloads).batch() as b:
                for i, payload in enumerate(batch):
                    b.put(payload_key(topic, meta.generation, pointer, first + i), {PAYLOAD_COLUMN: payload})

        self.hbase.run(f"store payloads in {topic}", put)  # same keys, same values: safe to retry

    # -- rollback -----------------------------------------------------------------------------

    def rollback(self, topic: TopicId, detail: RollbackDetail) -> None:
        """Mark the rows of a transactional publish rolled back (write pointer +p → −p), by CAS."""
        if detail.topic != str(topic):
            raise InvalidArgument(f"the rollback handle belongs to topic {detail.topic}, not {topic}")
        self.topics.get(topic)  # TopicNotFound for a deleted topic
        pointer = detail.transaction_write_pointer
        for position in range(detail.start_position, detail.end_position + 1):
            key = message_key(topic, detail.generation, position)
            while True:
                data = self.hbase.run("read message row", lambda c, k=key: c.table(self.tables.messages).row(k))
                value = data.get(MESSAGE_COLUMN)
                if value is None:
                    break  # swept already: nothing left to hide
                row = BatchRow.decode(value)
                if row.tx_pointer == -pointer:
                    break  # rolled back already (a retry, or the sweeper marked it invalid)
                if row.tx_pointer != pointer:
                    raise InvalidArgument(
                        f"the rollback handle does not match the message at position {position} of {topic}"
                    )
                if self._compare_and_set(key, value, with_tx_pointer(value, -pointer)):
                    break

    def _compare_and_set(self, key: bytes, old: bytes, new: bytes) -> bool:
        put = mutation(MESSAGE_COLUMN, new)
        table = self.tables.messages.encode()
        try:
            return self.hbase.run(
                "roll back message",
                lambda c: c.client.checkAndPut(table, key, MESSAGE_COLUMN, old, put, {}),
                idempotent=False,
            )
        except HBaseUnavailable:
            return False  # re-read and look again


def _ttl_ms(ttl: object) -> int | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
        raise InvalidArgument(f"bad per-message ttl {ttl!r}: expected seconds > 0")
    return max(1, int(ttl * 1000))
