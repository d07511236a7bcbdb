"""Reading a chain generation (docs/ordering.md): each batch row is put if-absent at the position after the tail, so
positions are dense and publish times non-decreasing along them.

Reading: a gap below a row that exists means either the sweeper removed those rows or the scan crossed a
region boundary while a writer added them; the gap is scanned again, and what is still missing then was
swept. A time seek is a search over positions, ending with one scan of one row that HBase filters.
"""

from __future__ import annotations

from collections.abc import Iterator

from tms_hbase.model.rows import (
    MAX_POSITION,
    BatchRow,
    decode_row,
    generation_prefix,
    message_key,
    past_last,
    position_of,
)
from tms_hbase.model.topic import TopicId
from tms_hbase.ordering.lookup import CHUNK_ROWS, RowLookup
from tms_hbase.ordering.pivots import Pivots

CHAIN_SCAN_ROWS = 16  # a chain seek's search stops this close and lets HBase filter the rest


class ChainReads:
    """Seeks and scans of chain generations, for one reader."""

    def __init__(self, lookup: RowLookup) -> None:
        self.lookup = lookup

    def seek(self, topic: TopicId, generation: int, time_ms: int, *, exact: bool = True) -> int:
        """The first position, in order, of a row holding messages dated >= ``time_ms`` (the next position
        past the last row if none): times are non-decreasing, so a search over positions (:class:`.Pivots`)
        that steps over swept gaps, a few reads, at most O(log n). Every answer is exact."""
        prefix = generation_prefix(topic, generation)
        first = self.lookup.first(prefix)
        if first is None:
            return 1
        if first[1].publish_time >= time_ms:
            return first[0]
        last = self.lookup.last(prefix)
        if last[1].publish_time < time_ms:
            return last[0] + 1
        lo, hi, bound = first[0], last[0], last[0]  # time(lo) < t <= time(hi); no row in [bound, hi)
        below, above = (lo, first[1].publish_time), (hi, last[1].publish_time)
        pivots = Pivots(lean_offsets=CHAIN_SCAN_ROWS // 2)
        while bound - lo > CHAIN_SCAN_ROWS:
            mid = pivots.next(lo + 1, bound - 1, below, above, time_ms)
            found = self.lookup.first_at_or_after(prefix, mid, bound)
            raised = found is not None and found[1].publish_time < time_ms
            if found is None:
                bound = mid  # nothing in [mid, bound)
            elif raised:
                lo = found[0]
                below = (lo, found[1].publish_time)
            else:
                hi = bound = found[0]
                above = (hi, found[1].publish_time)
            pivots.narrowed(lo + 1, bound - 1, raised_low=raised)
        # the last few rows: one scan of one row that HBase filters (times are non-decreasing, so the
        # first row it keeps is the answer)
        return self.lookup.first_dated(prefix, lo + 1, hi, time_ms)

    def rows(
        self, topic: TopicId, generation: int, start: int, first: int, last: int | None, views: bool
    ) -> Iterator[tuple[int, BatchRow]]:
        """Rows from ``start`` in position order, in chunks (the first of ``first`` rows: a fetch with a
        small limit reads no more); gaps are scanned again (see module doc). ``views``: payloads as views
        of the cells (:meth:`BatchRow.decode`). ``last`` is not needed: a chain has no hole to wait on, so
        the caller stops past it."""
        prefix = generation_prefix(topic, generation)
        end = past_last(prefix)
        expected = start
        size = first
        while expected <= MAX_POSITION:  # past the last position there is nothing to read
            chunk = self.lookup.scan(message_key(topic, generation, expected), end, size)
            for key, value in chunk:
                position = position_of(key)
                if position > expected:  # rows the scan may have raced past, or swept ones
                    yield from self._range(topic, generation, expected, key, views)
                yield position, decode_row(key, value, views=views)
                expected = position + 1
            if len(chunk) < size:
                return  # the tail as it was when this poll read it
            size = CHUNK_ROWS

    def _range(
        self, topic: TopicId, generation: int, start: int, stop: bytes, views: bool
    ) -> Iterator[tuple[int, BatchRow]]:
        """Every row from position ``start`` up to (not including) row key ``stop``."""
        while True:
            chunk = self.lookup.scan(message_key(topic, generation, start), stop, CHUNK_ROWS)
            for key, value in chunk:
                start = position_of(key) + 1
                yield start - 1, decode_row(key, value, views=views)
            if len(chunk) < CHUNK_ROWS:
                return
