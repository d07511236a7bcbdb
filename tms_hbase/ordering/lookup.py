"""Reading a generation's rows by position, for seeks and scans of both orderings: the first row, the row
at or before or after an offset, the first row dated at or after a time (filtered in HBase), the last row.

:class:`RowLookup` keeps the first batch each generation had (rows are written once and the sweeper
deletes only a prefix, so it still bounds what a seek asks of it): one per reader.
"""

from __future__ import annotations

from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.rows import (
    F_COUNTS,
    F_EXPIRY,
    F_POINTER,
    F_SKIP,
    F_SPAN,
    F_TX,
    MESSAGE_COLUMN,
    VERSION,
    RowHeader,
    past_last,
    peek_row,
    position_of,
)
from tms_hbase.storage.hbase import Table

CHUNK_ROWS = 64
_FLAGS = (F_TX, F_POINTER, F_EXPIRY, F_COUNTS, F_SKIP, F_SPAN)  # every flag a row may carry, one bit each


def dated_at_or_after(time_ms: int) -> bytes:
    """An HBase filter keeping the rows that hold messages (no skip marker) dated at or after ``time_ms``.

    A cell starts with the version byte, the flags byte and the publish time (8 bytes big-endian; times
    are >= 0, so byte order is time order). HBase compares values as unsigned bytes, so for each flags
    value without F_SKIP the cells of that kind dated >= ``time_ms`` are one byte range [version flags
    time, version flags+1). The filter is bytes: a regex cannot do it (HBase decodes values as UTF-8, so
    bytes >= 0x80 are lost) and a str would be sent UTF-8 encoded. A quote inside a quoted value doubles.
    """

    def value(raw: bytes) -> bytes:
        return b"'binary:" + raw.replace(b"'", b"''") + b"'"

    kinds = [
        b"(ValueFilter(>=, "
        + value(bytes([VERSION, flags]) + time_ms.to_bytes(8, "big"))
        + b") AND ValueFilter(<, "
        + value(bytes([VERSION, flags + 1]))
        + b"))"
        for flags in range(2 * max(_FLAGS))
        if not flags & F_SKIP
    ]
    return b"(" + b" OR ".join(kinds) + b")"


class RowLookup:
    """One-row reads of the ``messages`` table by position (each a get or a scan of one row)."""

    def __init__(self, messages: Table) -> None:
        self.messages = messages
        self._firsts: dict[bytes, tuple[int, RowHeader]] = {}  # a batch that was a generation's first row, by prefix

    def first_at_or_after(self, prefix: bytes, position: int, bound: int | None) -> tuple[int, RowHeader] | None:
        """The first row at ``position`` or after it (below ``bound``): a get, then a scan if swept."""
        key = prefix + position.to_bytes(8, "big")
        data = self.messages.get(key)
        if data:
            return position, peek_row(key, data.get(MESSAGE_COLUMN))
        return self.first_row(
            prefix, position, past_last(prefix) if bound is None else prefix + bound.to_bytes(8, "big")
        )

    def first(self, prefix: bytes) -> tuple[int, RowHeader] | None:
        """The generation's first row (None: it has none), or a batch that was its first: this reader keeps the
        first batch it reads. Rows are written once and the sweeper deletes only a prefix, so a batch that was
        first still bounds the dates of every row before it and still lies at or before every row dated later
        (in a sequencer generation, within D: a hole below it that a batch lands in later is dated within D of
        it too), which is all a seek asks of it. The first time: one get of offset 1, then one scan if it is
        empty."""
        known = self._firsts.get(prefix)
        if known is None:
            known = self.first_at_or_after(prefix, 1, None)
            if known is not None and not known[1].skip:
                self._firsts[prefix] = known
        return known

    def first_row(self, prefix: bytes, position: int, stop: bytes) -> tuple[int, RowHeader] | None:
        """The first row at ``position`` or after it, below row key ``stop``: one scan of one row."""
        rows = self.scan(prefix + position.to_bytes(8, "big"), stop, 1)
        return (position_of(rows[0][0]), peek_row(*rows[0])) if rows else None

    def first_dated(self, prefix: bytes, start: int, last: int, time_ms: int) -> int:
        """The position of the first row in [``start``, ``last``] holding messages dated >= ``time_ms`` (``last``
        if none is before it): one scan of one row that HBase filters."""
        if start >= last:
            return last
        found = self.messages.scan(
            prefix + start.to_bytes(8, "big"),
            prefix + last.to_bytes(8, "big"),
            limit=1,
            columns=[MESSAGE_COLUMN],
            filter=dated_at_or_after(time_ms),
        )
        return position_of(found[0][0]) if found else last

    def row_at_or_before(self, prefix: bytes, position: int, floor: int) -> tuple[int, RowHeader] | None:
        """The last row at ``position`` or before it (not before ``floor``): one reverse scan of one row."""
        rows = self.messages.scan(
            prefix + position.to_bytes(8, "big"),
            prefix + (floor - 1).to_bytes(8, "big"),
            limit=1,
            columns=[MESSAGE_COLUMN],
            reverse=True,
        )
        return (position_of(rows[0][0]), peek_row(rows[0][0], rows[0][1].get(MESSAGE_COLUMN))) if rows else None

    def last(self, prefix: bytes) -> tuple[int, RowHeader]:
        last = self.messages.last_row(prefix)
        assert last is not None, "called after a row of the generation was found"
        key, data = last
        return position_of(key), peek_row(key, data.get(MESSAGE_COLUMN))

    def scan(self, start: bytes, stop: bytes, limit: int) -> list[tuple[bytes, bytes | None]]:
        """Rows as (key, their d:m cell or None)."""
        with CLIENT_METRICS.fetch_seconds.time():
            return [(k, v.get(MESSAGE_COLUMN)) for k, v in self.messages.scan(start, stop, limit=limit)]
