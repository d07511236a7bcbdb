"""The sweeper's shared state, in the transaction-state table next to the transaction log:

    b"l" + region key   d:l   lease: JSON {"owner", "expires", "end"}  (compare-and-set; expired = free)
    b"r" + region key   d:r   record: JSON {"checkpoint", "prune_bound", "read_pointer", "completed", "rows"}

Leases let several sweeper processes share the regions without sweeping one twice at once: a lease covers
its region's key range as it was when taken (``end``: hex of the end key, "" = the table's end), so after a
split the daughter that got a new start key is not leased by another sweeper while the parent's lease holder
still scans it; records
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
        """Take the region's lease if it is free or expired and no other owner's live lease covers part of the
        region's key range (a lease taken before a split covers both daughters); the lease value, or None."""
        current = self.table.get_cell(b"l" + region.key, LEASE_COLUMN)
        if current is not None and _held(json.loads(current), owner, now_ms):
            return None
        if self._overlapped(region, owner, now_ms):
            return None
        lease = self._write(region, current, owner, now_ms + int(seconds * 1000), region.end.hex())
        if lease is not None and self._overlapped(region, owner, now_ms):
            self.release(region, lease)  # an overlapping lease was taken at the same moment: both step back
            return None
        return lease

    def renew(self, region: Region, lease: bytes, owner: str, seconds: float, now_ms: int) -> bytes | None:
        """Extend a lease we hold (compare-and-set on its exact value); None if it was lost. The lease keeps
        the key range it was taken for (a split meanwhile does not shrink what its holder sweeps)."""
        return self._write(region, lease, owner, now_ms + int(seconds * 1000), json.loads(lease)["end"])

    def release(self, region: Region, lease: bytes) -> None:
        """Give the lease back (it expires at once) unless someone took it over meanwhile."""
        free = json.dumps({**json.loads(lease), "expires": 0}).encode()
        self.table.compare_and_set(b"l" + region.key, LEASE_COLUMN, lease, free)

    def _write(self, region: Region, expected: bytes | None, owner: str, expires: int, end: str) -> bytes | None:
        value = json.dumps({"owner": owner, "expires": expires, "end": end}).encode()
        return value if self.table.compare_and_set(b"l" + region.key, LEASE_COLUMN, expected, value) else None

    def _overlapped(self, region: Region, owner: str, now_ms: int) -> bool:
        """Whether another owner's live lease on another start key of the table covers part of ``region``."""
        prefix = b"l" + region.table.encode() + b"\0"
        for key, data in self.table.scan(prefix=prefix, columns=[LEASE_COLUMN]):
            start, lease = key[len(prefix) :], json.loads(data[LEASE_COLUMN])
            if start == region.start or not _held(lease, owner, now_ms):
                continue  # the region's own lease (checked by the caller), or free
            if _overlap(start, bytes.fromhex(lease["end"]), region.start, region.end):
                return True
        return False

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


def _held(lease: dict, owner: str, now_ms: int) -> bool:
    """Whether a lease is held by another owner right now."""
    return lease["owner"] != owner and lease["expires"] > now_ms


def _overlap(start1: bytes, end1: bytes, start2: bytes, end2: bytes) -> bool:
    """Whether key ranges [start, end) overlap (an end of b"" is the table's end)."""
    return (not end2 or start1 < end2) and (not end1 or start2 < end1)
