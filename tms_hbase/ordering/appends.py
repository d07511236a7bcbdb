"""What both orderings' appends share: where an interrupted publish may have landed (:class:`Resume`), the
error that carries it, and what an append uses of its writer (:class:`Writer`, the :class:`.MessageWriter`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from tms_hbase.errors import HBaseUnavailable, PublishOutcomeUnknown
from tms_hbase.installation.settings import WriterSettings
from tms_hbase.model.record import Record
from tms_hbase.model.retry import Retry
from tms_hbase.model.topic import TopicId
from tms_hbase.storage.hbase import Table

MAX_TIME_MS = 2**63 - 1  # expiry times are stored as signed 64-bit milliseconds


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


def unknown(exc: HBaseUnavailable, resume: Resume) -> PublishOutcomeUnknown:
    """The error of a publish whose outcome a lost answer left unknown: it carries ``resume``."""
    error = PublishOutcomeUnknown(
        f"{exc} (the batch may or may not be stored at position {resume.position} of {resume.topic}; "
        "pass this error as resume= to finish the publish exactly once)",
        resume,
    )
    error.timed_out = exc.timed_out
    return error


class Writer(Protocol):
    """What an ordering's appends use of the writer they append for: its ``messages`` table, identity,
    retry policy, settings (the installation's tail-cache time), the clock publishes are dated with, and
    what a batch adds to its generation's totals."""

    messages: Table
    writer_id: bytes
    retry: Retry
    settings: WriterSettings
    clock: Callable[[], int]

    def own_count(
        self, topic: TopicId, generation: int, payloads: tuple[bytes | Record, ...], tx_pointer: int | None
    ) -> tuple[int, int]:
        """(messages, bytes) the batch adds to its generation's totals."""
        ...


class OrderedAppends(Protocol):
    """How one ordering gives a batch row its position and writes it there (:class:`.ChainAppends`,
    :class:`.SequencerAppends`)."""

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
        """Write the batch row; returns its position and the cell this call stored there (None when an
        earlier attempt's cell is what landed). PublishOutcomeUnknown (with a :class:`Resume`) when a lost
        answer leaves that unknown."""
        ...
