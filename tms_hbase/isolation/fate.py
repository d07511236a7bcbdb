"""The fate of a transaction write pointer — committed, in progress or invalid — seen from a snapshot
of the transaction state: a fresh read-only transaction from the server, or the state rebuilt from
HBase (the latest snapshot plus the edit log, what the sweeper uses) when there is no server at hand.

A transaction that aborted cleanly looks committed in Tephra's state (its pointer is below the read
pointer and on no list), because abort is only allowed once every participant has undone its writes.
Whoever reads a fate from a pointer must keep that promise: a participant's record of its write has
to be gone before the transaction aborts (or the transaction is invalidated instead).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from tms_hbase.model.clock import now_ms
from tms_hbase.model.transaction import LONG_MAX, NO_TX_IN_PROGRESS, Transaction

if TYPE_CHECKING:  # the client is only passed in: `import tms_hbase` does not load the Thrift client
    from tms_hbase.storage.hbase import Table
    from tms_hbase.tx.client import TransactionClient
    from tms_hbase.tx.snapshot import TransactionSnapshot


class TxFate(enum.Enum):
    COMMITTED = "committed"
    IN_PROGRESS = "in progress"
    INVALID = "invalid"


def fate(snapshot: Transaction, write_pointer: int) -> TxFate:
    """What ``snapshot`` says about the transaction that wrote at ``write_pointer`` (> 0)."""
    if snapshot.is_invalid(write_pointer):
        return TxFate.INVALID
    if snapshot.is_in_progress(write_pointer) or write_pointer > snapshot.read_pointer:
        return TxFate.IN_PROGRESS
    return TxFate.COMMITTED


def snapshot_from_server(client: TransactionClient) -> Transaction:
    """A read-only view of the server's state now: a short transaction, aborted at once."""
    tx = client.start_short()
    client.abort(tx)
    return tx


def snapshot_from_hbase(txstate: Table) -> Transaction:
    """The same view rebuilt from the transaction state in HBase, without the server (a scan of the
    latest snapshot and the edit log after it). It sees committed transactions only, like a reader."""
    from tms_hbase.txserver.state_store import StateStore

    return reader_view(StateStore(txstate).recover().snapshot(now_ms()))


def reader_view(state: TransactionSnapshot) -> Transaction:
    """A read-only Transaction that sees what ``state`` (the manager's whole state) says is committed."""
    shorts = [wp for wp, entry in state.in_progress.items() if not entry.is_long_running]
    return Transaction(
        state.read_pointer,
        LONG_MAX,  # no transaction of its own: it never sees a pointer as "its own write"
        state.invalid,
        state.in_progress,
        min(shorts, default=NO_TX_IN_PROGRESS),
    )
