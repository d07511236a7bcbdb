"""Publishing: append one batch row per publish at the next dense position of its topic generation.

The protocol (docs/ordering.md has the argument for why it holds):

* a batch is one cell, written with checkAndPut-if-absent at ``tail + 1``; it appears whole or not at all;
* the loser of a race reads the row that beat it (learning its publish time) and tries the next position;
* publish time is ``max(now, predecessor's publish time)``, so times never decrease along positions
  (except after a row dated beyond the clock-skew bound, which is not followed: row_time.py);
* a remembered tail is written on only while younger than the installation's tail-cache time, which
  bounds the sweeper's grace from below (installation.py, docs/guarantees.md);
* every row carries this writer's id and batch number: when the answer to a checkAndPut is lost, the
  writer reads that position back and recognises its own batch instead of storing it twice;
* a writer never holds a lock, so a writer that dies blocks nobody;
* every row carries the generation's running totals (messages, bytes), its predecessor's plus its own,
  so lag and topic size are subtractions (the predecessor is read anyway: the tail or the row that won).

That is the *chain* a generation uses unless its topic says ``ordering=sequencer``. A sequencer generation
(``sequencer.py``) reserves offsets with one atomic increment and writes the batch at its first offset
with checkAndPut-if-absent within the window W; the threads of one writer publishing to one topic at
once share one increment, and a busy writer reserves a block of offsets ahead with one increment and carves
its next publishes off it (``reservations.py``).
The row key is the first offset, so the running totals
are the key itself.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from tms_hbase import tracing
from tms_hbase.errors import HBaseUnavailable, InvalidArgument, PublishOutcomeUnknown, TopicFull
from tms_hbase.installation.metadata import MetadataCache
from tms_hbase.installation.settings import WriterSettings
from tms_hbase.model import checks, record
from tms_hbase.model.checks import validate_payloads
from tms_hbase.model.clock import now_ms
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.published import PublishResult
from tms_hbase.model.record import Record
from tms_hbase.model.retry import Retry
from tms_hbase.model.row_time import bounded_publish_time
from tms_hbase.model.rows import (
    COUNTER_COLUMN,
    EXTRA_COLUMN,
    MAX_POSITION,
    MESSAGE_COLUMN,
    PAYLOAD_COLUMN,
    BatchRow,
    RowHeader,
    Totals,
    decode_row,
    generation_prefix,
    message_key,
    payload_key,
    peek_row,
    pointer_prefix,
    position_of,
    with_tx_pointer,
)
from tms_hbase.model.topic import TopicId
from tms_hbase.model.wire import RollbackDetail
from tms_hbase.publish import rolled_back, sequencer
from tms_hbase.publish.reservations import Reservations, Ticket
from tms_hbase.publish.stored import stored_sizes
from tms_hbase.runtime import green
from tms_hbase.storage.hbase import Table
from tms_hbase.tx.pointers import MAX_LIFETIME_SECONDS, check_tx_lifetime

log = logging.getLogger(__name__)

_MAX_TIME_MS = 2**63 - 1  # expiry times are stored as signed 64-bit milliseconds
# Sequences a caller names itself (``store(..., sequence=)``) start here, far above what the counter hands out.
EXPLICIT_SEQUENCES = 2**40
# After this many lost races in a row, jump to the real tail instead of walking forward.
_WALK_LIMIT = 4


@dataclass(frozen=True)
class Resume:
    """Where an interrupted publish may have landed: re-check from ``position`` for this batch.

    ``first_index`` > 0 or ``shared``: the batch row was several publishes put together (the asyncio
    client's coalesced publishes, sequencer generations only) and this publish's messages are its
    messages from ``first_index`` on. Resumed, the row is looked for as usual; found, the result names
    this publish's part of it; not found, the offset is settled first (the row can never land later) and
    only this publish's own payloads are written, so each publish of the group is stored exactly once.
    """

    topic: TopicId
    generation: int
    position: int
    batch_no: int
    span: int = 1  # offsets reserved for the batch (sequencer generations): a settled attempt leaves no hole
    first_index: int = 0
    shared: bool = False

    def part(self, first_index: int) -> Resume:
        """The resume of the publish whose messages start at ``first_index`` of this (shared) batch row."""
        return replace(self, first_index=first_index, shared=True)


@dataclass
class _Tail:
    generation: int
    position: int  # last position known to exist (0: the generation is empty)
    publish_time: int  # its publish time
    seen_at: float  # time.monotonic() before which no row above ``position`` existed
    totals: Totals | None = None  # its running totals (None: a row from before totals existed)


def validate_write_pointer(pointer: object) -> int:
    if isinstance(pointer, bool) or not isinstance(pointer, int) or not 0 < pointer < 2**63:
        raise InvalidArgument(f"bad transaction write pointer {pointer!r}: expected a positive 64-bit integer")
    return pointer


class Written(NamedTuple):
    """What one publish wrote: the caller's :class:`PublishResult`, and the batch row's cell exactly as this
    publish stored it (None when a retry found an earlier attempt's cell there) for the doorbell rings to
    carry to consumers. Kept apart so that a result a caller holds does not keep the row's bytes alive.
    ``message_bytes``: the bytes of the batch's messages as the totals count them (for the client's metrics)."""

    result: PublishResult
    cell: bytes | None
    message_bytes: int


class MessageWriter:
    """Appends batches to topics for one writer identity (thread-safe), in the ``messages`` and
    ``payloads`` tables; ``retry`` decides how often an append whose answer was lost is re-checked."""

    def __init__(
        self,
        messages: Table,
        payloads: Table,
        topics: MetadataCache,
        settings: WriterSettings,
        *,
        writer_id: bytes | None = None,
        max_batch_bytes: int = checks.DEFAULT_MAX_BATCH_BYTES,
        retry: Retry | None = None,
        tx_max_lifetime: float = MAX_LIFETIME_SECONDS,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.messages = messages
        self.clock = clock  # the time publishes are dated with (hbase_clock.PublishClock in a client)
        self.payloads = payloads
        self.retry = retry or Retry()
        self.tx_max_lifetime = tx_max_lifetime  # older write pointers are refused
        self.topics = topics
        self.settings = settings  # the installation's tail-cache time, re-read every second
        self.writer_id = writer_id or uuid.uuid4().bytes
        self.max_batch_bytes = max_batch_bytes
        self._batch_numbers = itertools.count(1)
        self._tails: dict[TopicId, _Tail] = {}
        self._reservations = Reservations(
            messages, self.writer_id, lambda: sequencer.window(self.settings.tail_cache_seconds()), clock
        )
        self._lock = green.no_wait_lock()
        self.future_predecessors = 0  # rows not followed for being dated too far ahead (row_time.py)

    def close(self) -> None:
        """Release the offsets reserved ahead for sequencer generations (what is left of the blocks)."""
        self._reservations.close()

    def _live_pointer(self, pointer: object) -> int:
        """A valid write pointer whose transaction is younger than the max lifetime, else InvalidArgument."""
        pointer = validate_write_pointer(pointer)
        check_tx_lifetime(pointer, self.tx_max_lifetime, now_ms())
        return pointer

    # -- publish ------------------------------------------------------------------------------

    def publish(
        self,
        topic: TopicId,
        payloads: Sequence[bytes | Record],
        tx_write_pointer: int | None = None,
        ttl: float | None = None,
        resume: Resume | None = None,
    ) -> Written:
        """Append one batch; returns where it is (and a transactional publish's rollback detail) with the
        batch row's cell as stored.

        ``resume`` (from a PublishOutcomeUnknown) retries an interrupted publish exactly once: an
        interrupted attempt can only have landed at the position it aimed at, so once the tail is read
        again, that position is checked for this writer's batch number (found: done), and otherwise
        the batch is appended after the tail.

        The write runs in an OpenTelemetry ``send`` span where tracing is configured (:mod:`tms_hbase.tracing`).
        """
        with tracing.sending(str(topic), payloads) as traced:
            return self._publish(topic, traced, tx_write_pointer, ttl, resume)

    def _publish(
        self,
        topic: TopicId,
        payloads: Sequence[bytes | Record],
        tx_write_pointer: int | None,
        ttl: float | None,
        resume: Resume | None,
    ) -> Written:
        pointer = None if tx_write_pointer is None else self._live_pointer(tx_write_pointer)
        batch = validate_payloads(payloads, self.max_batch_bytes, allow_empty=pointer is not None)
        ttl_ms = None if ttl is None else _ttl_ms(ttl)
        meta = self.topics.get(topic)
        meta.check_tx_mode(transactional=pointer is not None)
        if ttl_ms is not None and ttl_ms > meta.ttl * 1000:
            raise InvalidArgument(f"per-message ttl {ttl}s is longer than the topic's ttl of {meta.ttl}s")
        generation, sequenced = meta.generation, meta.sequencer  # (each parses the topic's properties)
        if resume is not None and (resume.topic != topic or resume.generation != generation):
            resume = None  # the topic was re-created since: the interrupted batch is gone with it
        if resume is not None and resume.shared and not sequenced:
            raise InvalidArgument("a shared batch row's resume is for a sequencer generation")
        if resume is None:
            with self._lock:
                batch_no = next(self._batch_numbers)
        else:
            batch_no = resume.batch_no
        if sequenced:
            position, stored = self._sequenced(topic, generation, batch, pointer, ttl_ms, batch_no, resume)
        else:
            position, stored = self._append(topic, generation, batch, pointer, ttl_ms, batch_no, resume)
        detail = None if pointer is None else RollbackDetail(str(topic), pointer, generation, position, position)
        # found where the interrupted attempt aimed: this publish's part of that row (a new row is elsewhere)
        first_index = resume.first_index if resume is not None and position == resume.position else 0
        result = PublishResult(topic, generation, position, len(batch), first_index, rollback=detail)
        return Written(result, stored, batch.message_bytes)

    def _append(
        self,
        topic: TopicId,
        generation: int,
        payloads: tuple[bytes | Record, ...],
        tx_pointer: int | None,
        ttl_ms: int | None,
        batch_no: int,
        resume: Resume | None = None,
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
        own = self._own_count(topic, generation, payloads, tx_pointer)
        losses = link_failures = 0
        while True:
            try:
                trust = self.settings.tail_cache_seconds()
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
                    raise self._unknown(exc, Resume(topic, generation, position, batch_no)) from exc
                raise
            attempt = time.monotonic()  # rows above a position we win are younger than this
            now = self.clock()
            publish_time, ignored = bounded_publish_time(now, predecessor_time, trust * 1000)
            if ignored:
                self._future_predecessor(topic, position, predecessor_time, now, trust)
            plain, extras = record.split(payloads)
            row = BatchRow(
                publish_time=publish_time,
                writer_id=self.writer_id,
                batch_no=batch_no,
                payloads=plain,
                extras=extras,
                tx_pointer=tx_pointer,
                expires_at=None if ttl_ms is None else min(now + ttl_ms, _MAX_TIME_MS),
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
                won = self.messages.put_if_absent(key, MESSAGE_COLUMN, cell)
            except HBaseUnavailable as exc:
                # The put may have landed. Retry the same position: if it did land, that retry loses
                # and the read below recognises our own batch.
                link_failures += 1
                if not self.retry.pause(exc, link_failures, what=f"publish to {topic}"):
                    raise self._unknown(exc, Resume(topic, generation, position, batch_no)) from exc
                log.info("publish to %s: answer lost at position %d, checking", topic, position)
                won, pending = False, True
            if won:
                self._remember(topic, _Tail(generation, position, row.publish_time, attempt, row.totals))
                return position, cell
            try:
                existing = self._read_row(key)
            except HBaseUnavailable as exc:
                raise self._unknown(exc, Resume(topic, generation, position, batch_no)) from exc
            if existing is None:
                continue  # the link failed before the put landed: try the same position again
            if existing.writer_id == self.writer_id and existing.batch_no == batch_no:
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

    # -- sequencer generations -------------------------------------------------------------------

    def _sequenced(
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

        Refused (a reader filled the offset because this writer was slow) or too late: reserve again.
        A lost answer is resolved by reading the offset back (this batch there: done). ``resume``: the
        offset an interrupted attempt aimed at is settled first, by reading it and, if it is empty,
        filling it, so the attempt can never land later.
        """
        if resume is not None:
            # dated now: a marker dated earlier than the rows before it would mislead a time seek's search
            try:
                found = self._settle(topic, generation, resume.position, batch_no, self.clock(), resume.span)
            except PublishOutcomeUnknown as exc:
                exc.resume = resume  # still unsettled: resumed again, it is this very check (and part)
                raise
            if found:
                return resume.position, None
        # a pointer row records what is stored under its pointer now (the scan that counts it tells its bytes too)
        own = None if payloads or tx_pointer is None else Totals(*self._own_count(topic, generation, (), tx_pointer))
        span = max(1, len(payloads) if own is None else own.messages)
        failures = 0
        while True:
            ticket = Ticket(span)
            try:
                self._reservations.take(topic, generation, ticket)
            except HBaseUnavailable as exc:  # nothing written; a reservation made is a hole readers fill
                failures += 1
                if not self.retry.pause(exc, failures, what=f"publish to {topic}"):
                    raise
                continue
            try:
                stored = self._write_at(topic, generation, ticket, payloads, tx_pointer, ttl_ms, batch_no, own)
            finally:
                self._reservations.published(ticket)
            if stored is not None:
                return ticket.first, stored
            CLIENT_METRICS.races_lost.inc()
            failures += 1  # too slow for the window (or a reader filled the offset): as if HBase were slow
            slow = HBaseUnavailable(f"publish to {topic}: {failures} reservations in a row filled before the write")
            if not self.retry.pause(slow, failures, what=f"publish to {topic}"):
                raise slow

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
            writer_id=self.writer_id,
            batch_no=batch_no,
            payloads=plain,
            extras=extras,
            tx_pointer=tx_pointer,
            expires_at=None if ttl_ms is None else min(ticket.publish_time + ttl_ms, _MAX_TIME_MS),
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
            limit = sequencer.window(self.settings.tail_cache_seconds())
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
                if self.messages.put_if_absent(key, MESSAGE_COLUMN, cell):
                    return cell
            except HBaseUnavailable as exc:
                link_failures += 1
                if not self.retry.pause(exc, link_failures, what=f"publish to {topic}"):
                    raise self._unknown(
                        exc, Resume(topic, generation, ticket.first, row.batch_no, ticket.span)
                    ) from exc
                log.info("publish to %s: answer lost at offset %d, checking", topic, ticket.first)
            try:
                found = sequencer.read(self.messages, topic, generation, ticket.first)
            except HBaseUnavailable as exc:
                raise self._unknown(exc, Resume(topic, generation, ticket.first, row.batch_no, ticket.span)) from exc
            if found is not None:
                return cell if self._is_own(found, row.batch_no) else None
            # empty after a lost answer: the put did not land; put again while within W

    def _settle(
        self, topic: TopicId, generation: int, position: int, batch_no: int, publish_time: int, span: int = 1
    ) -> bool:
        """Make sure an attempt of batch ``batch_no`` at ``position`` can never land later: fill the offset
        with this writer's skip marker over ``span`` unless something is there. True if the batch is there."""
        try:
            found = sequencer.fill(self.messages, topic, generation, position, span, publish_time, self.writer_id)
        except HBaseUnavailable as exc:
            raise self._unknown(exc, Resume(topic, generation, position, batch_no, span)) from exc
        return self._is_own(found, batch_no)

    def _is_own(self, found: RowHeader, batch_no: int) -> bool:
        return not found.skip and found.writer_id == self.writer_id and found.batch_no == batch_no

    def _is_ours(self, topic: TopicId, generation: int, position: int, batch_no: int) -> bool:
        """Whether the row at ``position`` is this writer's batch ``batch_no`` (an earlier attempt landed)."""
        found = self._read_row(message_key(topic, generation, position))
        return found is not None and found.writer_id == self.writer_id and found.batch_no == batch_no

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

    @staticmethod
    def _unknown(exc: HBaseUnavailable, resume: Resume) -> PublishOutcomeUnknown:
        unknown = PublishOutcomeUnknown(
            f"{exc} (the batch may or may not be stored at position {resume.position} of {resume.topic}; "
            "pass this error as resume= to finish the publish exactly once)",
            resume,
        )
        unknown.timed_out = exc.timed_out
        return unknown

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
        last = self.messages.last_row(generation_prefix(topic, generation))
        if last is None:
            return _Tail(generation, 0, 0, seen_at, Totals(0, 0))
        key, data = last
        head = peek_row(key, data.get(MESSAGE_COLUMN))
        return _Tail(generation, position_of(key), head.publish_time, seen_at, head.totals)

    def _own_count(
        self, topic: TopicId, generation: int, payloads: tuple[bytes | Record, ...], tx_pointer: int | None
    ) -> tuple[int, int]:
        """(messages, bytes) this batch adds to the totals (a message's bytes: :func:`.record.counted_size`).
        A pointer row counts the payloads stored under its pointer and their bytes (one key-only scan:
        :mod:`.stored`)."""
        if payloads or tx_pointer is None:
            return len(payloads), record.message_bytes(payloads)
        stored = stored_sizes(self.payloads, topic, generation, tx_pointer)
        return len(stored), sum(size for _, size in stored)

    def _read_row(self, key: bytes) -> RowHeader | None:
        value = self.messages.get_cell(key, MESSAGE_COLUMN)
        return None if value is None else peek_row(key, value)

    # -- store --------------------------------------------------------------------------------

    def store(
        self, topic: TopicId, payloads: Sequence[bytes | Record], tx_write_pointer: int, sequence: int | None = None
    ) -> None:
        """Store payloads in the payload table under a write pointer, after any stored before.

        Many processes may store under one pointer at once: each call reserves a range of sequence
        numbers with an atomic increment, so their keys never collide. With ``sequence`` the caller
        names the first one itself (deterministic keys: storing the same payloads again, as a retried
        Spark task does, overwrites instead of adding); it must be >= 2**40, above the counter's range.
        """
        with tracing.sending(str(topic), payloads) as traced:
            self._store(topic, traced, tx_write_pointer, sequence)

    def _store(
        self, topic: TopicId, payloads: Sequence[bytes | Record], tx_write_pointer: int, sequence: int | None
    ) -> None:
        pointer = self._live_pointer(tx_write_pointer)
        batch = validate_payloads(payloads, self.max_batch_bytes, allow_empty=False)
        meta = self.topics.get(topic)
        meta.check_tx_mode(transactional=True)
        if sequence is not None:
            if isinstance(sequence, bool) or not isinstance(sequence, int) or not sequence >= EXPLICIT_SEQUENCES:
                raise InvalidArgument(f"bad sequence {sequence!r}: explicit sequences start at {EXPLICIT_SEQUENCES}")
            if sequence + len(batch) > 2**64:
                raise InvalidArgument("sequence range past 2**64")
            first = sequence
        else:
            counter = pointer_prefix(topic, meta.generation, pointer)
            first = self.payloads.increment(counter, COUNTER_COLUMN, len(batch)) - len(batch) + 1
        rows = (
            (payload_key(topic, meta.generation, pointer, first + i), _stored_cells(message))
            for i, message in enumerate(batch)
        )
        self.payloads.put_many(rows)  # same keys, same values: safe to retry

    # -- rollback -----------------------------------------------------------------------------

    def rollback(self, topic: TopicId, detail: RollbackDetail) -> None:
        """Mark the row of a transactional publish rolled back (write pointer +p → −p), by CAS.

        The detail names one row (RollbackDetail checks that when it is made), so this is one read, a put
        in the rollback index (:mod:`.rolled_back`) and one compare-and-set, plus a re-read per lost race.
        """
        if detail.topic != str(topic):
            raise InvalidArgument(f"the rollback handle belongs to topic {detail.topic}, not {topic}")
        self.topics.get(topic)  # TopicNotFound for a deleted topic
        pointer, position = detail.transaction_write_pointer, detail.start_position
        key = message_key(topic, detail.generation, position)
        while True:
            value = self.messages.get_cell(key, MESSAGE_COLUMN)
            if value is None:
                return  # swept already: nothing left to hide
            row = decode_row(key, value)
            if row.tx_pointer not in (pointer, -pointer):
                raise InvalidArgument(
                    f"the rollback handle does not match the message at position {position} of {topic}"
                )
            rolled_back.index(self.messages, topic, detail.generation, position)  # before the flip: see its doc
            if row.tx_pointer == -pointer:
                return  # rolled back already (a retry, or the sweeper marked it invalid)
            if self._compare_and_set(key, value, with_tx_pointer(value, -pointer)):
                return

    def _compare_and_set(self, key: bytes, old: bytes, new: bytes) -> bool:
        try:
            return self.messages.compare_and_set(key, MESSAGE_COLUMN, old, new)
        except HBaseUnavailable:
            return False  # re-read and look again


def unknown_part(unknown: PublishOutcomeUnknown, first_index: int) -> PublishOutcomeUnknown:
    """The outcome of the publish whose messages start at ``first_index`` of a batch row several publishes
    shared, when that row's outcome is unknown: its own resume (:meth:`Resume.part`), the same message."""
    resume = unknown.resume
    if not isinstance(resume, Resume):
        raise TypeError(f"not a writer's resume: {resume!r}")
    part = PublishOutcomeUnknown(str(unknown), resume.part(first_index))
    part.timed_out = unknown.timed_out
    return part


def _ttl_ms(ttl: object) -> int | None:
    seconds = checks.ttl_seconds(ttl)
    return None if seconds is None else max(1, int(seconds * 1000))


def _stored_cells(message: bytes | Record) -> dict[bytes, bytes]:
    """The payload-table cells of one stored message: its payload, and its key and headers if it has any."""
    if type(message) is Record:
        return {PAYLOAD_COLUMN: message.payload, EXTRA_COLUMN: record.encode_all((message.extra,))}
    return {PAYLOAD_COLUMN: message}  # type: ignore[dict-item]
