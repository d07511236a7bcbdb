"""A client of Tephra's transaction service (ours, or a real Tephra server): framed transport, binary protocol."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.thrift import TException
from thriftpy2.transport import TFramedTransportFactory

from tms_hbase.config import DEFAULT_TX_SERVER, TX_ENV, check_timeout, thrift_address
from tms_hbase.errors import (
    InvalidArgument,
    InvalidTruncateTime,
    TmsError,
    TransactionConflict,
    TransactionNotInProgress,
    TransactionServiceUnavailable,
)
from tms_hbase.model.retry import Retry
from tms_hbase.model.transaction import Transaction
from tms_hbase.runtime import green
from tms_hbase.storage.connection import CheckedClient, DeadlineSocket, NotThrift
from tms_hbase.tx.codec import from_thrift, load_tephra_thrift, to_bytes_binary, to_thrift
from tms_hbase.tx.snapshot import TransactionSnapshot, decode_snapshot

T = TypeVar("T")


class TransactionClient:
    """Start, commit, abort and administer transactions; every call is one RPC (thread-safe).

    ``address`` defaults to ``$TMS_TX_SERVER`` or 127.0.0.1:15165 (Tephra's port).
    ``timeout_seconds`` is a deadline for each call (connecting and
    retries included), however slowly the server answers. Calls that only read (status, snapshot,
    invalid-list size) are retried as the ``retry`` policy says when the server cannot be reached;
    the others are not, as their answer may be lost after the server acted on them.
    ``socket_class``: the connection's socket (default a blocking one); the asyncio client's core passes its
    storage's (one that waits on the event loop), so that a slow transaction server never blocks the loop.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        timeout_seconds: float = 10.0,
        retry: Retry | None = None,
        socket_class: type[DeadlineSocket] | None = None,
    ) -> None:
        self.host, self.port = thrift_address(address or os.environ.get(TX_ENV) or DEFAULT_TX_SERVER)
        self.timeout = check_timeout(timeout_seconds)
        self.retry = retry or Retry()
        self._thrift = load_tephra_thrift()
        self._lock = green.lock()  # held across the call: a greenlet lock when made inside the asyncio bridge
        self._client: Any = None
        self._socket: DeadlineSocket | None = None
        self._socket_class = socket_class or DeadlineSocket

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __enter__(self) -> TransactionClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # -- transactions -------------------------------------------------------------------------

    def start_short(self, timeout_seconds: int | None = None, client_id: str | None = None) -> Transaction:
        """Start a short transaction that times out after ``timeout_seconds`` (the server's default if None)."""
        if timeout_seconds is not None and (
            isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, int) or timeout_seconds <= 0
        ):
            raise InvalidArgument(f"bad transaction timeout {timeout_seconds!r}: expected seconds > 0")
        if client_id is not None and timeout_seconds is not None:
            return from_thrift(self._call(lambda c: c.startShortWithClientIdAndTimeOut(client_id, timeout_seconds)))
        if client_id is not None:
            return from_thrift(self._call(lambda c: c.startShortClientId(client_id)))
        if timeout_seconds is not None:
            return from_thrift(self._call(lambda c: c.startShortWithTimeout(timeout_seconds)))
        return from_thrift(self._call(lambda c: c.startShort()))

    def start_long(self, client_id: str | None = None) -> Transaction:
        """Start a long transaction (aborting it invalidates it)."""
        if client_id is not None:
            return from_thrift(self._call(lambda c: c.startLongClientId(client_id)))
        return from_thrift(self._call(lambda c: c.startLong()))

    def can_commit(self, tx: Transaction, changes: Iterable[bytes]) -> None:
        """Check the change set for conflicts (TransactionConflict) and record it for commit."""
        self._call(lambda c: c.canCommitOrThrow(tx.tx_id, set(changes)))

    def commit(self, tx: Transaction) -> None:
        """Make the transaction's writes visible (TransactionConflict, TransactionNotInProgress)."""
        self._call(lambda c: c.commitOrThrow(tx.tx_id, tx.write_pointer))

    def abort(self, tx: Transaction) -> None:
        """Abort: a short transaction is forgotten, a long one becomes invalid."""
        self._call(lambda c: c.abortTx(to_thrift(tx)))

    def invalidate(self, tx_id: int) -> bool:
        """Put a transaction on the invalid list; True if it was in progress or committing."""
        return self._call(lambda c: c.invalidateTx(tx_id))

    def checkpoint(self, tx: Transaction) -> Transaction:
        """A new write pointer for the same transaction (its earlier writes stay its own)."""
        return from_thrift(self._call(lambda c: c.checkpoint(to_thrift(tx))))

    # -- administration -----------------------------------------------------------------------

    def status(self) -> str:
        return self._call(lambda c: c.status(), idempotent=True)

    def snapshot(self) -> TransactionSnapshot:
        """The server's current state, decoded."""
        return decode_snapshot(self.snapshot_bytes())

    def snapshot_bytes(self) -> bytes:
        """The server's current state in Tephra's snapshot format (version 4), as it sent it."""
        return self._call(lambda c: c.getSnapshot(), idempotent=True)

    def invalid_size(self) -> int:
        return self._call(lambda c: c.invalidTxSize(), idempotent=True)

    def truncate_invalid(self, tx_ids: Iterable[int]) -> bool:
        """Remove these ids from the invalid list (only once their data is gone: see tx prune)."""
        return self._call(lambda c: c.truncateInvalidTx(set(tx_ids))).value

    def truncate_invalid_before(self, time_ms: int) -> bool:
        """Remove invalid transactions started before ``time_ms`` (InvalidTruncateTime if one still runs)."""
        return self._call(lambda c: c.truncateInvalidTxBefore(time_ms)).value

    def reset(self) -> None:
        """Forget every transaction (tests and emergencies only)."""
        self._call(lambda c: c.resetState())

    # -- plumbing -----------------------------------------------------------------------------

    def _call(self, call: Callable[[Any], T], *, idempotent: bool = False) -> T:
        """One RPC by one deadline; an ``idempotent`` one retried when the server cannot be reached."""
        deadline = time.monotonic() + self.timeout
        failures = 0
        while True:
            try:
                return self._call_once(call, deadline)
            except TransactionServiceUnavailable as exc:
                failures += 1
                what = f"call to the transaction server at {self.address}"
                if not idempotent or not self.retry.pause(exc, failures, what=what, deadline=deadline):
                    raise

    def _call_once(self, call: Callable[[Any], T], deadline: float) -> T:
        thrift = self._thrift
        with self._lock:
            try:
                sock = self._socket
                if self._client is None or sock is None:
                    sock = self._socket = self._socket_class(self.host, self.port)
                    sock.deadline = deadline
                    transport = TFramedTransportFactory().get_transport(sock)
                    transport.open()
                    protocol = TBinaryProtocolFactory().get_protocol(transport)
                    self._client = CheckedClient(thrift.TTransactionServer, protocol)
                sock.deadline = deadline
                return call(self._client)
            except thrift.TTransactionConflictException as e:
                key = to_bytes_binary(e.conflictingKey or "")  # Tephra sends the key as toStringBinary text
                raise TransactionConflict(e.transactionId, key, e.conflictingClient) from None
            except thrift.TTransactionNotInProgressException as e:
                raise TransactionNotInProgress(e.message) from None
            except thrift.TInvalidTruncateTimeException as e:
                raise InvalidTruncateTime(e.message) from None
            except (thrift.TGenericException, thrift.TTransactionCouldNotTakeSnapshotException) as e:
                raise TmsError(f"transaction server error: {e.message}") from None
            except (TimeoutError, TException, OSError, EOFError, NotThrift) as e:
                self._drop()
                why = _reason(e)
                raise TransactionServiceUnavailable(
                    f"transaction server at {self.address} failed or did not answer within {self.timeout}s ({why})"
                ) from None

    def _drop(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None


def _reason(error: BaseException) -> str:
    """Why a call failed, in words: a Thrift exception's message (its ``str`` is a repr), else its text."""
    message = getattr(error, "message", None)
    return message if isinstance(message, str) and message else str(error) or type(error).__name__
