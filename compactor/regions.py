"""The sweeper's work units: the regions of a table, asked from HBase at the start of every sweep."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from tms_hbase.connection import HBaseConnection
from tms_hbase.errors import HBaseError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Region:
    """One region: rows from ``start`` (inclusive, b"" = first) to ``end`` (exclusive, b"" = last)."""

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


def list_regions(hbase: HBaseConnection, table: str, attempts: int = 20) -> list[Region]:
    """The table's regions in key order, as HBase has them now (splits and merges included).

    While a split or merge is being assigned, the gateway fails the call ("Internal error processing
    getTableRegions"): that passes within seconds, so it is retried.
    """
    for attempt in range(attempts):
        try:
            infos = hbase.run(f"list regions of {table}", lambda c: c.client.getTableRegions(table.encode()))
            break
        except HBaseError as exc:
            if "Internal error" not in str(exc) or attempt == attempts - 1:
                raise
            log.info("regions of %s are in transition (%s); asking again", table, exc)
            time.sleep(0.5)
    regions = [Region(table, i.startKey or b"", i.endKey or b"", i.name) for i in infos]
    return sorted(regions, key=lambda r: r.start)
