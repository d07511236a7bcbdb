"""Committed-only reading: the transaction state a subscription judges transactional rows by.

A subscription delivers committed messages only (isolation ``"committed"``, the default; Kafka's
``isolation.level=read_committed``). Each row is judged as ``fetch(transaction=...)`` judges it
(:mod:`tms_hbase.fetch.reader`): no write pointer → delivered; rolled back (pointer < 0) or invalid → skipped;
visible (committed) → delivered; anything else (in progress, or above the view's read pointer) → the read
stops there, in order, until the transaction ends. ``"uncommitted"`` reads every row as stored, rolled-back
ones included, as a fetch without a transaction does.

:class:`CommittedReads` (one per client, shared by its consumers) is that view, read from:

1. the transaction server, when one is configured for the client (``tx_server``, else ``$TMS_TX_SERVER``):
   its state as ``getSnapshot`` returns it (read-only: no transaction is started);
2. else, and while that server cannot be reached, the state it keeps in HBase (the latest snapshot plus the
   edit log after it), as the sweeper reads it;
3. with no server configured and no transaction state in HBase (no transaction ever started on this
   installation), the write pointers belong to no transaction system: the application makes them itself
   (``write_pointer_now()``) and publishing the row is its commit, so a row counts as committed once it is
   published; a rolled-back row is still skipped;
4. with a server configured that cannot be reached and no state in HBase, the state is unknown: every
   transactional row is held as in progress (a warning is logged), never delivered; rows without a pointer
   are delivered.

Freshness: an answer "committed" or "invalid" is final, so a view keeps giving those; a pointer the view
shows in progress makes it read again once it is :data:`REFRESH_SECONDS` old (so a transaction that
commits is delivered within that, or the consumer's next poll), and any view is read again once it is
:data:`MAX_AGE_SECONDS` old. A topic without transactional rows never reads the state at all.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from tms_hbase.config import TX_ENV
from tms_hbase.errors import TmsError
from tms_hbase.isolation.fate import reader_view
from tms_hbase.model.clock import now_ms
from tms_hbase.model.retry import Retry
from tms_hbase.model.transaction import ALL_VISIBLE_LATEST, LONG_MIN, NO_TX_IN_PROGRESS, Transaction
from tms_hbase.runtime import green

if TYPE_CHECKING:  # made on first use: `import tms_hbase` does not load the Thrift client
    from tms_hbase.storage.connection import DeadlineSocket
    from tms_hbase.storage.hbase import Table
    from tms_hbase.tx.client import TransactionClient

log = logging.getLogger(__name__)

REFRESH_SECONDS = 0.1  # a view showing a pointer in progress is read again once this old
MAX_AGE_SECONDS = 5.0  # any view is read again once this old
SERVER_RETRY_SECONDS = 5.0  # after the server could not be reached, HBase's state is used this long
SERVER_TIMEOUT_SECONDS = 2.0  # the longest a read of the server's state may take

NOTHING_COMMITTED = Transaction(0, LONG_MIN, (), (), NO_TX_IN_PROGRESS)
"""The view when the state is unknown: no write pointer is visible, none invalid (every one is held)."""


class CommittedReads:
    """The transaction state committed-only readers judge rows by (see the module's docstring); thread-safe.

    ``txstate`` is the installation's transaction-state table, ``tx_server`` the transaction server's
    address (None: ``$TMS_TX_SERVER`` if set, else no server). Passed to the reader as its view: it answers
    :meth:`is_invalid` and :meth:`is_visible` as a :class:`Transaction` does."""

    def __init__(
        self,
        txstate: Table,
        tx_server: str | None = None,
        *,
        timeout_seconds: float = 10.0,
        socket_class: type[DeadlineSocket] | None = None,
    ) -> None:
        import os

        self._txstate = txstate
        self._address = tx_server or os.environ.get(TX_ENV) or None
        self._timeout = min(timeout_seconds, SERVER_TIMEOUT_SECONDS)
        self._server: TransactionClient | None = None
        self._socket_class = socket_class  # the storage's (one waiting on the event loop under asyncio)
        self._lock = green.lock()  # held while the state is read (HBase, the server)
        self._view: Transaction | None = None
        self._read_at = float("-inf")  # monotonic
        self._server_failed_at = float("-inf")
        self.source = ""
        """Where the view in hand came from (for logs and diagnostics)."""

    def view(self) -> Transaction:
        """The state read now, as a read-only Transaction: for a planner that hands one fixed view to many
        readers (a Spark stream's micro-batches)."""
        with self._lock:
            self._refresh()
            view = self._view
        assert view is not None
        return view

    def is_invalid(self, pointer: int) -> bool:
        return self._current(pointer).is_invalid(pointer)

    def is_visible(self, pointer: int) -> bool:
        return self._current(pointer).is_visible(pointer)

    def _current(self, pointer: int) -> Transaction:
        """The view to judge ``pointer`` by, read again when due."""
        view, read_at = self._view, self._read_at
        age = time.monotonic() - read_at
        if (
            view is None
            or age >= MAX_AGE_SECONDS
            or (age >= REFRESH_SECONDS and not view.is_visible(pointer) and not view.is_invalid(pointer))
        ):
            with self._lock:
                if self._read_at == read_at:  # (else another thread read it meanwhile)
                    self._refresh()
                view = self._view
        assert view is not None
        return view

    def _refresh(self) -> None:
        now = time.monotonic()
        if self._address is not None and now - self._server_failed_at >= SERVER_RETRY_SECONDS:
            try:
                self._use(reader_view(self._client().snapshot()), f"transaction server {self._address}")
                return
            except TmsError as exc:
                self._server_failed_at = now
                log.warning(
                    "committed-only reads: transaction server %s not reachable (%s); using the state in HBase",
                    self._address,
                    exc,
                )
        from tms_hbase.txserver.state_store import StateStore

        try:
            state = StateStore(self._txstate).recover().snapshot(now_ms())
        except TmsError as exc:
            if self._view is None:
                self._use(NOTHING_COMMITTED, "nowhere")
                then = self._held()
            else:  # the view in hand stays safe: what it shows in progress stays held
                self._read_at = time.monotonic()
                then = f"the state read before from {self.source} decides meanwhile"
            log.warning("committed-only reads: transaction state not read from HBase (%s); %s", exc, then)
            return
        if state.write_pointer > 0:
            self._use(reader_view(state), f"table {self._txstate.name}")
        elif self._address is None:
            self._use(ALL_VISIBLE_LATEST, "no transaction system (write pointers made by the application)")
        else:
            self._use(NOTHING_COMMITTED, "nowhere")
            log.warning(
                "committed-only reads: transaction server %s not reachable and no transaction state in %s; %s",
                self._address,
                self._txstate.name,
                self._held(),
            )

    def _held(self) -> str:
        return "transactional messages are held until it can be read"

    def _use(self, view: Transaction, source: str) -> None:
        self._view, self._read_at, self.source = view, time.monotonic(), source

    def _client(self) -> TransactionClient:
        if self._server is None:
            from tms_hbase.tx.client import TransactionClient

            self._server = TransactionClient(
                self._address, timeout_seconds=self._timeout, retry=Retry.never(), socket_class=self._socket_class
            )
        return self._server

    def close(self) -> None:
        """Close the connection to the transaction server, if one was made."""
        if self._server is not None:
            self._server.close()
