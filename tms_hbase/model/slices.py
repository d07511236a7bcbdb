"""What the Spark slice reads answer (``MessagingClient.slices``): a :class:`PositionRange` of batch rows to
split among readers, and a :class:`BatchInfo` per row (:mod:`tms_hbase.fetch.slices` reads them). No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PositionRange:
    """Batch-row positions ``first``..``last`` (inclusive) of one topic generation; empty when last < first."""

    generation: int
    first: int
    last: int

    def __len__(self) -> int:
        return max(0, self.last - self.first + 1)


@dataclass(frozen=True)
class BatchInfo:
    """What one batch row says about itself, its payloads unread.

    ``tx_write_pointer`` is None for a non-transactional row and negative once rolled back or marked
    invalid; ``messages`` is the number of inline payloads, or None for a pointer row (its messages
    are payload-table rows: see :func:`tms_hbase.fetch.slices.stored_sequences`).
    """

    position: int
    publish_time: int
    tx_write_pointer: int | None
    messages: int | None
