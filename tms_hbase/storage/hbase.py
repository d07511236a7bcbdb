"""The storage port: one HBase table with exactly the operations tms-hbase needs, each one Thrift call.

Everything above this module (writer, reader, metadata, subscriptions, transaction state, sweeper)
speaks to HBase through :class:`Table`; raw Thrift calls live here and in :mod:`.connection` only.
Reads and blind writes are idempotent and retried on a broken link; conditional writes
(``put_if_absent``, ``compare_and_set``) and increments are not, because their answer may be lost:
callers resolve that by reading the row back.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from operator import attrgetter, methodcaller
from typing import Any, TypeVar

from tms_hbase.errors import HBaseError
from tms_hbase.model.retry import Retry
from tms_hbase.model.tables import CORE, FAMILIES, FAMILY, TableNames
from tms_hbase.runtime import green
from tms_hbase.storage.connection import (
    CheckedClient,
    Connection,
    HBaseConnection,
    mutation,
    pipeline_many,
    scan_spec,
)
from tms_hbase.storage.hbase_thrift import BatchMutation, ColumnDescriptor, Mutation, TScan

T = TypeVar("T")

log = logging.getLogger(__name__)

Row = tuple[bytes, dict[bytes, bytes]]
"""A row as scans return it: the key and its cells (``family:qualifier`` → value)."""

# How many rows one scanner call brings back: a limited scan takes its rows in one call up to MAX_BATCH.
DEFAULT_BATCH = 1000
MAX_BATCH = 10_000
KEYS_ONLY = "KeyOnlyFilter()"
"""A scan filter that sends the keys and empty values back: for scans that only need the keys."""
VALUE_LENGTHS = "KeyOnlyFilter(true)"
"""A scan filter that sends the keys back with each value's length (4 bytes, big-endian) as its value."""
# While a split or merge is being assigned, listing a table's regions fails for a few seconds
# ("Internal error processing getTableRegions"): ask again for up to about 15 s.
REGIONS_IN_TRANSITION = Retry(
    attempts=20, backoff_seconds=0.25, max_backoff_seconds=1.0, retry_if=lambda e: "Internal error" in str(e)
)


_ROW, _COLUMNS, _VALUE = attrgetter("row"), attrgetter("columns"), attrgetter("value")


def _values(cells: list) -> list[bytes | None]:
    """The values of Thrift cells (None where a row lacks the column)."""
    try:
        return list(map(_VALUE, cells))
    except AttributeError:  # a row without the column (None has no value)
        return [None if c is None else c.value for c in cells]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a block that creates many objects, none of them in
    cycles (decoding a scanner answer, or encoding a batch of puts: several objects per row, freed by
    reference counting).

    Left on, the collector runs every few hundred allocations and, as the answer grows, walks all of
    it again and again: about a third of the CPU time of decoding a large scan. Only the caller that
    found it enabled turns it back on, so nested or concurrent pauses leave it as it was.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class Region:
    """One region of a table: rows from ``start`` (inclusive, b"" = first) to ``end`` (exclusive, b"" = last)."""

    table: str
    start: bytes
    end: bytes
    name: bytes  # HBase's region name, for a major compaction of just this region

    @property
    def key(self) -> bytes:
        """Identifies the region in the sweeper's state (a split keeps the first half's key)."""
        return self.table.encode() + b"\0" + self.start

    def label(self) -> str:
        return f"{self.table}[{self.start.hex() or '-'}..{self.end.hex() or '-'})"


class Table:
    """One table of an installation (thread-safe: every call borrows a pooled connection)."""

    def __init__(self, hbase: HBaseConnection, name: str) -> None:
        self.hbase = hbase
        self.name = name
        self._name = name.encode()

    def __repr__(self) -> str:
        return f"Table({self.name!r})"

    def exists(self) -> bool:
        """Whether HBase has this table (one call)."""
        return self.name.encode() in self.hbase.run("list tables", lambda c: c.client.getTableNames())

    # -- reads --------------------------------------------------------------------------------

    def get(self, key: bytes, columns: Sequence[bytes] | None = None) -> dict[bytes, bytes]:
        """The row's cells (only ``columns`` if given); ``{}`` if the row does not exist."""
        wanted = None if columns is None else list(columns)

        def read(conn: Connection) -> dict[bytes, bytes]:
            rows = conn.client.getRowWithColumns(self._name, key, wanted, {})
            return {column: cell.value for column, cell in rows[0].columns.items()} if rows else {}

        return self.hbase.run(f"read row of {self.name}", read)

    def get_cell(self, key: bytes, column: bytes) -> bytes | None:
        """One cell's value, or None if it does not exist."""
        return self.get(key, [column]).get(column)

    def get_cells(self, keys: Sequence[bytes], column: bytes) -> list[bytes | None]:
        """One cell of each row of ``keys`` (None where it does not exist), in order: the reads pipelined
        (:meth:`~tms_hbase.storage.connection.CheckedClient.pipeline`), a round trip for many."""
        if not keys:
            return []
        calls = [
            ("getRowWithColumns", {"tableName": self._name, "row": key, "columns": [column], "attributes": {}})
            for key in keys
        ]

        def read(conn: Connection) -> list[bytes | None]:
            answers = conn.client.pipeline(calls)
            refused = next((a for a in answers if isinstance(a, Exception)), None)
            if refused is not None:
                raise refused
            return [rows[0].columns[column].value if rows and column in rows[0].columns else None for rows in answers]

        return self.hbase.run(f"read {len(keys)} rows of {self.name}", read, requests=len(keys))

    def get_versions(self, key: bytes, column: bytes, versions: int) -> list[tuple[bytes, int]]:
        """Up to ``versions`` versions of one cell, newest first, as (value, timestamp)."""
        return self.hbase.run(
            f"read cell versions of {self.name}",
            lambda c: [(cell.value, cell.timestamp) for cell in c.client.getVer(self._name, key, column, versions, {})],
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
        filter: str | bytes | None = None,
    ) -> list[Row]:
        """Rows from ``start`` (inclusive) to ``stop`` (exclusive), or under ``prefix``, in key order
        (descending with ``reverse``: then ``start`` is the high end), at most ``limit`` of them.

        With ``timestamps`` each cell is ``(value, timestamp)`` instead of its value. ``filter`` is an
        HBase filter string applied in the region servers (e.g. :data:`KEYS_ONLY`).
        """
        batch = DEFAULT_BATCH if limit is None else max(1, min(limit, MAX_BATCH))
        if limit is not None and limit < 1:
            raise ValueError("a scan's limit must be at least 1")
        low, high = start or None, stop or None
        if prefix is not None:
            if low is not None or high is not None:
                raise TypeError("a scan takes a prefix or start and stop, not both")
            low, high = (_after(prefix), prefix) if reverse else (prefix, _after(prefix))
        spec = TScan(
            startRow=low or b"",
            stopRow=high,
            columns=None if columns is None else list(columns),
            caching=batch,
            filterString=filter.encode() if isinstance(filter, str) else filter,
            sortColumns=False,
            reversed=reverse,
        )
        cell: Callable[[Any], Any] = (lambda c: (c.value, c.timestamp)) if timestamps else _VALUE

        def scan(conn: Connection) -> list[Row]:
            client = conn.client
            rows: list[Row] = []
            scanner = client.scannerOpenWithScan(self._name, spec, {})
            if limit is not None and limit <= MAX_BATCH:  # one fetch of the rows, and the close sent with it
                results = _fetch_and_close(client, scanner, limit)
                return [(r.row, {name: cell(c) for name, c in r.columns.items()}) for r in results]
            try:
                while limit is None or len(rows) < limit:
                    wanted = batch if limit is None else min(batch, limit - len(rows))
                    results = client.scannerGetList(scanner, wanted)
                    rows += [(r.row, {name: cell(c) for name, c in r.columns.items()}) for r in results]
                    if len(results) < wanted:  # (a scanner answers fewer rows than asked only at its end)
                        break
            finally:
                client.scannerClose(scanner)
            return rows

        return self.hbase.run(f"scan {self.name}", scan)

    def scan_columns(
        self, start: bytes, stop: bytes, columns: Sequence[bytes], limit: int
    ) -> tuple[list[bytes], list[list[bytes | None]]]:
        """Up to ``limit`` (at most :data:`MAX_BATCH`) rows from ``start`` (inclusive) to ``stop`` (exclusive,
        not empty), in key order: their keys, and for each of ``columns`` its values (None where a row lacks
        it), in the order of ``columns``.

        For bulk reads of a few columns (the Spark data source's, and fetches of stored payloads): one
        scanner call, no dict per row, and the cyclic garbage collector paused while the answer is
        decoded (see :func:`gc_paused`). Empty if ``start`` >= ``stop`` (HBase would read a scan from a
        key to the same key as a get of that row)."""
        if start >= stop:
            return [], [[] for _ in columns]
        batch = max(1, min(limit, MAX_BATCH))

        def scan(conn) -> tuple[list[bytes], list[list[bytes | None]]]:
            client = conn.client
            scanner = client.scannerOpenWithScan(self._name, scan_spec(start, stop, batch), {})
            with gc_paused():
                results = _fetch_and_close(client, scanner, batch)
                keys = list(map(_ROW, results))
                rows = list(map(_COLUMNS, results))
                del results  # (freed here, before the collector runs again)
                out = [_values(list(map(methodcaller("get", column), rows))) for column in columns]
                del rows
            return keys, out

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
        self.put_many([(key, cells)])

    def put_many(self, rows: Iterable[tuple[bytes, Mapping[bytes, bytes]]], *, timestamp: int | None = None) -> None:
        """Write many rows in one batch (blind and retried like :meth:`put`); ``timestamp`` sets the
        cells' HBase version instead of the server's clock. The Thrift objects of the batch (several
        per row) are made and sent with the cyclic garbage collector paused (:func:`gc_paused`)."""
        rows = list(rows)

        def write(conn: Connection) -> None:
            with gc_paused():
                by_row: dict[bytes, list[Mutation]] = {}
                for key, cells in rows:
                    by_row.setdefault(key, []).extend(mutation(column, value) for column, value in dict(cells).items())
                _mutate(conn, self._name, by_row, timestamp)

        self.hbase.run(f"write rows of {self.name}", write)

    def delete_many(self, keys: Iterable[bytes]) -> None:
        """Delete whole rows in one batch (deleting twice is harmless, so it is retried)."""
        keys = list(keys)

        def delete(conn: Connection) -> None:
            if not keys:
                return
            # Thrift1 mutations delete columns or whole families, not rows: each of the table's families
            families = [name.rstrip(b":") for name in conn.client.getColumnDescriptors(self._name)]
            _mutate(conn, self._name, {key: [_deletion(f) for f in families] for key in keys}, None)

        self.hbase.run(f"delete rows of {self.name}", delete)

    def delete_cells(self, key: bytes, columns: Sequence[bytes]) -> None:
        """Delete some cells of one row (deleting twice is harmless, so it is retried)."""
        deletions = {key: [_deletion(column) for column in columns]}
        self.hbase.run(f"delete cells of {self.name}", lambda c: _mutate(c, self._name, deletions, None))

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
            # (straight to the request: every publish makes this call, and the client's attribute would
            # make a partial of it first)
            lambda c: c.client._req("checkAndPut", self._name, key, column, expected, put, {}),
            idempotent=False,
        )

    def compare_and_set_many(
        self, swaps: Sequence[tuple[bytes, bytes, bytes | None, bytes]], *, ways: int = 1
    ) -> list[bool]:
        """:meth:`compare_and_set` of many cells, each ``(key, column, expected, value)`` and atomic on its
        own, pipelined (:func:`~tms_hbase.storage.connection.pipeline_many`): a round trip for up to 64 of
        them per connection, over up to ``ways`` connections at once (those free now) in consecutive
        parts, all written before any answer is read. Which won, in order. Not retried; if a link fails,
        or HBase refuses one (raised once every answer is read), each may or may not have landed."""
        if not swaps:
            return []
        calls: list[tuple[str, dict[str, Any]]] = [
            (
                "checkAndPut",
                {
                    "tableName": self._name,
                    "row": key,
                    "column": column,
                    "value": old,
                    "mput": mutation(column, new),
                    "attributes": {},
                },
            )
            for key, column, old, new in swaps
        ]

        def swap_all(conns: list[Connection]) -> list[bool]:
            size = -(-len(calls) // len(conns))
            batches = [calls[first : first + size] for first in range(0, len(calls), size)]
            answers = [a for part in pipeline_many([c.client for c in conns[: len(batches)]], batches) for a in part]
            refused = next((a for a in answers if isinstance(a, Exception)), None)
            if refused is not None:
                raise refused
            return [bool(a) for a in answers]

        what = f"compare-and-set of {len(swaps)} cells in {self.name}"
        return self.hbase.run_over(what, ways, swap_all, idempotent=False, requests=len(swaps))

    def increment(self, key: bytes, column: bytes, amount: int = 1) -> int:
        """Atomically add ``amount`` to a 64-bit counter cell; returns the new value. Not retried."""
        return self.hbase.run(
            f"increment counter in {self.name}",
            lambda c: c.client.atomicIncrement(self._name, key, column, amount),
            idempotent=False,
        )

    # -- regions ------------------------------------------------------------------------------

    def regions(self) -> list[Region]:
        """The table's regions in key order, as HBase has them now (splits and merges included).

        While a split or merge is being assigned, the gateway fails the call: that passes within seconds,
        so it is asked again (:data:`REGIONS_IN_TRANSITION`).
        """
        what = f"list regions of {self.name}"
        infos = REGIONS_IN_TRANSITION.call(
            lambda: self.hbase.run(what, lambda c: c.client.getTableRegions(self._name)), what=what
        )
        regions = [Region(self.name, i.startKey or b"", i.endKey or b"", i.name) for i in infos]
        return sorted(regions, key=lambda r: r.start)

    def major_compact(self, region: Region) -> None:
        """Ask HBase to major-compact one region of this table (frees the space of deleted rows)."""
        self.hbase.run(f"major compaction of {region.label()}", lambda c: c.client.majorCompact(region.name))


class Installation:
    """One tms-hbase installation: the tables of one prefix at one HBase, over one connection pool.

    This is what the components above the storage layer are handed (``MessagingClient.installation``):
    the sweeper, the CLIs, Spark tasks and the benchmarks use it instead of a client's internals.
    """

    def __init__(self, hbase: HBaseConnection, names: TableNames) -> None:
        self.hbase = hbase
        self.names = names
        self.messages = Table(hbase, names.messages)
        self.payloads = Table(hbase, names.payloads)
        self.metadata = Table(hbase, names.metadata)
        self.txstate = Table(hbase, names.txstate)

    def __repr__(self) -> str:
        return f"Installation({self.hbase.address!r}, prefix={self.prefix!r})"

    @property
    def prefix(self) -> str:
        return self.names.prefix

    @property
    def address(self) -> str:
        """``host:port`` of the HBase Thrift gateway."""
        return self.hbase.address

    @property
    def calls(self) -> int:
        """HBase calls (round trips) made so far through this installation's pool (tests, benchmarks, metrics)."""
        return self.hbase.calls

    @property
    def requests(self) -> int:
        """Thrift requests sent so far through this installation's pool: :attr:`calls` plus those sent
        pipelined behind the first of a round trip (benchmarks)."""
        return self.hbase.requests

    def table(self, kind: str) -> Table:
        """The table ``<prefix>_<kind>``."""
        return Table(self.hbase, self.names.name(kind))

    def missing(self, kinds: Iterable[str] = CORE) -> list[str]:
        """The tables of this prefix (of ``kinds``, by default the core ones every installation has)
        that do not exist (one call; creates nothing)."""
        existing = set(self._existing())
        return [self.names.name(kind) for kind in kinds if self.names.name(kind) not in existing]

    def create_missing(self, kinds: Iterable[str] = CORE) -> list[str]:
        """Create whichever table of this prefix (of ``kinds``) is missing; returns the names it created.

        Safe to run from many processes at once: losing a creation race to another process is fine.
        """
        existing = set(self._existing())
        missing = [kind for kind in kinds if self.names.name(kind) not in existing]
        made = _side_by_side([partial(self.create_table, kind, {FAMILY: FAMILIES[kind]}) for kind in missing])
        return [self.names.name(kind) for kind, created in zip(missing, made, strict=True) if created]

    def create_table(self, kind: str, families: Mapping[str, Mapping[str, Any]]) -> bool:
        """Create the table ``<prefix>_<kind>`` with ``families`` (name: options, snake_case names) unless it
        exists; True if this call created it. Losing a creation race to another process is fine."""
        name = self.names.name(kind)
        try:
            self.hbase.run(
                f"create table {name}", partial(_create_table, name=name, families=families), idempotent=False
            )
        except HBaseError as exc:
            if "already in use" not in str(exc) and name not in self._existing():
                raise
            return False
        log.info("created table %s", name)
        return True

    def drop(self) -> list[str]:
        """Disable and delete the tables of this prefix that exist, with everything in them; returns the names."""
        existing = set(self._existing())
        dropped = [name for name in self.names.all() if name in existing]
        _side_by_side(
            [
                partial(self.hbase.run, f"drop table {name}", partial(_drop_table, name=name), idempotent=False)
                for name in dropped
            ]
        )
        return dropped

    def close(self) -> None:
        """Close the connection pool."""
        self.hbase.close()

    def _existing(self) -> list[str]:
        return [t.decode() for t in self.hbase.run("list tables", lambda c: c.client.getTableNames())]


def _side_by_side(calls: Sequence[Callable[[], T]]) -> list[T]:
    """The results of ``calls``, run at once, each on a pooled connection of its own: HBase answers a table's
    creation or deletion once its procedure is done, which takes about half a second of waiting however
    small the table, so the five tables of an installation take one such wait instead of five. The first
    error is raised once every call has ended."""
    if len(calls) <= 1:
        return [call() for call in calls]
    results: list[T | None] = [None] * len(calls)
    errors: list[Exception] = []

    def run(index: int) -> None:
        try:
            results[index] = calls[index]()
        except Exception as exc:  # raised below, on the caller's side, once all have ended
            errors.append(exc)

    for task in [green.start_thread(partial(run, i), f"tms-tables-{i}") for i in range(len(calls))]:
        task.join()
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]  # every call returned: no None left


def _after(prefix: bytes) -> bytes | None:
    """The first key after every key that starts with ``prefix`` (None: there is none, all bytes are 0xff)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else None


def _fetch_and_close(client: CheckedClient, scanner: int, rows: int) -> list[Any]:
    """Up to ``rows`` rows of an open scanner, the scanner closed: both requests written at once and answered
    in one round trip (:meth:`~tms_hbase.storage.connection.CheckedClient.pipeline`) instead of one each.
    Raises what HBase refused, once both answers are read (the scanner is closed either way)."""
    results, closed = client.pipeline(
        [("scannerGetList", {"id": scanner, "nbRows": rows}), ("scannerClose", {"id": scanner})]
    )
    for answer in (results, closed):
        if isinstance(answer, Exception):
            raise answer
    return results


def _deletion(column: bytes) -> Mutation:
    """A Thrift1 delete of one column (``family:qualifier``) or of a whole family (``family``)."""
    return Mutation(isDelete=True, column=column, writeToWAL=True)


def _mutate(conn: Connection, table: bytes, by_row: dict[bytes, list[Mutation]], timestamp: int | None) -> None:
    """One batch of mutations, row by row (``timestamp``: the cells' HBase version instead of the server's clock)."""
    if not by_row:
        return
    batches = [BatchMutation(row=key, mutations=mutations) for key, mutations in by_row.items()]
    if timestamp is None:
        conn.client.mutateRows(table, batches, {})
    else:
        conn.client.mutateRowsTs(table, batches, timestamp, {})


def _create_table(conn: Connection, *, name: str, families: Mapping[str, Mapping[str, Any]]) -> None:
    """Create a table with ``families`` (each family's options with snake_case names)."""
    descriptors = [
        ColumnDescriptor(name=f"{family}:".encode(), **{_camel(option): value for option, value in options.items()})
        for family, options in families.items()
    ]
    conn.client.createTable(name.encode(), descriptors)


def _camel(option: str) -> str:
    first, *rest = option.split("_")
    return first + "".join(word.capitalize() for word in rest)


def _drop_table(conn: Connection, *, name: str) -> None:
    """Disable the table (unless it is) and delete it."""
    if conn.client.isTableEnabled(name.encode()):
        conn.client.disableTable(name.encode())
    conn.client.deleteTable(name.encode())
