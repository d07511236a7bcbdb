"""The transaction server's durable state in HBase (``<prefix>_txstate``): an edit log and snapshots.

Row layout (one column family ``d``):

    b"e" + sequence u64   d:e  the edits of one server operation (count u32, then (length u32, edit)*)
    b"s" + sequence u64   d:s  a snapshot in Tephra's format (version 4), covering edits <= sequence

Log rows are appended with checkAndPut-if-absent at the next sequence, which also **fences**: a second
server that recovered the same log and appended first makes every later append of the old one fail,
so two servers can never both acknowledge. Recovery = latest snapshot + the log rows after it.
Anyone can rebuild the state this way without the server (the sweeper, ``tms-admin tx snapshot``).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Sequence

from tms_hbase.errors import CorruptData, Fenced, HBaseUnavailable, TmsError
from tms_hbase.model.tables import FAMILY
from tms_hbase.storage.hbase import Table
from tms_hbase.tx.snapshot import TransactionSnapshot, decode_snapshot, encode_snapshot
from tms_hbase.txserver.edits import Edit, decode_edit, encode_edit
from tms_hbase.txserver.manager import TransactionManager

log = logging.getLogger(__name__)

EDIT_COLUMN = f"{FAMILY}:e".encode()
SNAPSHOT_COLUMN = f"{FAMILY}:s".encode()
_SEQ = struct.Struct(">Q")
_U32 = struct.Struct(">I")
KEEP_SNAPSHOTS = 3


def _key(kind: bytes, sequence: int) -> bytes:
    return kind + _SEQ.pack(sequence)


def pack_edits(edits: Sequence[Edit]) -> bytes:
    parts = [_U32.pack(len(edits))]
    for edit in edits:
        data = encode_edit(edit)
        parts += [_U32.pack(len(data)), data]
    return b"".join(parts)


def unpack_edits(data: bytes) -> list[Edit]:
    edits: list[Edit] = []
    try:
        (count,) = _U32.unpack_from(data)
        offset = 4
        for _ in range(count):
            (size,) = _U32.unpack_from(data, offset)
            edits.append(decode_edit(data[offset + 4 : offset + 4 + size]))
            offset += 4 + size
    except struct.error as exc:
        raise CorruptData(f"truncated transaction edit log row: {exc}") from None
    if offset != len(data):
        raise CorruptData("transaction edit log row has trailing bytes")
    return edits


class StateStore:
    """Reads and appends the transaction state of one table prefix."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.next_sequence = 1
        # Log rows whose append raised, by sequence: the gateway's own HBase client may still write one
        # (it retries for hbase.client.operation.timeout), after this server has read the log again.
        self._unsure: dict[int, bytes] = {}

    def recover(self) -> TransactionManager:
        """Latest snapshot plus every logged edit after it; remembers where the log continues."""
        manager = TransactionManager()
        covered = 0
        latest = self._latest_snapshot()
        if latest is not None:
            covered, snapshot = latest
            manager.restore(snapshot)
        last = covered
        replayed = 0
        for sequence, edits in self._log_after(covered):
            if sequence != last + 1:
                raise CorruptData(f"transaction edit log jumps from {last} to {sequence}")
            for edit in edits:
                manager.apply(edit)
                replayed += 1
            last = sequence
        self.next_sequence = last + 1
        log.info("recovered transaction state: snapshot at %d, %d edits replayed, log at %d", covered, replayed, last)
        return manager

    def append(self, edits: Iterable[Edit]) -> None:
        """Durably append one operation's edits; Fenced if another server got there first."""
        edits = list(edits)
        if not edits:
            return
        sequence, data = self.next_sequence, pack_edits(edits)
        key = _key(b"e", sequence)
        try:
            written = self.table.put_if_absent(key, EDIT_COLUMN, data)
        except TmsError:
            self._unsure[sequence] = data
            raise
        if not written:
            if (
                sequence in self._unsure
                and self.table.get(key, [EDIT_COLUMN]).get(EDIT_COLUMN) == self._unsure[sequence]
            ):
                # This server's own append that failed, written late (a region server crashed under it):
                # not another server. The caller reads the log again, that row included, and carries on.
                raise HBaseUnavailable(
                    f"transaction edit log row {sequence}: an earlier append of this server landed late"
                )
            raise Fenced(f"transaction edit log row {sequence} was written by another server")
        self._unsure = {s: d for s, d in self._unsure.items() if s > sequence}
        self.next_sequence += 1

    def write_snapshot(self, snapshot: TransactionSnapshot) -> int:
        """Store a snapshot covering the log so far, then drop the log rows and old snapshots it replaces."""
        covered = self.next_sequence - 1
        self.table.put(_key(b"s", covered), {SNAPSHOT_COLUMN: encode_snapshot(snapshot)})
        old_snapshots = [k for k, _ in self._scan(b"s", 0)][:-KEEP_SNAPSHOTS]
        old_edits = [k for k, _ in self._scan(b"e", 0, stop=covered + 1)]
        self.table.delete_many(old_snapshots + old_edits)
        return covered

    def latest_snapshot(self) -> TransactionSnapshot | None:
        latest = self._latest_snapshot()
        return None if latest is None else latest[1]

    def _latest_snapshot(self) -> tuple[int, TransactionSnapshot] | None:
        row = self.table.last_row(b"s")
        if row is None:
            return None
        key, data = row
        return _SEQ.unpack_from(key, 1)[0], decode_snapshot(data[SNAPSHOT_COLUMN])

    def _log_after(self, covered: int) -> Iterable[tuple[int, list[Edit]]]:
        for key, data in self._scan(b"e", covered + 1):
            yield _SEQ.unpack_from(key, 1)[0], unpack_edits(data[EDIT_COLUMN])

    def _scan(self, kind: bytes, start: int, stop: int | None = None) -> list[tuple[bytes, dict]]:
        end = _key(kind, stop) if stop is not None else kind + b"\xff" * 9
        return self.table.scan(_key(kind, start), end)
