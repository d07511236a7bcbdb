"""The sweeper's shared state, in the transaction-state table next to the transaction log:

    b"l" + region key   d:l   lease: JSON {"owner", "expires"}  (compare-and-set; expired = free)
    b"r" + region key   d:r   record: JSON {"checkpoint", "prune_bound", "read_pointer", "completed", "rows"}

Leases let several sweeper processes share the regions without sweeping one twice at once; records
make a region's sweep resumable (the checkpoint) and carry the invalid-list bound it has applied.
It lives in the library because the sweeper writes it and the admin CLI (invalid-list pruning,
``tms-admin sweeper state``) reads it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from tms_hbase.errors import CorruptData
from tms_hbase.model.tables import FAMILY
from tms_hbase.storage.hbase import Region, Table

LEASE_COLUMN = f"{FAMILY}:l".encode()
RECORD_COLUMN = f"{FAMILY}:r".encode()


@dataclass
class RegionRecord:
    """What the last sweeps of a region left behind."""

    checkpoint: str | None = None  # hex of the last row key handled by an unfinished sweep
    prune_bound: int | None = None  # invalid ids <= this were all applied to the region's rows
    read_pointer: int | None = None  # of the transaction state that sweep used
    completed: int | None = None  # ms when a sweep of the whole region last finished
    rows: int = 0  # rows seen by that sweep

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> RegionRecord:
        try:
            return cls(**json.loads(data))
        except (ValueError, TypeError) as exc:
            raise CorruptData(f"corrupt sweeper region record: {exc}") from None


class SweepState:
    """Leases and region records of one installation (in its transaction-state table)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def acquire(self, region: Region, owner: str, seconds: float, now_ms: int) -> bytes | None:
        """Take the region's lease if it is free or expired; the lease value, or None if another holds it."""
        current = self.table.get_cell(b"l" + region.key, LEASE_COLUMN)
        if current is not None:
            lease = json.loads(current)
            if lease["owner"] != owner and lease["expires"] > now_ms:
                return None
        return self.renew(region, current, owner, seconds, now_ms)

    def renew(self, region: Region, lease: bytes | None, owner: str, seconds: float, now_ms: int) -> bytes | None:
        """Extend a lease we hold (compare-and-set on its exact value); None if it was lost."""
        value = json.dumps({"owner": owner, "expires": now_ms + int(seconds * 1000)}).encode()
        return value if self.table.compare_and_set(b"l" + region.key, LEASE_COLUMN, lease, value) else None

    def release(self, region: Region, lease: bytes) -> None:
        """Give the lease back (it expires at once) unless someone took it over meanwhile."""
        owner = json.loads(lease)["owner"]
        free = json.dumps({"owner": owner, "expires": 0}).encode()
        self.table.compare_and_set(b"l" + region.key, LEASE_COLUMN, lease, free)

    def record(self, region: Region) -> RegionRecord:
        data = self.table.get_cell(b"r" + region.key, RECORD_COLUMN)
        return RegionRecord() if data is None else RegionRecord.decode(data)

    def save(self, region: Region, record: RegionRecord) -> None:
        self.table.put(b"r" + region.key, {RECORD_COLUMN: record.encode()})

    def records(self, table: str) -> dict[bytes, RegionRecord]:
        """Every region record of ``table``, by region start key."""
        prefix = b"r" + table.encode() + b"\0"
        rows = self.table.scan(prefix=prefix, columns=[RECORD_COLUMN])
        return {key[len(prefix) :]: RegionRecord.decode(data[RECORD_COLUMN]) for key, data in rows}
