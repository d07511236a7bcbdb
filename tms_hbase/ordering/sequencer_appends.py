"""Appending to a sequencer generation (docs/ordering.md, "The sequencer protocol"): offsets are reserved
with one atomic increment (shared by the threads of one writer, or carved off a block reserved ahead:
:mod:`.reservations`), and the batch is written at its first offset with checkAndPut-if-absent within the
window W. The row key is the first offset, so the running totals are the key itself.
"""

from __future__ import annotations

import logging
import time

from tms_hbase.errors import HBaseUnavailable, PublishOutcomeUnknown, TopicFull
from tms_hbase.model import record
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.record import Record
from tms_hbase.model.rows import MAX_POSITION, MESSAGE_COLUMN, BatchRow, RowHeader, Totals, message_key
from tms_hbase.model.topic import TopicId
from tms_hbase.ordering import sequencer
from tms_hbase.ordering.appends import MAX_TIME_MS, Resume, Writer, unknown
from tms_hbase.ordering.reservations import Reservations, Ticket
from tms_hbase.storage.connection import operation_deadline

log = logging.getLogger(__name__)


class SequencerAppends:
    """Appends of one writer to sequencer generations (thread-safe), with the offsets it reserves."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self.reservations = Reservations(
            writer.messages,
            writer.writer_id,
            lambda: sequencer.window(writer.settings.tail_cache_seconds()),
            writer.clock,
        )

    def close(self) -> None:
        """Release the offsets reserved ahead (what is left of the blocks)."""
        self.reservations.close()

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
        """Reserve offsets, write the batch at the first one if-absent within W; returns that offset and the
        cell stored there (None for a resumed batch found stored).

        Refused (a reader filled the offset because this writer was slow) or too late: reserve again
        (see :meth:`_race_again`).
        A lost answer is resolved by reading the offset back (this batch there: done). ``resume``: the
        offset an interrupted attempt aimed at is settled first, by reading it and, if it is empty,
        filling it, so the attempt can never land later.
        """
        if resume is not None:
            # dated now: a marker dated earlier than the rows before it would mislead a time seek's search
            try:
                found = self._settle(topic, generation, resume.position, batch_no, self.writer.clock(), resume.span)
            except PublishOutcomeUnknown as exc:
                exc.resume = resume  # still unsettled: resumed again, it is this very check (and part)
                raise
            if found:
                return resume.position, None
        # a pointer row records what is stored under its pointer now (the scan that counts it tells its bytes too)
        own = (
            None
            if payloads or tx_pointer is None
            else Totals(*self.writer.own_count(topic, generation, (), tx_pointer))
        )
        span = max(1, len(payloads) if own is None else own.messages)
        failures = races = 0
        while True:
            ticket = Ticket(span)
            try:
                self.reservations.take(topic, generation, ticket)
            except HBaseUnavailable as exc:  # nothing written; a reservation made is a hole readers fill
                failures += 1
                if not self.writer.retry.pause(exc, failures, what=f"publish to {topic}"):
                    raise
                continue
            try:
                stored = self._write_at(topic, generation, ticket, payloads, tx_pointer, ttl_ms, batch_no, own)
            finally:
                self.reservations.published(ticket)
            if stored is not None:
                return ticket.first, stored
            CLIENT_METRICS.races_lost.inc()
            races += 1
            self._race_again(topic, races)

    def _race_again(self, topic: TopicId, races: int) -> None:
        """After the ``races``-th attempt in a row that was too late for the window W, or whose offset a
        reader filled (this process was slower than W: starved or paused; HBase answered), return to
        reserve again at once while the running operation's deadline (the client's ``timeout_seconds``)
        leaves time, as Kafka's producer retries within ``delivery.timeout.ms``; once it has passed, raise
        HBaseUnavailable (``timed_out``). Each lost attempt is settled (its offset holds this writer's skip
        marker, or the batch itself), so the batch is stored once, after the writer's earlier publishes.
        The writer used outside a library operation (no deadline) retries as its retry policy says."""
        what = f"publish to {topic}"
        deadline = operation_deadline()
        if deadline is None:
            slow = HBaseUnavailable(f"{what}: {races} reservations in a row filled before the write")
            if not self.writer.retry.pause(slow, races, what=what):
                raise slow
        elif time.monotonic() >= deadline:
            limit = sequencer.window(self.writer.settings.tail_cache_seconds())
            late = HBaseUnavailable(
                f"{what}: timed out: {races} attempts in a row could not write within {limit:.2f} s of reserving "
                "their offsets (this process is too slow: overloaded or paused); nothing was stored"
            )
            late.timed_out = True
            raise late

    def _write_at(
        self,
        topic: TopicId,
        generation: int,
        ticket: Ticket,
        payloads: tuple[bytes | Record, ...],
        tx_pointer: int | None,
        ttl_ms: int | None,
        batch_no: int,
        own: Totals | None = None,
    ) -> bytes | None:
        """The batch row for the ticket's offsets, written there (see :meth:`_write_reserved`); ``own``: a
        pointer row's messages and bytes, kept in its totals field (flag 8) for its generation's byte totals."""
        if ticket.first + ticket.span - 1 > MAX_POSITION:
            raise TopicFull(
                f"topic {topic} is full: generation {generation} has handed out its last offset "
                f"({MAX_POSITION}); delete and re-create the topic to start a new generation"
            )
        plain, extras = record.split(payloads)
        row = BatchRow(
            publish_time=ticket.publish_time,
            writer_id=self.writer.writer_id,
            batch_no=batch_no,
            payloads=plain,
            extras=extras,
            tx_pointer=tx_pointer,
            expires_at=None if ttl_ms is None else min(ticket.publish_time + ttl_ms, MAX_TIME_MS),
            pointer=tx_pointer is not None and not payloads,
            totals=own,
            span=ticket.span,
        )
        return self._write_reserved(topic, generation, ticket, row)

    def _write_reserved(self, topic: TopicId, generation: int, ticket: Ticket, row: BatchRow) -> bytes | None:
        """Write ``row`` at the ticket's offset if-absent, only within W of the ticket's start; its cell once
        it is stored there, None if the offset was filled (or is now filled by this writer: too late)."""
        key = message_key(topic, generation, ticket.first)
        cell = row.encode()
        link_failures = 0
        while True:
            limit = sequencer.window(self.writer.settings.tail_cache_seconds())
            if time.monotonic() - ticket.started > limit:
                log.info(
                    "publish to %s: offset %d reserved more than %.2f s ago; reserving again",
                    topic,
                    ticket.first,
                    limit,
                )
                settled = self._settle(topic, generation, ticket.first, row.batch_no, row.publish_time, ticket.span)
                return cell if settled else None
            try:
                if self.writer.messages.put_if_absent(key, MESSAGE_COLUMN, cell):
                    return cell
            except HBaseUnavailable as exc:
                link_failures += 1
                if not self.writer.retry.pause(exc, link_failures, what=f"publish to {topic}"):
                    raise unknown(exc, Resume(topic, generation, ticket.first, row.batch_no, ticket.span)) from exc
                log.info("publish to %s: answer lost at offset %d, checking", topic, ticket.first)
            try:
                found = sequencer.read(self.writer.messages, topic, generation, ticket.first)
            except HBaseUnavailable as exc:
                raise unknown(exc, Resume(topic, generation, ticket.first, row.batch_no, ticket.span)) from exc
            if found is not None:
                return cell if self._is_own(found, row.batch_no) else None

    def _settle(
        self, topic: TopicId, generation: int, position: int, batch_no: int, publish_time: int, span: int = 1
    ) -> bool:
        """Make sure an attempt of batch ``batch_no`` at ``position`` can never land later: fill the offset
        with this writer's skip marker over ``span`` unless something is there. True if the batch is there."""
        try:
            found = sequencer.fill(
                self.writer.messages, topic, generation, position, span, publish_time, self.writer.writer_id
            )
        except HBaseUnavailable as exc:
            raise unknown(exc, Resume(topic, generation, position, batch_no, span)) from exc
        return self._is_own(found, batch_no)

    def _is_own(self, found: RowHeader, batch_no: int) -> bool:
        return not found.skip and found.writer_id == self.writer.writer_id and found.batch_no == batch_no
