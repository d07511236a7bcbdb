"""A minimal TransactionAware HBase table: cells written at the transaction's write pointer as their
version, read back with the transaction's visibility (Tephra's TransactionAwareHTable, in small).

Rollback after persisting: Tephra deletes the exact cell versions it wrote, which Thrift1 cannot do (a
delete at ``ts`` removes every version up to ``ts`` and masks later puts at ``ts``). Instead the cell is
overwritten at the same version with a rollback marker, which readers skip. So that no user value can
be mistaken for the marker, every stored value carries a one-byte prefix: ``0x00`` + the value, or
the marker ``0x01`` alone. The rolled-back transaction is then aborted, not invalidated, so ordinary
conflicts do not grow the invalid list.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from tms_hbase.errors import CorruptData, TableNotFound, TmsError
from tms_hbase.model.tables import APPLICATION_MAX_VERSIONS
from tms_hbase.model.transaction import Transaction
from tms_hbase.storage.hbase import Table

VALUE_PREFIX = b"\x00"
ROLLED_BACK = b"\x01"


def encode_value(value: bytes) -> bytes:
    """The stored form of a user value (never equal to the rollback marker)."""
    return VALUE_PREFIX + value


def decode_value(stored: bytes, where: str) -> bytes | None:
    """The user value of a stored cell, or None for a rolled-back version; CorruptData otherwise."""
    if stored == ROLLED_BACK:
        return None
    if stored[:1] != VALUE_PREFIX:
        raise CorruptData(f"{where}: not a transactional table value (starts with {stored[:1]!r}, not 0x00 or 0x01)")
    return stored[1:]


class TransactionalTable:
    """Puts are buffered and written at commit with timestamp = write pointer; the change set is the
    rows written (conflicts are per row). A rollback after persisting overwrites those cell versions
    with the rollback marker; if that fails it reports failure, and the transaction is invalidated."""

    def __init__(self, table: Table) -> None:
        """Checks once that ``table`` exists (TableNotFound otherwise), so a missing table is named here
        instead of failing a transaction's persist step and leaving it invalid."""
        if not table.exists():
            raise TableNotFound(table.name)
        self.table = table
        self.tx: Transaction | None = None
        self._writes: dict[bytes, dict[bytes, bytes]] = {}
        self._persisted_at: int | None = None  # the version commit_tx wrote (or tried to write) at

    @property
    def transaction_aware_name(self) -> str:
        return f"transactional table {self.table.name}"

    def put(self, row: bytes, column: bytes, value: bytes) -> None:
        self._running()
        self._writes.setdefault(row, {})[column] = value

    def get(self, row: bytes, column: bytes) -> bytes | None:
        """The newest value visible to the running transaction (its own buffered writes first)."""
        tx = self._running()
        if column in self._writes.get(row, {}):
            return self._writes[row][column]
        for stored, version in self.table.get_versions(row, column, APPLICATION_MAX_VERSIONS):  # newest first
            if tx.is_visible(version):
                value = decode_value(stored, f"{self.table.name} row {row!r} column {column!r} version {version}")
                if value is not None:
                    return value
        return None

    def start_tx(self, tx: Transaction) -> None:
        self.tx, self._writes, self._persisted_at = tx, {}, None

    def update_tx(self, tx: Transaction) -> None:
        self.tx = tx

    def get_tx_changes(self) -> Collection[bytes]:
        return [self.table.name.encode() + b"/" + row for row in self._writes]

    def commit_tx(self) -> bool:
        tx = self._running()
        if self._writes:
            self._persisted_at = tx.write_pointer  # set first: a failed batch may have partly landed
            self._write_all(tx.write_pointer, encode_value)
        return True

    def post_tx_commit(self) -> None:
        self.tx, self._writes, self._persisted_at = None, {}, None

    def rollback_tx(self) -> bool:
        """Overwrite what commit_tx wrote with the rollback marker; if that raises (HBaseUnavailable),
        the context invalidates the transaction instead."""
        try:
            if self._persisted_at is not None:
                self._write_all(self._persisted_at, lambda _value: ROLLED_BACK)
        finally:
            self.tx, self._writes, self._persisted_at = None, {}, None
        return True

    def _write_all(self, version: int, stored: Callable[[bytes], bytes]) -> None:
        """Put every buffered cell at ``version``, its stored form given by ``stored(value)``."""
        rows = (
            (row, {column: stored(value) for column, value in cells.items()}) for row, cells in self._writes.items()
        )
        self.table.put_many(rows, timestamp=version)

    def _running(self) -> Transaction:
        if self.tx is None:
            raise TmsError(f"{self.transaction_aware_name}: no transaction is running")
        return self.tx
