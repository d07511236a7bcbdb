"""A minimal TransactionAware HBase table: cells written at the transaction's write pointer as their
version, read back with the transaction's visibility (Tephra's TransactionAwareHTable, in small)."""

from __future__ import annotations

from collections.abc import Collection

from ..errors import TmsError
from ..storage import Table
from .transaction import Transaction

MAX_VERSIONS = 100


class TransactionalTable:
    """Puts are buffered and written at commit with timestamp = write pointer; the change set is the
    rows written (conflicts are per row). A rollback after persisting cannot delete one exact version
    through Thrift1, so it reports failure and the transaction is invalidated instead (never visible)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.tx: Transaction | None = None
        self._writes: dict[bytes, dict[bytes, bytes]] = {}
        self._persisted = False

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
        for value, version in self.table.get_versions(row, column, MAX_VERSIONS):  # newest first
            if tx.is_visible(version):
                return value
        return None

    def start_tx(self, tx: Transaction) -> None:
        self.tx, self._writes, self._persisted = tx, {}, False

    def update_tx(self, tx: Transaction) -> None:
        self.tx = tx

    def get_tx_changes(self) -> Collection[bytes]:
        return [self.table.name.encode() + b"/" + row for row in self._writes]

    def commit_tx(self) -> bool:
        tx = self._running()
        if self._writes:
            self.table.put_many(self._writes.items(), timestamp=tx.write_pointer)
            self._persisted = True
        return True

    def post_tx_commit(self) -> None:
        self.tx, self._writes = None, {}

    def rollback_tx(self) -> bool:
        clean = not self._persisted
        self.tx, self._writes, self._persisted = None, {}, False
        return clean

    def _running(self) -> Transaction:
        if self.tx is None:
            raise TmsError(f"{self.transaction_aware_name}: no transaction is running")
        return self.tx
