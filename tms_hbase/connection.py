"""A pooled, thread-safe connection to the HBase Thrift gateway that turns every failure into a TmsError."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import happybase
import Hbase_thrift  # loaded by happybase's import above
from thriftpy2.thrift import TException
from thriftpy2.transport import TTransportException

from .errors import HBaseError, HBaseUnavailable, TmsError
from .metrics import CLIENT_METRICS

log = logging.getLogger(__name__)
T = TypeVar("T")

# Errors HBase sent as an answer: the connection itself is fine.
_HBASE_ANSWERS = (Hbase_thrift.IOError, Hbase_thrift.IllegalArgument, Hbase_thrift.AlreadyExists)
# Failures of the link itself (as opposed to an answer from HBase): the connection is discarded.
_LINK_ERRORS = (TTransportException, socket.timeout, OSError, EOFError)


def mutation(column: bytes, value: bytes) -> Hbase_thrift.Mutation:
    """A Thrift1 put of one cell, for checkAndPut (which happybase does not wrap)."""
    return Hbase_thrift.Mutation(column=column, value=value)


class HBaseConnection:
    """A pool of happybase connections to one Thrift gateway.

    Each call borrows a connection for one thread; a connection that broke is closed and replaced,
    idempotent calls are retried on a fresh one, and every error comes out as a ``TmsError``.
    Connections idle longer than ``max_idle`` seconds are not reused: the Thrift gateway closes
    idle connections itself (after 60 s by default).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = 10.0,
        pool_size: int = 8,
        retries: int = 2,
        max_idle: float = 45.0,
    ) -> None:
        self.host, self.port = host, port
        self.timeout = timeout
        self.retries = retries
        self.max_idle = max_idle
        self._idle: list[tuple[happybase.Connection, float]] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(pool_size)
        self._closed = False
        self.calls = 0  # HBase calls made through this pool (for tests, benchmarks and metrics)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @contextmanager
    def connection(self, what: str) -> Iterator[happybase.Connection]:
        """Borrow an open connection for ``what`` (used in error messages); errors are wrapped."""
        if self._closed:
            raise TmsError("the connection to HBase has been closed")
        if not self._slots.acquire(timeout=self.timeout):
            err = HBaseUnavailable(f"{what}: no free connection to {self.address} within {self.timeout}s")
            err.timed_out = True
            raise err
        conn = None
        healthy = True
        self.calls += 1
        try:
            conn = self._take()
            yield conn
        except (*_LINK_ERRORS, TException) as exc:
            # an answer from HBase (IOError...) leaves the link usable; anything else may not
            healthy = isinstance(exc, _HBASE_ANSWERS)
            raise self._wrap(what, exc) from exc
        except TmsError:
            raise
        except BaseException:
            # an interrupted call may leave half a response on the socket
            healthy = False
            raise
        finally:
            self._give_back(conn, healthy)
            self._slots.release()

    def run(self, what: str, call: Callable[[happybase.Connection], T], *, idempotent: bool = True) -> T:
        """Run ``call`` on a borrowed connection; retry link failures of idempotent calls."""
        attempts = 1 + (self.retries if idempotent else 0)
        for attempt in range(1, attempts + 1):
            try:
                with self.connection(what) as conn:
                    return call(conn)
            except HBaseUnavailable as exc:
                if attempt == attempts or exc.timed_out:
                    raise
                log.info("retrying %s after a broken connection (%s)", what, exc)
                CLIENT_METRICS.retries.inc()
                time.sleep(0.05 * attempt)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close every idle connection; borrowed ones are closed when given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    def _take(self) -> happybase.Connection:
        stale = []
        conn = None
        with self._lock:
            now = time.monotonic()
            while self._idle:
                candidate, since = self._idle.pop()
                if now - since < self.max_idle:
                    conn = candidate
                    break
                stale.append(candidate)
        for old in stale:
            old.close()
        if conn is not None:
            return conn
        conn = happybase.Connection(self.host, self.port, timeout=int(self.timeout * 1000), autoconnect=False)
        conn.open()
        return conn

    def _give_back(self, conn: happybase.Connection | None, healthy: bool) -> None:
        if conn is None:
            return
        with self._lock:
            if healthy and not self._closed:
                self._idle.append((conn, time.monotonic()))
                return
            # a broken link suggests the others are broken too (gateway restarted, network cut)
            stale, self._idle = [c for c, _ in self._idle], []
        for old in [conn, *stale]:
            old.close()

    def _wrap(self, what: str, exc: BaseException) -> TmsError:
        if isinstance(exc, (socket.timeout, TimeoutError)) or "timed out" in _reason(exc):
            err = HBaseUnavailable(f"{what}: HBase Thrift at {self.address} did not answer within {self.timeout}s")
            err.timed_out = True
            return err
        if isinstance(exc, _LINK_ERRORS):
            return HBaseUnavailable(
                f"{what}: cannot reach HBase Thrift at {self.address} ({_reason(exc)}); is HBase running?"
            )
        if isinstance(exc, _HBASE_ANSWERS):
            return HBaseError(f"{what}: HBase refused the request: {_reason(exc)}")
        if isinstance(exc, TException):
            return HBaseError(f"{what}: Thrift protocol error from {self.address}: {_reason(exc)}")
        return HBaseError(f"{what}: {type(exc).__name__}: {exc}")


def _reason(exc: BaseException) -> str:
    """The first line of an exception's message, decoded (HBase sends whole Java stack traces)."""
    message = getattr(exc, "message", None)
    if message is None:
        try:
            message = str(exc)
        except TypeError:  # thrift exceptions whose message is bytes
            message = repr(exc)
    if isinstance(message, bytes):
        message = message.decode(errors="replace")
    lines = str(message).strip().splitlines()
    return lines[0][:500] if lines else type(exc).__name__
