"""Publishing: validate a batch, number it, and append it as one batch row of its topic generation in the
order the topic's metadata names (:mod:`tms_hbase.ordering`: the chain's conditional put at the tail, or the
sequencer's reservation and conditional put); store payloads under a write pointer; roll a row back.

Every row carries this writer's id and batch number, so a writer whose answer was lost recognises its own
batch instead of storing it twice (an interrupted publish is finished exactly once with its
:class:`~tms_hbase.ordering.appends.Resume`), and a writer never holds a lock, so a writer that dies blocks
nobody.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Sequence
from typing import NamedTuple

from tms_hbase import tracing
from tms_hbase.errors import HBaseUnavailable, InvalidArgument, PublishOutcomeUnknown
from tms_hbase.installation.metadata import MetadataCache
from tms_hbase.installation.settings import WriterSettings
from tms_hbase.model import checks, record
from tms_hbase.model.checks import validate_payloads
from tms_hbase.model.clock import now_ms
from tms_hbase.model.published import PublishResult
from tms_hbase.model.record import Record
from tms_hbase.model.retry import Retry
from tms_hbase.model.rows import (
    COUNTER_COLUMN,
    EXTRA_COLUMN,
    MESSAGE_COLUMN,
    PAYLOAD_COLUMN,
    decode_row,
    message_key,
    payload_key,
    pointer_prefix,
    with_tx_pointer,
)
from tms_hbase.model.topic import TopicId
from tms_hbase.model.wire import RollbackDetail
from tms_hbase.ordering.appends import OrderedAppends, Resume
from tms_hbase.ordering.chain_appends import ChainAppends
from tms_hbase.ordering.sequencer_appends import SequencerAppends
from tms_hbase.publish import rolled_back
from tms_hbase.publish.stored import stored_sizes
from tms_hbase.runtime import green
from tms_hbase.storage.hbase import Table
from tms_hbase.tx.pointers import MAX_LIFETIME_SECONDS, check_tx_lifetime

# Sequences a caller names itself (``store(..., sequence=)``) start here, far above what the counter hands out.
EXPLICIT_SEQUENCES = 2**40


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
    ``payloads`` tables; ``retry`` decides how often an append whose answer was lost is re-checked.
    ``chain`` and ``sequencer`` are the two orderings' appends (:mod:`tms_hbase.ordering`)."""

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
        self._lock = green.no_wait_lock()
        self.chain = ChainAppends(self)  # the two orderings' appends (after the attributes they use)
        self.sequencer = SequencerAppends(self)

    def close(self) -> None:
        """Release the offsets reserved ahead for sequencer generations (what is left of the blocks)."""
        self.sequencer.close()

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
        ordering: OrderedAppends = self.sequencer if sequenced else self.chain
        position, stored = ordering.append(topic, generation, batch, pointer, ttl_ms, batch_no, resume)
        detail = None if pointer is None else RollbackDetail(str(topic), pointer, generation, position, position)
        # found where the interrupted attempt aimed: this publish's part of that row (a new row is elsewhere)
        first_index = resume.first_index if resume is not None and position == resume.position else 0
        result = PublishResult(topic, generation, position, len(batch), first_index, rollback=detail)
        return Written(result, stored, batch.message_bytes)

    def own_count(
        self, topic: TopicId, generation: int, payloads: tuple[bytes | Record, ...], tx_pointer: int | None
    ) -> tuple[int, int]:
        """(messages, bytes) this batch adds to the totals (a message's bytes: :func:`.record.counted_size`).
        A pointer row counts the payloads stored under its pointer and their bytes (one key-only scan:
        :mod:`.stored`)."""
        if payloads or tx_pointer is None:
            return len(payloads), record.message_bytes(payloads)
        stored = stored_sizes(self.payloads, topic, generation, tx_pointer)
        return len(stored), sum(size for _, size in stored)

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
