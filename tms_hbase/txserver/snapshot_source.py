"""Where a process that is not the transaction server (the sweeper) gets its view of the transaction state.

Two sources, one answer (a :class:`TransactionSnapshot`):

- :class:`ServerSnapshots`: Tephra's Thrift ``getSnapshot`` from any Tephra-compatible transaction server (Apache
  Tephra, CDAP's, ours), decoded with our version-4 codec. This is how Tephra's own coprocessors get theirs.
- :class:`StoredSnapshots`: our server's durable state in ``<prefix>_txstate`` (latest snapshot + edit log),
  which needs no server at all.

:class:`SnapshotKeeper` refreshes a source on an interval and keeps the last good view when a refresh
fails; a view older than its bound is *stale* and callers must not apply invalid-list rules from it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from tms_hbase.errors import InvalidArgument, TmsError
from tms_hbase.storage.hbase import Table
from tms_hbase.tx.client import TransactionClient
from tms_hbase.tx.snapshot import TransactionSnapshot
from tms_hbase.txserver.state_store import StateStore

log = logging.getLogger(__name__)

DEFAULT_MAX_AGE_SECONDS = 600.0


class SnapshotSource(Protocol):
    """Reads the current transaction state (TmsError if it cannot)."""

    description: str

    def read(self) -> TransactionSnapshot: ...


class ServerSnapshots:
    """``getSnapshot`` from a Tephra-compatible transaction server at ``address``."""

    def __init__(self, address: str, *, timeout_seconds: float = 10.0) -> None:
        self.client = TransactionClient(address, timeout_seconds=timeout_seconds)
        self.description = f"transaction server {self.client.address}"

    def read(self) -> TransactionSnapshot:
        return self.client.snapshot()

    def close(self) -> None:
        self.client.close()


class StoredSnapshots:
    """Our transaction server's state rebuilt from HBase (snapshot + edit log); no server needed."""

    def __init__(self, table: Table, clock: Callable[[], int]) -> None:
        self.store, self.clock = StateStore(table), clock
        self.description = f"table {table.name}"

    def read(self) -> TransactionSnapshot:
        return self.store.recover().snapshot(self.clock())

    def close(self) -> None:
        pass


class SnapshotKeeper:
    """The latest good view of a source, refreshed when older than ``refresh_seconds``.

    A failed refresh keeps the last good view and logs its age. :meth:`age_seconds` is how long ago the
    view in hand was read; past ``max_age_seconds`` (or with no view at all) :meth:`stale` is true.
    """

    def __init__(
        self,
        source: SnapshotSource,
        *,
        refresh_seconds: float = 30.0,
        max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not max_age_seconds > 0 or max_age_seconds < refresh_seconds:
            raise InvalidArgument(
                f"bad maximum snapshot age {max_age_seconds!r}: expected seconds > 0 and at least the "
                f"refresh interval ({refresh_seconds} s)"
            )
        self.source, self.refresh_seconds, self.max_age_seconds = source, refresh_seconds, max_age_seconds
        self.monotonic = monotonic
        self.snapshot: TransactionSnapshot | None = None
        self._read_at: float | None = None  # monotonic time of the last good read
        self._tried_at: float | None = None

    def refresh(self, force: bool = False) -> TransactionSnapshot | None:
        """Read the source again if the view is due (or ``force``); the view in hand afterwards."""
        now = self.monotonic()
        if not force and self._tried_at is not None and now - self._tried_at < self.refresh_seconds:
            return self.snapshot
        self._tried_at = now
        try:
            self.snapshot, self._read_at = self.source.read(), now
        except TmsError as exc:
            if self.snapshot is None:
                log.error("cannot read the transaction state from %s (%s); no earlier view", self.describe(), exc)
            else:
                log.warning(
                    "cannot read the transaction state from %s (%s); keeping the last good view, %.0f s old",
                    self.describe(),
                    exc,
                    self.age_seconds(),
                )
        return self.snapshot

    def age_seconds(self) -> float | None:
        """Seconds since the view in hand was read; None if there is none."""
        return None if self._read_at is None else self.monotonic() - self._read_at

    def stale(self) -> bool:
        """True if there is no view, or it is older than ``max_age_seconds``."""
        age = self.age_seconds()
        return age is None or age > self.max_age_seconds

    def describe(self) -> str:
        return self.source.description

    def close(self) -> None:
        close = getattr(self.source, "close", None)
        if close is not None:
            close()
