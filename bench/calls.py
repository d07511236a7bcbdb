"""Counting the HBase calls of one library operation, deterministically: a wrapper around the storage port.

Every operation of :class:`~tms_hbase.storage.hbase.Table` is one HBase call (a get, a whole scan, a put),
so counting the operations of an installation's tables counts the calls whatever the machine's load; the
Thrift requests behind them are counted too (a scan is three: open, fetch, close), and the round trips they took
(a scan's fetch and close are sent together: two). Used by the seek
benchmark and by the test that bounds a time seek's calls (tests/integration/test_seek_calls.py).
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tms_hbase.storage.hbase import Installation, Table

from .common import RpcCounter

# The Table operations that each make one HBase call (an operation made of others counts once).
OPERATIONS = (
    "get",
    "get_cell",
    "get_cells",
    "get_versions",
    "scan",
    "scan_columns",
    "last_row",
    "put",
    "put_many",
    "delete_many",
    "delete_cells",
    "put_if_absent",
    "compare_and_set",
    "increment",
    "regions",
    "major_compact",
)


class CallCounter:
    """Counts the calls made through the tables of one installation, by table and operation, and the
    Thrift requests this process sends meanwhile (:class:`~bench.common.RpcCounter`). Install with
    :meth:`counting` (a context manager that puts the tables back as they were)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()  # "messages.scan": n
        self._requests_at = RpcCounter.count
        self._round_trips_at = RpcCounter.round_trips
        self._depth = threading.local()
        self._thread: int | None = None  # the thread whose calls are counted (None: every thread's)

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    @property
    def requests(self) -> int:
        """Thrift requests this process sent since the last :meth:`reset` (every thread's)."""
        return RpcCounter.count - self._requests_at

    @property
    def round_trips(self) -> int:
        """The round trips those requests took (a pipelined window of them is one)."""
        return RpcCounter.round_trips - self._round_trips_at

    def reset(self) -> None:
        self.calls.clear()
        self._requests_at = RpcCounter.count
        self._round_trips_at = RpcCounter.round_trips

    @contextmanager
    def counting(self, installation: Installation, *tables: Table, this_thread: bool = False) -> Iterator[CallCounter]:
        """Count the calls through ``installation``'s core tables (and any other ``tables`` given); with
        ``this_thread`` only those made on the calling thread (not a client's background threads', such as its
        doorbell addresses' refresh, whose reads come when they come)."""
        self._thread = threading.get_ident() if this_thread else None
        targets = [installation.messages, installation.payloads, installation.metadata, installation.txstate, *tables]
        patched: list[Table] = []
        RpcCounter.install()
        try:
            for table in targets:
                if table not in patched:
                    for name in OPERATIONS:
                        setattr(table, name, self._wrap(table, name, getattr(table, name)))
                    patched.append(table)
            yield self
        finally:
            for table in patched:
                for name in OPERATIONS:
                    delattr(table, name)

    def _wrap(self, table: Table, name: str, operation: Callable[..., Any]) -> Callable[..., Any]:
        label = f"{table.name.rsplit('_', 1)[-1]}.{name}"

        @functools.wraps(operation)
        def counted(*args: object, **kwargs: object) -> object:
            depth = getattr(self._depth, "value", 0)
            mine = self._thread is None or threading.get_ident() == self._thread
            if depth == 0 and mine:  # an operation made of others (last_row is a scan) is one call
                self.calls[label] += 1
            self._depth.value = depth + 1
            try:
                return operation(*args, **kwargs)
            finally:
                self._depth.value = depth

        return counted
