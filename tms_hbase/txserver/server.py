"""The transaction server: Tephra's TTransactionServer Thrift service (framed, binary) over a
TransactionManager whose every change is in the HBase edit log before it is answered."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.server import TThreadedServer
from thriftpy2.thrift import TProcessor
from thriftpy2.transport import TFramedTransportFactory

from tms_hbase.errors import Fenced, InvalidTruncateTime, TmsError, TransactionConflict, TransactionNotInProgress
from tms_hbase.model.clock import now_ms
from tms_hbase.tx.codec import from_thrift, load_tephra_thrift, to_string_binary, to_thrift
from tms_hbase.tx.snapshot import encode_snapshot
from tms_hbase.txserver.listener import ExclusiveServerSocket
from tms_hbase.txserver.manager import TransactionManager
from tms_hbase.txserver.state_store import StateStore

log = logging.getLogger(__name__)
T = TypeVar("T")


class DurableManager:
    """Serialises operations on one TransactionManager and logs their edits to HBase first.

    If an append fails, memory is ahead of the log: the state is rebuilt from HBase before the next
    operation, so nothing unlogged is ever acknowledged or acted on.
    """

    def __init__(self, store: StateStore, clock: Callable[[], int] = now_ms, short_timeout: int = 30) -> None:
        self.store = store
        self.clock = clock
        self.short_timeout = short_timeout
        self.lock = threading.RLock()
        self.manager: TransactionManager = store.recover()
        self._stale = False
        self.fenced = threading.Event()
        self.run(lambda m: m.initialize(self.clock()))  # first start: both pointers from the clock

    def run(self, operation: Callable[[TransactionManager], T]) -> T:
        with self.lock:
            if self.fenced.is_set():
                raise Fenced("another transaction server took over the edit log; this one has stopped serving")
            if self._stale:
                self.manager = self.store.recover()
                self._stale = False
            try:
                result = operation(self.manager)
            finally:
                edits = self.manager.drain_edits()
                if edits:
                    try:
                        self.store.append(edits)
                    except Fenced:
                        self.fenced.set()  # never take the log back: that would fence the newer server
                        raise
                    except BaseException:
                        self._stale = True
                        raise
            return result

    def cleanup(self) -> list[int]:
        """Invalidate transactions past their timeout (Tephra's cleanup thread)."""
        return self.run(lambda m: m.timeout_expired(self.clock()))

    def take_snapshot(self) -> int:
        """Write a snapshot of the state to HBase and prune the log it covers."""
        with self.lock:
            return self.store.write_snapshot(self.manager.snapshot(self.clock()))


class TephraHandler:
    """The methods of Tephra's Thrift service, named as in its IDL."""

    def __init__(self, durable: DurableManager) -> None:
        self.d = durable
        self.t = load_tephra_thrift()

    def _call(self, operation: Callable[[TransactionManager], Any]) -> Any:
        try:
            return self.d.run(operation)
        except TransactionConflict as e:
            key = to_string_binary(e.conflicting_key or b"")  # as Tephra renders a ChangeId
            raise self.t.TTransactionConflictException(e.tx_id, key, e.conflicting_client or "unknown") from None
        except TransactionNotInProgress as e:
            raise self.t.TTransactionNotInProgressException(str(e)) from None
        except InvalidTruncateTime as e:
            raise self.t.TInvalidTruncateTimeException(str(e)) from None
        except TmsError as e:
            log.error("transaction operation failed: %s", e)
            raise self.t.TGenericException(str(e), type(e).__name__) from None

    def _client_id(self, client_id: str | None) -> str:
        if client_id is None:
            raise self.t.TGenericException("clientId must not be null", "java.lang.IllegalArgumentException")
        return client_id

    def _start_short(self, timeout: int | None, client_id: str | None) -> Any:
        seconds = self.d.short_timeout if timeout is None else timeout
        return to_thrift(self._call(lambda m: m.start_short(self.d.clock(), seconds, client_id)))

    def startShort(self) -> Any:
        return self._start_short(None, None)

    def startShortTimeout(self, timeout: int) -> Any:
        return self._start_short(timeout, None)

    def startShortWithTimeout(self, timeout: int) -> Any:
        return self._start_short(timeout, None)

    def startShortClientId(self, clientId: str) -> Any:
        return self._start_short(None, self._client_id(clientId))

    def startShortWithClientIdAndTimeOut(self, clientId: str, timeout: int) -> Any:
        return self._start_short(timeout, self._client_id(clientId))

    def startLong(self) -> Any:
        return to_thrift(self._call(lambda m: m.start_long(self.d.clock())))

    def startLongClientId(self, clientId: str) -> Any:
        client_id = self._client_id(clientId)
        return to_thrift(self._call(lambda m: m.start_long(self.d.clock(), client_id)))

    def canCommitOrThrow(self, tx: int, changes: set[bytes]) -> None:
        self._call(lambda m: m.can_commit(tx, set(changes or ())))

    def canCommitTx(self, tx: Any, changes: set[bytes]) -> Any:
        try:
            self.canCommitOrThrow(from_thrift(tx).tx_id, changes)
        except self.t.TTransactionConflictException:
            return self.t.TBoolean(False)
        return self.t.TBoolean(True)

    def commitOrThrow(self, tx: int, wp: int) -> None:
        self._call(lambda m: m.commit(tx, wp))

    def commitTx(self, tx: Any) -> Any:
        transaction = from_thrift(tx)
        try:
            self.commitOrThrow(transaction.tx_id, transaction.write_pointer)
        except self.t.TTransactionConflictException:
            return self.t.TBoolean(False)
        return self.t.TBoolean(True)

    def abortTx(self, tx: Any) -> None:
        transaction = from_thrift(tx)
        self._call(lambda m: m.abort(transaction))

    def invalidateTx(self, tx: int) -> bool:
        return self._call(lambda m: m.invalidate(tx))

    def checkpoint(self, tx: Any) -> Any:
        transaction = from_thrift(tx)
        return to_thrift(self._call(lambda m: m.checkpoint(transaction, self.d.clock())))

    def getSnapshot(self) -> bytes:
        with self.d.lock:
            return encode_snapshot(self.d.manager.snapshot(self.d.clock()))

    def resetState(self) -> None:
        self._call(lambda m: m.reset())  # as Tephra: pointers back to 0

    def status(self) -> str:
        return self._call(lambda m: m.status())

    def truncateInvalidTx(self, txns: set[int]) -> Any:
        return self.t.TBoolean(self._call(lambda m: m.truncate_invalid(set(txns or ()))))

    def truncateInvalidTxBefore(self, time: int) -> Any:
        return self.t.TBoolean(self._call(lambda m: m.truncate_invalid_before(time)))

    def invalidTxSize(self) -> int:
        return self._call(lambda m: m.invalid_size())

    def pruneNow(self) -> None:
        """Tephra runs its prune plugins here; ours has none yet (pruning will follow the sweeper's bounds)."""


class TransactionServer:
    """Serves Tephra's protocol on a listening socket and runs the cleanup and snapshot timers.

    The socket (:func:`listener.listen`) is bound before ``durable`` recovers the edit log, so a
    server that cannot serve never claims the log from one that can.
    """

    def __init__(
        self,
        durable: DurableManager,
        listener: ExclusiveServerSocket,
        *,
        cleanup_interval: float = 10.0,
        snapshot_interval: float = 60.0,
    ) -> None:
        self.durable = durable
        self.listener = listener
        self.cleanup_interval, self.snapshot_interval = cleanup_interval, snapshot_interval
        self.stopped = threading.Event()
        self._server = TThreadedServer(
            TProcessor(load_tephra_thrift().TTransactionServer, TephraHandler(durable)),
            listener,
            itrans_factory=TFramedTransportFactory(),
            iprot_factory=TBinaryProtocolFactory(),
        )

    def serve(self) -> None:
        """Serve until :meth:`stop`; then take a last snapshot."""
        threading.Thread(target=self._server.serve, name="tx-thrift", daemon=True).start()
        log.info("transaction server listening on %s", self.listener.address)
        next_snapshot = self.durable.clock() + self.snapshot_interval * 1000
        while not self.stopped.wait(self.cleanup_interval):
            if self.durable.fenced.is_set():
                log.error("another transaction server took over the edit log; stopping")
                break
            try:
                expired = self.durable.cleanup()
                if expired:
                    log.info("invalidated timed-out transactions %s", expired)
                if self.durable.clock() >= next_snapshot:
                    log.info("snapshot written, covering the edit log to row %d", self.durable.take_snapshot())
                    next_snapshot = self.durable.clock() + self.snapshot_interval * 1000
            except TmsError as e:
                log.error("transaction server housekeeping failed: %s", e)
        self._server.close()
        if self.durable.fenced.is_set():
            return
        try:
            self.durable.take_snapshot()
        except TmsError as e:
            log.error("final snapshot failed (the edit log still has everything): %s", e)
        log.info("transaction server stopped")

    def stop(self) -> None:
        self.stopped.set()
