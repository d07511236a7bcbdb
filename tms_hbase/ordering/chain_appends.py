"""Appending to a chain generation: one batch row per publish at the next dense position (docs/ordering.md).

* a batch is one cell, written with checkAndPut-if-absent at ``tail + 1``; it appears whole or not at all;
* the loser of a race reads the row that beat it (learning its publish time) and tries the next position;
* publish time is ``max(now, predecessor's publish time)``, so times never decrease along positions
  (except after a row dated beyond the clock-skew bound, which is not followed: row_time.py);
* a remembered tail is written on only while younger than the installation's tail-cache time, which
  bounds the sweeper's grace from below (installation.py, docs/guarantees.md);
* every row carries the writer's id and batch number: when the answer to a checkAndPut is lost, the
  writer reads that position back and recognises its own batch instead of storing it twice;
* every row carries the generation's running totals (messages, bytes), its predecessor's plus its own,
  so lag and topic size are subtractions (the predecessor is read anyway: the tail or the row that won).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from tms_hbase.errors import HBaseUnavailable, TopicFull
from tms_hbase.model import record
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.record import Record
from tms_hbase.model.row_time import bounded_publish_time
from tms_hbase.model.rows import (
    MAX_POSITION,
    MESSAGE_COLUMN,
    BatchRow,
    RowHeader,
    Totals,
    generation_prefix,
    message_key,
    peek_row,
    position_of,
)
from tms_hbase.model.topic import TopicId
from tms_hbase.ordering.appends import MAX_TIME_MS, Resume, Writer, unknown
from tms_hbase.runtime import green

log = logging.getLogger(__name__)

# After this many lost races in a row, jump to the real tail instead of walking forward.
_WALK_LIMIT = 4


@dataclass
class _Tail:
    generation: int
    position: int  # last position known to exist (0: the generation is empty)
    publish_time: int  # its publish time
    seen_at: float  # time.monotonic() before which no row above ``position`` existed
    totals: Totals | None = None  # its running totals (None: a row from before totals existed)


class ChainAppends:
    """Appends of one writer to chain generations (thread-safe): the tails it remembers, and how many rows
    it did not follow for being dated too far ahead (row_time.py)."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self._tails: dict[TopicId, _Tail] = {}
        self._lock = green.no_wait_lock()
        self.future_predecessors = 0  # rows not followed for being dated too far ahead (row_time.py)

    def append(
        self,
        topic: TopicId,
        generation: int,
        payloads: tuple[bytes | Record, ...],
        tx_pointer: int | None,
        ttl_ms: int | None,
        batch_no: int,
        resume: Resume | None,
    ) -> tuple[int, bytes | None]:
        """Put the batch at the first free position after the tail; returns that position and the cell this
        call stored there (None when an earlier attempt's cell is what landed).

        ``anchor`` (monotonic) is a time before which no row at ``position`` or above existed: every
        such row is younger, so the sweeper cannot have freed its position while the anchor is younger
        than the installation's tail-cache time (docs/guarantees.md). An older anchor is never written
        on: the tail is read again first. ``pending`` says an earlier attempt of this very batch may
        sit at ``position`` (a lost answer, or ``resume``).
        """
        if resume is None:
            tail = self._tail(topic, generation)
            position, predecessor_time, anchor, pending = tail.position + 1, tail.publish_time, tail.seen_at, False
            predecessor_totals = tail.totals
        else:  # what the interrupted call knew is of unknown age: look again before writing
            position, predecessor_time, anchor, pending = resume.position, 0, -math.inf, True
            predecessor_totals = None
        own = self.writer.own_count(topic, generation, payloads, tx_pointer)
        losses = link_failures = 0
        while True:
            try:
                trust = self.writer.settings.tail_cache_seconds()
                if time.monotonic() - anchor >= trust:
                    tail = self._read_tail(topic, generation)
                    if pending and tail.position >= position and self._is_ours(topic, generation, position, batch_no):
                        self._remember(topic, tail)
                        return position, None
                    pending = pending and tail.position + 1 == position
                    position, predecessor_time, anchor = tail.position + 1, tail.publish_time, tail.seen_at
                    predecessor_totals = tail.totals
            except HBaseUnavailable as exc:
                if pending:
                    raise unknown(exc, Resume(topic, generation, position, batch_no)) from exc
                raise
            attempt = time.monotonic()  # rows above a position we win are younger than this
            now = self.writer.clock()
            publish_time, ignored = bounded_publish_time(now, predecessor_time, trust * 1000)
            if ignored:
                self._future_predecessor(topic, position, predecessor_time, now, trust)
            plain, extras = record.split(payloads)
            row = BatchRow(
                publish_time=publish_time,
                writer_id=self.writer.writer_id,
                batch_no=batch_no,
                payloads=plain,
                extras=extras,
                tx_pointer=tx_pointer,
                expires_at=None if ttl_ms is None else min(now + ttl_ms, MAX_TIME_MS),
                pointer=tx_pointer is not None and not payloads,
                # after a row without totals (an older writer's), counting starts again from this row
                totals=(predecessor_totals or Totals(0, 0)).plus(*own),
            )
            if position > MAX_POSITION:
                raise TopicFull(
                    f"topic {topic} is full: generation {generation} has a row at its last position "
                    f"({MAX_POSITION}); delete and re-create the topic to start a new generation"
                )
            key = message_key(topic, generation, position)
            cell = row.encode()
            try:
                won = self.writer.messages.put_if_absent(key, MESSAGE_COLUMN, cell)
            except HBaseUnavailable as exc:
                # The put may have landed. Retry the same position: if it did land, that retry loses
                # and the read below recognises our own batch.
                link_failures += 1
                if not self.writer.retry.pause(exc, link_failures, what=f"publish to {topic}"):
                    raise unknown(exc, Resume(topic, generation, position, batch_no)) from exc
                log.info("publish to %s: answer lost at position %d, checking", topic, position)
                won, pending = False, True
            if won:
                self._remember(topic, _Tail(generation, position, row.publish_time, attempt, row.totals))
                return position, cell
            try:
                existing = self._read_row(key)
            except HBaseUnavailable as exc:
                raise unknown(exc, Resume(topic, generation, position, batch_no)) from exc
            if existing is None:
                continue  # the link failed before the put landed: try the same position again
            if existing.writer_id == self.writer.writer_id and existing.batch_no == batch_no:
                self._remember(topic, _Tail(generation, position, existing.publish_time, anchor, existing.totals))
                return position, None  # our own earlier attempt landed
            losses += 1
            CLIENT_METRICS.races_lost.inc()
            pending = False  # another batch holds the position our earlier attempt aimed at
            if losses % _WALK_LIMIT == 0:
                tail = self._read_tail(topic, generation)
                position, predecessor_time, anchor = tail.position + 1, tail.publish_time, tail.seen_at
                predecessor_totals = tail.totals
            else:
                position, predecessor_time, predecessor_totals = position + 1, existing.publish_time, existing.totals

    def _is_ours(self, topic: TopicId, generation: int, position: int, batch_no: int) -> bool:
        """Whether the row at ``position`` is this writer's batch ``batch_no`` (an earlier attempt landed)."""
        found = self._read_row(message_key(topic, generation, position))
        return found is not None and found.writer_id == self.writer.writer_id and found.batch_no == batch_no

    def _future_predecessor(self, topic: TopicId, position: int, predecessor: int, now: int, skew: int) -> None:
        with self._lock:
            self.future_predecessors += 1
        log.warning(
            "publish to %s at position %d: the row before it is dated %.1f s ahead of this writer's clock, "
            "more than the %d s clock-skew bound; not following it (publish time = now + %d s)",
            topic,
            position,
            (predecessor - now) / 1000,
            skew,
            skew,
        )

    def _tail(self, topic: TopicId, generation: int) -> _Tail:
        """The remembered tail of this generation (its age is checked before writing), else a fresh one."""
        with self._lock:
            tail = self._tails.get(topic)
        if tail is not None and tail.generation == generation:
            return tail
        return self._read_tail(topic, generation)

    def _remember(self, topic: TopicId, tail: _Tail) -> None:
        with self._lock:
            known = self._tails.get(topic)
            if known is None or known.generation != tail.generation or known.position <= tail.position:
                self._tails[topic] = tail

    def _read_tail(self, topic: TopicId, generation: int) -> _Tail:
        """The last row of the generation (the port's one-row reverse scan)."""
        seen_at = time.monotonic()
        last = self.writer.messages.last_row(generation_prefix(topic, generation))
        if last is None:
            return _Tail(generation, 0, 0, seen_at, Totals(0, 0))
        key, data = last
        head = peek_row(key, data.get(MESSAGE_COLUMN))
        return _Tail(generation, position_of(key), head.publish_time, seen_at, head.totals)

    def _read_row(self, key: bytes) -> RowHeader | None:
        value = self.writer.messages.get_cell(key, MESSAGE_COLUMN)
        return None if value is None else peek_row(key, value)
