"""A pooled, thread-safe connection to the HBase Thrift gateway that turns every failure into a TmsError.

Every HBase call runs under a deadline (``timeout`` seconds from its start, or from the start of the
library operation it belongs to, see :meth:`HBaseConnection.operation`), enforced by the socket
itself: each read and write may wait only for the time left, so a gateway that hangs, or trickles
one byte at a time, fails the call when the deadline passes. Answers that are not Thrift (another
service on the port, a bogus length) fail the call at once instead of allocating what they claim.

The gateway may serve the buffered, the framed or the HTTP transport, the binary or the compact protocol, with
or without TLS (:class:`~tms_hbase.config.ThriftTransport`, which must match its settings); the deadlines,
retries, fail-over and errors are the same for each.
"""

from __future__ import annotations

import contextvars
import logging
import math
import re
import socket
import ssl
import struct
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar, cast

from thriftpy2.protocol import TBinaryProtocol
from thriftpy2.protocol.exc import TProtocolException
from thriftpy2.thrift import TClient, TDecodeException, TException, TMessageType
from thriftpy2.transport import TBufferedTransport, TSocket, TTransportException

from tms_hbase.config import PLAIN, ThriftTransport, check_timeout
from tms_hbase.errors import AccessDenied, ClientClosed, HBaseError, HBaseUnavailable, TmsError
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.retry import Retry
from tms_hbase.runtime import green
from tms_hbase.storage import hbase_thrift
from tms_hbase.storage.compact import RowsCompactProtocol
from tms_hbase.storage.framed import FramedChannel
from tms_hbase.storage.http import SERVER_IDLE_SECONDS, HttpChannel, HttpStatus, NotHttp
from tms_hbase.storage.kerberos import Kerberos, KerberosFailure, SaslChannel
from tms_hbase.storage.tls import client_context, handshake_failure

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_READ_BYTES = 256 * 1024 * 1024
"""The most one socket read may ask for. Thrift's buffers grow to the largest single value of an
answer (a cell, a frame) before reading it, so a larger request means the peer announced a value
larger than any HBase cell (``hbase.server.keyvalue.maxsize`` is 10 MB by default, 64 MiB in the
local launcher): garbage, refused before it is read."""

PIPELINE_WINDOW = 64
"""Requests :meth:`CheckedClient.pipeline` writes before it reads their answers: small enough that the
requests and answers of one window fit the sockets' buffers (else both sides could wait to write)."""

READ_BUFFER = 64 * 1024
"""Bytes the Thrift transport asks the socket for at once (thriftpy2's default is 4 KiB): a large
scan's answer then takes a sixteenth of the reads, and of their deadline checks."""


class NotThrift(Exception):
    """The peer's answer is not a Thrift reply this client can read (not a TmsError: it is wrapped)."""


# Errors HBase sent as an answer: the connection itself is fine.
_HBASE_ANSWERS = (hbase_thrift.IOError, hbase_thrift.IllegalArgument, hbase_thrift.AlreadyExists)
# Failures of the link itself (as opposed to an answer from HBase): the connection is discarded.
_LINK_ERRORS = (TTransportException, socket.timeout, OSError, EOFError, NotThrift, NotHttp, HttpStatus, KerberosFailure)
# The one deadline of the library operation running in this context (see HBaseConnection.operation).
_OPERATION_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("tms_deadline", default=None)


def operation_deadline() -> float | None:
    """The deadline (monotonic) of the library operation running in this context (None: none is running)."""
    return _OPERATION_DEADLINE.get()


def time_left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (monotonic; None: no limit), or TimeoutError once it has passed."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out")
    return left


def check_read_size(sz: int) -> None:
    """:class:`NotThrift` for a read larger than :data:`MAX_READ_BYTES` (see there)."""
    if sz > MAX_READ_BYTES:
        raise NotThrift(f"it announced a value of {sz} bytes")


def decoding_failure(exc: Exception) -> NotThrift | None:
    """What a Thrift client reports for ``exc`` raised while reading an answer: :class:`NotThrift` for an
    answer it cannot decode (the decoders raise whatever the bytes provoke: a protocol error, MemoryError
    for an absurd length, RecursionError...); None for an exception the service declares, a
    TApplicationException the server sent, or a socket failure, which pass through unchanged."""
    if isinstance(exc, (TProtocolException, TDecodeException)):
        return NotThrift(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, (TException, OSError, NotThrift)):
        return None
    return NotThrift(f"{type(exc).__name__}: {exc}")


_TIMEVAL = struct.Struct("@ll")  # struct timeval: seconds, microseconds


def _kernel_timeout(sock: socket.socket, seconds: float) -> None:
    """Bound each blocking read and write of ``sock`` by ``seconds`` (0: no bound); one that runs out
    raises BlockingIOError. Never rounded down to 0, which would mean no bound."""
    whole = int(seconds)
    micros = max(1, int((seconds - whole) * 1e6)) if seconds > 0 else 0
    timeval = _TIMEVAL.pack(whole, micros)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


class DeadlineSocket(TSocket):
    """A Thrift client socket whose connect, reads and writes all end by ``deadline`` (monotonic time);
    with ``tls`` (an SSL context), a TLS connection whose handshake ends by then too.

    Set ``deadline`` before each call (None: no limit); once it passes, the next socket operation
    raises ``TimeoutError`` however many bytes keep arriving. A read larger than
    :data:`MAX_READ_BYTES` raises :class:`NotThrift`.

    Each read and write may block only for the socket's timeout, which is kept at most the time left
    (:meth:`_arm`). It is changed only when it would outlast the deadline or is less than half the time
    left, so the calls of one pool, each with a deadline ``timeout`` from its start, mostly change it
    never (a system call saved per read and write); a timeout that runs out before the deadline is set
    to the exact time left and the read or write goes on. The timeout is the kernel's (``SO_RCVTIMEO``
    and ``SO_SNDTIMEO`` on a blocking socket), not Python's: a socket with a Python timeout polls before
    every read and write, two more system calls per HBase call. A TLS socket keeps Python's timeout instead
    (set the same way): on a blocking TLS socket the ssl module would retry a read the kernel's timeout
    ended by itself, past any deadline.
    """

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(host, port)
        self.deadline: float | None = None
        self.tls = tls
        self._timeout: float | None = None  # the socket's timeout now (inf: to be set before the next wait)
        # what a read or write raises when that timeout runs out before the deadline
        self._ran_out: tuple[type[OSError], ...] = (BlockingIOError,) if tls is None else (TimeoutError,)

    def open(self) -> None:
        self.connect_timeout = self.socket_timeout = time_left(self.deadline)
        super().open()
        sock = self.sock
        assert sock is not None
        if self.tls is None:
            sock.settimeout(None)  # blocking: the kernel's timeouts bound each read and write (see _arm)
            self._timeout = None
            return
        sock.settimeout(time_left(self.deadline))  # the handshake's bound
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)
        self._timeout = math.inf

    def _bound(self, sock: socket.socket, seconds: float | None) -> None:
        """Bound each read and write of ``sock`` by ``seconds`` (None: no bound), see the class doc."""
        if self.tls is None:
            _kernel_timeout(sock, seconds or 0.0)
        else:
            sock.settimeout(seconds)

    def _arm(self) -> socket.socket:
        """The open socket, its timeout at most the time left (TimeoutError once none is left)."""
        sock = self.sock
        assert sock is not None
        deadline = self.deadline
        if deadline is None:
            if self._timeout is not None:
                self._bound(sock, None)
                self._timeout = None
            return sock
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        timeout = self._timeout
        if timeout is None or timeout > left or timeout < left / 2:
            self._bound(sock, left)
            self._timeout = left
        return sock

    def read(self, sz: int) -> bytes:
        check_read_size(sz)
        while True:
            sock = self._arm()
            try:
                data = sock.recv(sz)
            except self._ran_out:  # the socket's timeout ran out
                self._timeout = math.inf  # ran out before the deadline: wait for the rest of the time
                continue
            if not data:
                raise TTransportException(type=TTransportException.END_OF_FILE, message="TSocket read 0 bytes")
            return data

    def write(self, buf: bytes) -> None:
        sent = 0
        while sent < len(buf):
            sock = self._arm()
            try:
                sent += sock.send(memoryview(buf)[sent:] if sent else buf)
            except self._ran_out:  # the socket's timeout ran out
                self._timeout = math.inf
                continue


class CheckedClient(TClient):
    """A Thrift client that reports an answer it cannot decode as :class:`NotThrift` (:func:`decoding_failure`).

    Its calls take their arguments in the IDL's order, or by name, as thriftpy2's do, but build the
    arguments' struct at once instead of through a dict and one ``setattr`` per argument (every HBase
    call makes one: the client's CPU of a call is mostly such Python steps, its write, its read and
    its wait).

    With ``one_per_flush``, each request is flushed on its own: a framed Thrift server (HBase's non-blocking
    ones) takes one request per frame, the HTTP one one per POST."""

    one_per_flush = False

    def _req(self, _api: str, *args: Any, **kwargs: Any) -> Any:
        self._write_call(_api, getattr(self._service, _api + "_args")(*args, **kwargs))
        self._oprot.trans.flush()
        return self._recv(_api)

    def _write_call(self, api: str, args: Any) -> None:
        """Write one call's request (not yet flushed, unless framed)."""
        oprot = self._oprot
        oprot.write_message_begin(api, TMessageType.CALL, self._seqid)
        args.write(oprot)
        oprot.write_message_end()
        if self.one_per_flush:
            oprot.trans.flush()  # (the framed and HTTP transports' flush of nothing writes nothing)

    def pipeline(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[Any]:
        """Make many calls, each (api, its arguments by name), without waiting for each answer: up to
        :data:`PIPELINE_WINDOW` requests are written at once, then their answers read in order (the Thrift1
        server serves one connection's requests one after another). One write and one round trip per
        window instead of per call: the client's CPU of a call is mostly its own write, read and wait.

        An exception HBase declares (``IOError``...) stands in the list in its call's place: the answers
        after it are read all the same, so the connection stays in step. A failure of the link raises."""
        return pipeline_many([self], [calls])[0]

    def _recv(self, _api: str) -> Any:
        try:
            return super()._recv(_api)
        except Exception as exc:
            failure = decoding_failure(exc)
            if failure is None:
                raise
            raise failure from exc


def pipeline_many(
    clients: Sequence[CheckedClient], batches: Sequence[Sequence[tuple[str, dict[str, Any]]]]
) -> list[list[Any]]:
    """:meth:`CheckedClient.pipeline` of ``batches[i]`` on ``clients[i]``, all from this thread: each
    window of every connection is written before any answer is read, so the HBase servers work on
    them at once (they serve one connection's requests one after another), without a thread per
    connection and its hand-offs. The answers per batch, in order; a failure of a link raises, and
    may leave the other connections' answers unread."""
    answers: list[list[Any]] = [[] for _ in batches]
    longest = max((len(batch) for batch in batches), default=0)
    for first in range(0, longest, PIPELINE_WINDOW):
        windows = [batch[first : first + PIPELINE_WINDOW] for batch in batches]
        for client, window in zip(clients, windows, strict=True):
            if window:
                for api, kwargs in window:
                    client._write_call(api, getattr(client._service, api + "_args")(**kwargs))
                client._oprot.trans.flush()
        for client, window, got in zip(clients, windows, answers, strict=True):
            for api, _ in window:
                try:
                    got.append(client._recv(api))
                except _HBASE_ANSWERS as exc:
                    got.append(exc)
    return answers


class Connection:
    """One connection to the HBase Thrift gateway (Thrift1) with the transport and protocol ``wire`` says
    (by default as HBase serves by default: buffered transport, binary protocol; HTTP requests over an
    :class:`~tms_hbase.storage.http.HttpChannel`), over TLS with ``tls``, with ``kerberos`` (SASL on a
    :class:`~tms_hbase.storage.kerberos.SaslChannel`, or SPNEGO over HTTP), on a :class:`DeadlineSocket` (or
    another ``socket_class`` with its interface: the asyncio pool's),
    with a :class:`CheckedClient` (``client``) whose calls are those of
    :class:`~tms_hbase.storage.hbase_thrift.Hbase`."""

    socket_class: type[DeadlineSocket] = DeadlineSocket

    def __init__(
        self,
        host: str,
        port: int,
        wire: ThriftTransport = PLAIN,
        tls: ssl.SSLContext | None = None,
        kerberos: Kerberos | None = None,
    ) -> None:
        self.socket = self.socket_class(host, port, tls)
        below: Any = self.socket
        if wire.http:
            below = HttpChannel(self.socket, MAX_READ_BYTES, kerberos.negotiate_header if kerberos else None)
        elif kerberos is not None:
            below = SaslChannel(self.socket, kerberos, MAX_READ_BYTES)
        elif wire.framed:
            below = FramedChannel(self.socket, MAX_READ_BYTES)
        # (thriftpy2's Cython buffered transport, taking buf_size; its type hints name the pure-Python one)
        self.transport = cast(Any, TBufferedTransport)(below, buf_size=READ_BUFFER)
        protocol = RowsCompactProtocol if wire.compact else TBinaryProtocol
        service = cast(ModuleType, hbase_thrift.Hbase)  # (thriftpy2 types a service as a module; it is a class)
        self.client = CheckedClient(service, protocol(self.transport, decode_response=False))
        self.client.one_per_flush = wire.framed or wire.http

    def open(self) -> None:
        self.transport.open()

    def close(self) -> None:
        if self.transport.is_open():
            self.transport.close()


def mutation(column: bytes, value: bytes) -> hbase_thrift.Mutation:
    """A Thrift1 put of one cell (written to the WAL)."""
    return hbase_thrift.Mutation(isDelete=False, column=column, value=value, writeToWAL=True)


def scan_spec(start: bytes, stop: bytes, caching: int) -> hbase_thrift.TScan:
    """A Thrift1 scan of rows ``start`` to ``stop`` (exclusive) that fetches ``caching`` rows per round
    trip inside HBase, for scanner calls made without building a dict per row."""
    return hbase_thrift.TScan(startRow=start, stopRow=stop, caching=caching)


class Operation:
    """The context of :meth:`HBaseConnection.operation`: sets the operation's deadline for the calls made
    inside, unless an outer operation set one (then it keeps that)."""

    __slots__ = ("_since", "_timeout", "_token")

    def __init__(self, timeout: float, since: float | None) -> None:
        self._timeout = timeout
        self._since = since
        self._token: contextvars.Token[float | None] | None = None

    def __enter__(self) -> None:
        if _OPERATION_DEADLINE.get() is None:
            since = self._since
            self._token = _OPERATION_DEADLINE.set((time.monotonic() if since is None else since) + self._timeout)

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _OPERATION_DEADLINE.reset(self._token)
            self._token = None


class HBaseConnection:
    """A pool of connections to an HBase Thrift gateway.

    Each call borrows a connection for one thread; a connection that broke is closed and replaced,
    idempotent calls are retried on a fresh one as the ``retry`` policy says while their deadline
    allows, and every error comes out as a ``TmsError``. ``timeout`` (seconds) is a deadline for a
    whole call, retries included, or for a whole library operation (:meth:`operation`), not a limit
    per socket read. ``fallbacks`` are more gateways (host, port) of the same HBase: when the one in
    use cannot be reached, new connections go to the next. Connections idle longer than ``max_idle``
    seconds are not reused: the Thrift gateway closes idle connections itself (after 60 s by default; its HTTP
    server after 30 s, so over HTTP two thirds of that at most).
    ``transport`` says how the gateways serve (framed, compact, HTTP, TLS: :class:`~tms_hbase.config.ThriftTransport`);
    its TLS files are loaded now (InvalidArgument if they cannot be), and Kerberos's library (InvalidArgument
    without the ``kerberos`` extra).
    """

    connection_class: type[Connection] = Connection
    """What the pool opens: connections on a :class:`DeadlineSocket` (an asyncio pool opens others)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = 10.0,
        pool_size: int = 8,
        retry: Retry | None = None,
        fallbacks: Sequence[tuple[str, int]] = (),
        max_idle: float = 45.0,
        transport: ThriftTransport = PLAIN,
    ) -> None:
        self._addresses = [(host, port), *fallbacks]
        self.transport = transport
        self._tls = client_context(transport)
        self._kerberos = Kerberos(transport) if transport.kerberos else None
        self._current = 0  # index of the gateway new connections go to
        self.timeout = check_timeout(timeout)
        self.retry = retry or Retry()
        self.max_idle = min(max_idle, SERVER_IDLE_SECONDS * 2 / 3) if transport.http else max_idle
        self._idle: list[tuple[Connection, float]] = []
        self._lock = green.no_wait_lock()
        self._slots = green.semaphore(pool_size)
        self._closed = False
        self.calls = 0  # HBase round trips made through this pool (for tests, benchmarks and metrics)
        self.requests = 0  # the same, counting each request of a pipelined call (CheckedClient.pipeline)

    @property
    def host(self) -> str:
        return self._addresses[self._current][0]

    @property
    def port(self) -> int:
        return self._addresses[self._current][1]

    @property
    def address(self) -> str:
        """``host:port`` of the gateway in use."""
        return f"{self.host}:{self.port}"

    def operation(self, since: float | None = None) -> Operation:
        """Give every HBase call made inside (in this thread or task) one shared deadline, ``timeout``
        seconds from now (or from ``since``, a monotonic time: when a call that waited its turn was made):
        a library operation made of several calls, retries included, ends by then.
        Nested operations keep the outer deadline."""
        return Operation(self.timeout, since)

    def deadline(self) -> float:
        """When a call starting now must end: the running operation's deadline, or ``timeout`` from now."""
        return operation_deadline() or time.monotonic() + self.timeout

    def run(self, what: str, call: Callable[[Connection], T], *, idempotent: bool = True, requests: int = 1) -> T:
        """Run ``call`` (counted as ``requests`` requests: more when pipelined) on a borrowed connection
        by one deadline (the running operation's, or ``timeout`` from now); retry link failures of
        idempotent calls as the retry policy says, while the deadline leaves time (a timeout is never
        retried: the deadline has passed). ``what`` names the call in error messages."""
        return self._attempts(what, call, 0, idempotent, requests)

    def run_over(
        self,
        what: str,
        ways: int,
        call: Callable[[list[Connection]], T],
        *,
        idempotent: bool = True,
        requests: int = 1,
    ) -> T:
        """:meth:`run` on up to ``ways`` borrowed connections at once, handed to ``call`` together: the
        first waits for a free slot of the pool, the others are taken only if free now (so callers
        holding some never wait on each other for more). If anything fails, every one of them is
        closed: a link that broke may leave the others' answers unread."""
        return self._attempts(what, call, ways, idempotent, requests)

    def _attempts(self, what: str, call: Callable[[Any], T], ways: int, idempotent: bool, requests: int) -> T:
        """:meth:`run` (``ways`` 0: ``call`` takes the one connection) or :meth:`run_over` (``call`` takes
        the list of up to ``ways``), retried as they say."""
        deadline = self.deadline()
        failures = 0
        while True:
            try:
                return self._call(what, call, deadline, requests, ways)
            except HBaseUnavailable as exc:
                failures += 1
                if not idempotent or exc.timed_out or not self.retry.pause(exc, failures, what=what, deadline=deadline):
                    raise
                CLIENT_METRICS.retries.inc()

    def _call(self, what: str, call: Callable[[Any], T], deadline: float, requests: int, ways: int) -> T:
        """One attempt of :meth:`_attempts`: ``call`` on the connection (``ways`` 0) or connections borrowed
        until ``deadline``, errors wrapped."""
        if self._closed:
            raise ClientClosed("this client has been closed: open a new MessagingClient")
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._timed_out(what)
        if not self._slots.acquire(timeout=left):
            err = HBaseUnavailable(f"{what}: no free connection to {self.address} within {self.timeout}s")
            err.timed_out = True
            raise err
        slots = 1
        while slots < ways and self._slots.acquire(blocking=False):
            slots += 1
        conns: list[Connection] = []
        healthy = False
        self.calls += 1
        self.requests += requests
        try:
            for _ in range(slots):
                conns.append(self._take(deadline))
                conns[-1].socket.deadline = deadline
            answer = call(conns) if ways else call(conns[0])
            healthy = True
            return answer
        except (*_LINK_ERRORS, TException) as exc:
            # an answer from HBase (IOError...) leaves the links usable; anything else may not
            healthy = isinstance(exc, _HBASE_ANSWERS)
            raise self._wrap(what, exc) from exc
        except TmsError:
            healthy = True  # raised by the caller's code on whole answers
            raise
        # anything else (an interrupted call) may leave half a response on a socket: discarded
        finally:
            for conn in conns:
                self._give_back(conn, healthy)
            for _ in range(slots):
                self._slots.release()

    def close(self) -> None:
        """Close every idle connection; borrowed ones are closed when given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    def _take(self, deadline: float) -> Connection:
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
        return self._open(deadline)

    def _open(self, deadline: float) -> Connection:
        """A new connection to the gateway in use; if it cannot be reached, to the next one (each
        gateway is tried once, within the deadline)."""
        for tried in range(1, len(self._addresses) + 1):
            index = self._current
            conn = self.connection_class(*self._addresses[index], self.transport, self._tls, self._kerberos)
            conn.socket.deadline = deadline
            try:
                conn.open()
                log.debug("connected to HBase Thrift at %s:%d", *self._addresses[index])
                return conn
            except (TTransportException, OSError) as exc:
                if isinstance(exc, TimeoutError) or tried == len(self._addresses):
                    raise
                with self._lock:
                    if self._current == index:
                        self._current = (index + 1) % len(self._addresses)
                log.warning(
                    "HBase Thrift at %s:%d cannot be reached (%s); trying %s",
                    *self._addresses[index],
                    exc,
                    self.address,
                )
        raise AssertionError("unreachable")

    def _give_back(self, conn: Connection, healthy: bool) -> None:
        with self._lock:
            if healthy and not self._closed:
                self._idle.append((conn, time.monotonic()))
                return
            # a broken link suggests the others are broken too (gateway restarted, network cut)
            stale, self._idle = [c for c, _ in self._idle], []
        for old in [conn, *stale]:
            old.close()

    def _timed_out(self, what: str) -> HBaseUnavailable:
        err = HBaseUnavailable(f"{what}: HBase Thrift at {self.address} did not answer within {self.timeout}s")
        err.timed_out = True
        return err

    def _wrap(self, what: str, exc: BaseException) -> TmsError:
        if isinstance(exc, (socket.timeout, TimeoutError)) or "timed out" in _reason(exc):
            return self._timed_out(what)
        serves = self.transport.describe()
        if (tls_failure := handshake_failure(exc)) is not None:
            refused = HBaseUnavailable(f"{what}: HBase Thrift at {self.address}: {tls_failure}")
            refused.retriable = isinstance(
                exc, ssl.SSLEOFError
            )  # a certificate is refused again, a cut link may not be
            return refused
        if isinstance(exc, KerberosFailure):
            refused = HBaseUnavailable(f"{what}: HBase Thrift at {self.address}: {exc}")
            refused.retriable = False  # no ticket, a wrong principal or protection: the same again
            return refused
        if isinstance(exc, HttpStatus):
            refused = HBaseUnavailable(f"{what}: HBase Thrift at {self.address} answered {exc}")
            refused.retriable = exc.status in (502, 503, 504)  # a proxy's or a busy server's: may pass
            return refused
        if isinstance(exc, (NotThrift, NotHttp)):
            return HBaseUnavailable(
                f"{what}: {self.address} answered bytes that are not an HBase Thrift reply ({_reason(exc)}); "
                f"is it the HBase Thrift gateway (Thrift1), serving what this client speaks ({serves})?"
            )
        if isinstance(exc, ConnectionResetError) or (
            isinstance(exc, TTransportException) and exc.type == TTransportException.END_OF_FILE
        ):
            return HBaseUnavailable(
                f"{what}: HBase Thrift at {self.address} closed the connection ({_reason(exc)}); is HBase running, "
                f"and does its Thrift gateway serve what this client speaks ({serves})?"
            )
        if isinstance(exc, _LINK_ERRORS):
            return HBaseUnavailable(
                f"{what}: cannot reach HBase Thrift at {self.address} ({_reason(exc)}); is HBase running?"
            )
        if isinstance(exc, _HBASE_ANSWERS):
            denied = access_denied(what, _message(exc))
            return denied or HBaseError(f"{what}: HBase refused the request: {_reason(exc)}")
        if isinstance(exc, TException):
            return HBaseError(f"{what}: Thrift protocol error from {self.address}: {_reason(exc)}")
        return HBaseError(f"{what}: {type(exc).__name__}: {exc}")


# HBase's AccessDeniedException, in the two forms its AccessController words it: "Insufficient permissions for user
# 'U' (table=T, action=A)" (or "(global, action=A)") and "Insufficient permissions (user=U, scope=S, family=F,
# params=[...],action=A)".
_ACCESS_DENIED = "AccessDeniedException"
_DENIED_USER = re.compile(r"for user '([^']*)'|\(user=([^,]+),")
_DENIED_TABLE = re.compile(r"\btable=([^,)\]]+)")
_DENIED_SCOPE = re.compile(r"\bscope=([^,)]+)")
_DENIED_FAMILY = re.compile(r"\bfamily=([^,)\]]+)")
_DENIED_ACTION = re.compile(r"\baction=([A-Z]+)")
PERMISSION_LETTERS = {"READ": "R", "WRITE": "W", "EXEC": "X", "CREATE": "C", "ADMIN": "A"}
"""HBase's permission names (its ``Permission.Action``) and the letters its shell's ``grant`` takes."""


def access_denied(what: str, message: str) -> AccessDenied | None:
    """The AccessDenied that an answer of HBase's saying ``message`` (its AccessDeniedException, as the Thrift
    gateway passes it on) reports, or None if it says something else."""
    at = message.find(_ACCESS_DENIED)
    if at < 0:
        return None
    said = message[at:].split("\n", 1)[0]
    user = _DENIED_USER.search(said)
    table = _DENIED_TABLE.search(said) or _DENIED_SCOPE.search(said)
    family = _DENIED_FAMILY.search(said)
    action = _DENIED_ACTION.search(said)
    name = table.group(1).strip() if table else None
    return AccessDenied(
        what,
        user=(user.group(1) or user.group(2)).strip() if user else None,
        table=name.removeprefix("default:") if name else None,
        family=family.group(1).strip() if family else None,
        permission=PERMISSION_LETTERS.get(action.group(1)) if action else None,
    )


def _message(exc: BaseException) -> str:
    """An exception's whole message, decoded."""
    message = getattr(exc, "message", None)
    if message is None:
        try:
            message = str(exc)
        except TypeError:  # thrift exceptions whose message is bytes
            message = repr(exc)
    return message.decode(errors="replace") if isinstance(message, bytes) else str(message)


def _reason(exc: BaseException) -> str:
    """The first line of an exception's message, decoded (HBase sends whole Java stack traces)."""
    lines = _message(exc).strip().splitlines()
    return lines[0][:500] if lines else type(exc).__name__
