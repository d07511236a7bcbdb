"""The storage port (:mod:`tms_hbase.storage.hbase`) kept in memory, FOR UNIT TESTS ONLY.

It answers like HBase does for the operations tms-hbase uses (sorted keys, conditional writes on one
cell, counters as 8-byte longs, cell versions with timestamps), so the protocol logic above the port
(the append race, gap rescans, seeks, rollback, sweeper chunks) can be tested fast and with faults
that are hard to provoke on a real HBase: an answer lost after the write landed, a scan that misses a
row a writer was adding, a row swept between two reads. Every behaviour tested here is also tested
against the real HBase under tests/integration.
"""

from __future__ import annotations

import bisect
import itertools
import re
import struct
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

from tms_hbase.errors import HBaseUnavailable
from tms_hbase.model.clock import now_ms
from tms_hbase.model.tables import TableNames
from tms_hbase.storage.hbase import KEYS_ONLY, Region, Row

# one alternative of a filter of value ranges (what the sequencer's time seek sends): a byte range of cells
_QUOTED = rb"'binary:((?:[^']|'')*)'"
_RANGE = re.compile(rb"\(ValueFilter\(>=, " + _QUOTED + rb"\) AND ValueFilter\(<, " + _QUOTED + rb"\)\)", re.S)

LOSE_ANSWER = "lose answer"
"""What a fault returns to let the operation happen and then fail as if its answer was lost."""

Fault = Callable[..., object]


_COLUMN_RANGE = re.compile(r"ColumnRangeFilter\('([^']*)', (true|false), '([^']*)', (true|false)\)")


def _column_range(text: str) -> tuple[bytes, bool, bytes, bool] | None:
    """(min, inclusive, max, inclusive) qualifiers of a ColumnRangeFilter (the skip index's count), or None."""
    found = _COLUMN_RANGE.fullmatch(text)
    if found is None:
        return None
    low, low_in, high, high_in = found.groups()
    return low.encode(), low_in == "true", high.encode(), high_in == "true"


def _in_column_range(column: bytes, bounds: tuple[bytes, bool, bytes, bool]) -> bool:
    qualifier = column.split(b":", 1)[1]
    low, low_in, high, high_in = bounds
    return (qualifier > low or (low_in and qualifier == low)) and (qualifier < high or (high_in and qualifier == high))


def _value_ranges(text: bytes) -> list[tuple[bytes, bytes]] | None:
    """The [low, high) value ranges of an HBase filter made only of ORed ranges of ValueFilters, or None."""
    found = list(_RANGE.finditer(text))
    if not found or text != b"(" + b" OR ".join(m.group(0) for m in found) + b")":
        return None
    return [(m.group(1).replace(b"''", b"'"), m.group(2).replace(b"''", b"'")) for m in found]


def _value(cell: object) -> bytes:
    return cell[0] if isinstance(cell, tuple) else cell  # (value, timestamp) with timestamps


class MemoryTable:
    """One table: ``key -> column -> [(timestamp, value), ...]`` newest first, keys kept sorted."""

    def __init__(self, name: str, clock: Callable[[], int] = now_ms, max_versions: int = 1) -> None:
        self.name = name
        self.clock = clock
        self.max_versions = max_versions  # the port's tables keep one (tables.FAMILIES)
        self.calls = 0
        self.split_keys: list[bytes] = []  # region boundaries (regions() reports them)
        self.compacted: list[Region] = []
        self._cells: dict[bytes, dict[bytes, list[tuple[int, bytes]]]] = {}
        self._keys: list[bytes] = []
        self._faults: dict[str, list[Fault]] = {}
        self._hidden: set[bytes] = set()
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"MemoryTable({self.name!r}, {len(self._keys)} rows)"

    # -- fault injection ------------------------------------------------------------------------

    def inject(self, operation: str, fault: Fault, times: int = 1) -> None:
        """Run ``fault(*args)`` before the next ``times`` calls of ``operation`` (a method name). It may
        raise (the call fails, nothing is written), return :data:`LOSE_ANSWER` (the write happens, then
        HBaseUnavailable), or do something else first, e.g. write a row as another writer would."""
        self._faults.setdefault(operation, []).extend([fault] * times)

    def hide_once(self, *keys: bytes) -> None:
        """The next scan leaves these rows out (a scan that crossed a region while they were written)."""
        self._hidden.update(keys)

    def _fault(self, operation: str, *args: object) -> bool:
        self.calls += 1
        faults = self._faults.get(operation)
        if not faults:
            return False
        return faults.pop(0)(*args) == LOSE_ANSWER

    # -- reads ----------------------------------------------------------------------------------

    def get(self, key: bytes, columns: Sequence[bytes] | None = None) -> dict[bytes, bytes]:
        self._fault("get", key)
        with self._lock:
            return self._row(key, columns, timestamps=False)

    def get_cell(self, key: bytes, column: bytes) -> bytes | None:
        return self.get(key, [column]).get(column)

    def get_versions(self, key: bytes, column: bytes, versions: int) -> list[tuple[bytes, int]]:
        self._fault("get_versions", key, column)
        with self._lock:
            return [(value, stamp) for stamp, value in self._cells.get(key, {}).get(column, [])[:versions]]

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
        ranges = _value_ranges(filter) if isinstance(filter, bytes) else None
        qualifiers = _column_range(filter) if isinstance(filter, str) else None
        if filter not in (None, KEYS_ONLY) and ranges is None and qualifiers is None:
            raise NotImplementedError(f"the memory port has no filter {filter!r}")
        self._fault("scan", start, stop)
        with self._lock:
            hidden, self._hidden = self._hidden, set()
            if prefix is not None:
                keys = [k for k in self._keys if k.startswith(prefix)]
            elif not reverse:
                lo = bisect.bisect_left(self._keys, start or b"")
                hi = bisect.bisect_left(self._keys, stop) if stop else len(self._keys)
                keys = self._keys[lo:hi]
            else:  # start is the high end (inclusive), stop the low end (exclusive)
                hi = bisect.bisect_right(self._keys, start) if start else len(self._keys)
                lo = bisect.bisect_right(self._keys, stop) if stop else 0
                keys = self._keys[lo:hi][::-1]
            rows = []
            for key in keys:
                if key in hidden:
                    continue
                cells = self._row(key, columns, timestamps)
                if filter == KEYS_ONLY:
                    cells = {column: (b"", cell[1]) if timestamps else b"" for column, cell in cells.items()}
                if ranges is not None:
                    cells = {c: v for c, v in cells.items() if any(lo <= _value(v) < hi for lo, hi in ranges)}
                if qualifiers is not None:
                    cells = {c: v for c, v in cells.items() if _in_column_range(c, qualifiers)}
                if cells:
                    rows.append((key, cells))
                if limit is not None and len(rows) == limit:
                    break
            return rows

    def scan_columns(
        self, start: bytes, stop: bytes, columns: Sequence[bytes], limit: int
    ) -> tuple[list[bytes], list[list[bytes | None]]]:
        rows = self.scan(start, stop, limit=limit)
        return [key for key, _ in rows], [[cells.get(column) for _, cells in rows] for column in columns]

    def last_row(self, prefix: bytes, columns: Sequence[bytes] | None = None) -> Row | None:
        rows = self.scan(prefix + b"\xff" * 64, prefix, limit=1, columns=columns, reverse=True)
        return rows[0] if rows else None

    # -- writes ---------------------------------------------------------------------------------

    def put(self, key: bytes, cells: Mapping[bytes, bytes]) -> None:
        self.put_many([(key, cells)])

    def put_many(self, rows: Iterable[tuple[bytes, Mapping[bytes, bytes]]], *, timestamp: int | None = None) -> None:
        rows = list(rows)
        lose = self._fault("put_many", rows)
        with self._lock:
            for key, cells in rows:
                for column, value in cells.items():
                    self._write(key, column, value, timestamp)
        self._lost(lose)

    def delete_many(self, keys: Iterable[bytes]) -> None:
        keys = list(keys)
        lose = self._fault("delete_many", keys)
        with self._lock:
            for key in keys:
                self.delete_row(key)
        self._lost(lose)

    def delete_cells(self, key: bytes, columns: Sequence[bytes]) -> None:
        self._fault("delete_cells", key)
        with self._lock:
            row = self._cells.get(key)
            if row is None:
                return
            for column in columns:
                row.pop(column, None)
            if not row:
                del self._cells[key]
                self._keys.pop(bisect.bisect_left(self._keys, key))

    def put_if_absent(self, key: bytes, column: bytes, value: bytes) -> bool:
        return self.compare_and_set(key, column, None, value)

    def compare_and_set(self, key: bytes, column: bytes, expected: bytes | None, value: bytes) -> bool:
        lose = self._fault("compare_and_set", key, column, expected, value)
        with self._lock:
            current = self._row(key, [column], timestamps=False).get(column)
            won = current == expected
            if won:
                self._write(key, column, value, None)
        self._lost(lose)
        return won

    def compare_and_set_many(
        self, swaps: Sequence[tuple[bytes, bytes, bytes | None, bytes]], *, ways: int = 1
    ) -> list[bool]:
        return [self.compare_and_set(*swap) for swap in swaps]

    def increment(self, key: bytes, column: bytes, amount: int = 1) -> int:
        lose = self._fault("increment", key, column, amount)
        with self._lock:
            current = self._row(key, [column], timestamps=False).get(column)
            total = (0 if current is None else struct.unpack(">q", current)[0]) + amount
            self._write(key, column, struct.pack(">q", total), None)
        self._lost(lose)
        return total

    # -- regions --------------------------------------------------------------------------------

    def regions(self) -> list[Region]:
        self._fault("regions")
        bounds = [b"", *sorted(self.split_keys), b""]
        return [Region(self.name, lo, hi, f"{self.name},{lo.hex()}".encode()) for lo, hi in itertools.pairwise(bounds)]

    def major_compact(self, region: Region) -> None:
        self._fault("major_compact", region)
        self.compacted.append(region)

    # -- for tests ------------------------------------------------------------------------------

    def row_keys(self) -> list[bytes]:
        with self._lock:
            return list(self._keys)

    def delete_row(self, key: bytes) -> None:
        """Remove a row at once, as a sweeper would (no fault, no call counted)."""
        with self._lock:
            if self._cells.pop(key, None) is not None:
                self._keys.pop(bisect.bisect_left(self._keys, key))

    def _write(self, key: bytes, column: bytes, value: bytes, timestamp: int | None) -> None:
        if key not in self._cells:
            bisect.insort(self._keys, key)
            self._cells[key] = {}
        versions = self._cells[key].setdefault(column, [])
        versions.insert(0, (self.clock() if timestamp is None else timestamp, value))
        versions.sort(key=lambda v: -v[0])  # newest first; of two at the same time, the later write
        del versions[self.max_versions :]

    def _row(self, key: bytes, columns: Sequence[bytes] | None, timestamps: bool) -> dict:
        cells = self._cells.get(key, {})
        wanted = cells if columns is None else {c: cells[c] for c in columns if c in cells}
        return {c: (v[0][1], v[0][0]) if timestamps else v[0][1] for c, v in wanted.items() if v}

    @staticmethod
    def _lost(lose: bool) -> None:
        if lose:
            raise HBaseUnavailable("memory table: the answer was lost (injected)")


class MemoryInstallation:
    """The port's Installation with memory tables (same attributes the components above use)."""

    def __init__(self, prefix: str = "mem", clock: Callable[[], int] = now_ms) -> None:
        self.names = TableNames(prefix)
        self.clock = clock
        self.messages = MemoryTable(self.names.messages, clock)
        self.payloads = MemoryTable(self.names.payloads, clock)
        self.metadata = MemoryTable(self.names.metadata, clock)
        self.txstate = MemoryTable(self.names.txstate, clock)
        self._others: dict[str, MemoryTable] = {}

    @property
    def prefix(self) -> str:
        return self.names.prefix

    @property
    def address(self) -> str:
        return "memory"

    @property
    def calls(self) -> int:
        return sum(t.calls for t in (self.messages, self.payloads, self.metadata, self.txstate))

    def table(self, kind: str) -> MemoryTable:
        known = {"messages": self.messages, "payloads": self.payloads, "metadata": self.metadata}
        if kind in known or kind == "txstate":
            return known.get(kind, self.txstate)
        return self._others.setdefault(kind, MemoryTable(self.names.name(kind), self.clock))
