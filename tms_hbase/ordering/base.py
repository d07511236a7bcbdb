"""The interface of an ordering's reads: what the reader asks of the chain or the sequencer, whichever
its topic's metadata names for the generation read (the interface of appends: :mod:`.appends`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from tms_hbase.model.rows import BatchRow
from tms_hbase.model.topic import TopicId


class OrderedReads(Protocol):
    """Seeks and scans of one ordering's generations (:class:`.ChainReads`, :class:`.SequencerReads`)."""

    def seek(self, topic: TopicId, generation: int, time_ms: int, *, exact: bool = True) -> int:
        """The first position of a row holding messages dated >= ``time_ms`` (past the last row if none);
        ``exact=False`` allows a lower bound where the exact answer costs more (the sequencer's)."""
        ...

    def rows(
        self, topic: TopicId, generation: int, start: int, first: int, last: int | None, views: bool
    ) -> Iterator[tuple[int, BatchRow]]:
        """The batch rows from ``start`` in order (skip markers left out), the first chunk of ``first`` rows,
        up to the tail as this poll finds it or, with ``last``, up to ``last``; swept gaps are stepped over
        and holes waited on as the ordering requires. ``views``: payloads as views of their cells."""
        ...
