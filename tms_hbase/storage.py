"""The storage port: one HBase table with exactly the operations tms-hbase needs, each one Thrift call.

Everything above this module (writer, reader, metadata, subscriptions, transaction state, sweeper)
speaks to HBase through :class:`Table`; raw Thrift calls live here and in :mod:`.connection` only.
Reads and blind writes are idempotent and retried on a broken link; conditional writes
(``put_if_absent``, ``compare_and_set``) and increments are not, because their answer may be lost:
callers resolve that by reading the row back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .connection import HBaseConnection, mutation

Row = tuple[bytes, dict[bytes, bytes]]
"""A row as scans return it: the key and its cells (``family:qualifier`` → value)."""

# How many rows one scanner call brings back when the caller sets no limit.
DEFAULT_BATCH = 1000


class Table:
    """One table of an installation (thread-safe: every call borrows a pooled connection)."""

    def __init__(self, hbase: HBaseConnection, name: str) -> None:
        self.hbase = hbase
        self.name = name
        self._name = name.encode()

    def __repr__(self) -> str:
        return f"Table({self.name!r})"

    # -- reads --------------------------------------------------------------------------------

    def get(self, key: bytes, columns: Sequence[bytes] | None = None) -> dict[bytes, bytes]:
        """The row's cells (only ``columns`` if given); ``{}`` if the row does not exist."""
        return self.hbase.run(f"read row of {self.name}", lambda c: c.table(self.name).row(key, columns=columns))

    def get_cell(self, key: bytes, column: bytes) -> bytes | None:
        """One cell's value, or None if it does not exist."""
        return self.get(key, [column]).get(column)

    def get_versions(self, key: bytes, column: bytes, versions: int) -> list[tuple[bytes, int]]:
        """Up to ``versions`` versions of one cell, newest first, as (value, timestamp)."""
        return self.hbase.run(
            f"read cell versions of {self.name}",
            lambda c: c.table(self.name).cells(key, column, versions=versions, include_timestamp=True),
        )

    def scan(
        self,
        start: bytes | None = None,
        stop: bytes | None = None,
        *,
        prefix: bytes | None = None,
        limit: int | None = None,
        columns: Sequence[bytes] | None = None,
        reverse: bool = False,
        timestamps: bool = False,
    ) -> list[Row]:
        """Rows from ``start`` (inclusive) to ``stop`` (exclusive), or under ``prefix``, in key order
        (descending with ``reverse``: then ``start`` is the high end), at most ``limit`` of them.

        With ``timestamps`` each cell is ``(value, timestamp)`` instead of its value.
        """
        batch = DEFAULT_BATCH if limit is None else max(1, min(limit, DEFAULT_BATCH))

        def scan(conn) -> list[Row]:
            rows = conn.table(self.name).scan(
                row_start=start or None,
                row_stop=stop or None,
                row_prefix=prefix,
                columns=columns,
                limit=limit,
                batch_size=batch,
                reverse=reverse,
                include_timestamp=timestamps,
            )
            return list(rows)

        return self.hbase.run(f"scan {self.name}", scan)

    def last_row(self, prefix: bytes, columns: Sequence[bytes] | None = None) -> Row | None:
        """The row with the greatest key under ``prefix`` (one reverse scan of one row), or None.

        Row keys under ``prefix`` must be shorter than ``len(prefix) + 64`` bytes.
        """
        rows = self.scan(prefix + b"\xff" * 64, prefix, limit=1, columns=columns, reverse=True)
        return rows[0] if rows else None

    # -- writes -------------------------------------------------------------------------------

    def put(self, key: bytes, cells: Mapping[bytes, bytes]) -> None:
        """Write cells of one row (blind; writing the same again is harmless, so it is retried)."""
        self.hbase.run(f"write row of {self.name}", lambda c: c.table(self.name).put(key, dict(cells)))

    def put_many(self, rows: Iterable[tuple[bytes, Mapping[bytes, bytes]]], *, timestamp: int | None = None) -> None:
        """Write many rows in one batch (blind and retried like :meth:`put`); ``timestamp`` sets the
        cells' HBase version instead of the server's clock."""
        rows = list(rows)

        def write(conn) -> None:
            with conn.table(self.name).batch(timestamp=timestamp) as b:
                for key, cells in rows:
                    b.put(key, dict(cells))

        self.hbase.run(f"write rows of {self.name}", write)

    def delete_many(self, keys: Iterable[bytes]) -> None:
        """Delete whole rows in one batch (deleting twice is harmless, so it is retried)."""
        keys = list(keys)

        def delete(conn) -> None:
            with conn.table(self.name).batch() as b:
                for key in keys:
                    b.delete(key)

        self.hbase.run(f"delete rows of {self.name}", delete)

    def put_if_absent(self, key: bytes, column: bytes, value: bytes) -> bool:
        """Write one cell only if it does not exist yet (checkAndPut with no expected value).

        Not retried: if the link fails the put may or may not have landed (HBaseUnavailable).
        """
        return self.compare_and_set(key, column, None, value)

    def compare_and_set(self, key: bytes, column: bytes, expected: bytes | None, value: bytes) -> bool:
        """Write ``column`` = ``value`` only if it holds exactly ``expected`` now (None: the cell does not
        exist). Atomic on one cell (Thrift1's checkAndPut takes one mutation); not retried (see above)."""
        put = mutation(column, value)
        return self.hbase.run(
            f"compare-and-set in {self.name}",
            lambda c: c.client.checkAndPut(self._name, key, column, expected, put, {}),
            idempotent=False,
        )

    def increment(self, key: bytes, column: bytes, amount: int = 1) -> int:
        """Atomically add ``amount`` to a 64-bit counter cell; returns the new value. Not retried."""
        return self.hbase.run(
            f"increment counter in {self.name}",
            lambda c: c.table(self.name).counter_inc(key, column, amount),
            idempotent=False,
        )
