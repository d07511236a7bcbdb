"""Doorbells: how a publish wakes the consumers waiting for new messages, with no broker and no busy polling.

HBase cannot push, so a waiting consumer would have to poll. Instead each consumer opens a UDP socket
(its doorbell) and writes the socket's address into its subscription's cell with its lease. A client
that publishes to a topic rings the doorbells of that topic's active consumers: one datagram each,
sent after the publish succeeded. Which doorbells a topic has is read from the subscriptions table by
a background thread of the publishing client, at most once a ``refresh`` interval per topic it
published to recently, never on the publish path itself. Consumers of the same process are rung
directly, at once, without waiting for that refresh.

The doorbell is best-effort: a datagram can be lost, a consumer can start between two refreshes. A
waiting consumer therefore also polls, slowly (every half second by default): correctness never
depends on a ring, only wake-up latency does. A ring says "look now"; its content is the topic key and,
after a publish, the generation and position of the batch row it wrote (acknowledged before the ring is
sent). A consumer that has read everything before exactly that row reads it with one get instead of a
scan (:meth:`~tms_hbase.consume.consumer.Consumer`); anything else, or a stray datagram, costs one
ordinary read.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable

from tms_hbase.errors import InvalidArgument, TmsError
from tms_hbase.model import green
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.topic import TopicId

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
REFRESH_SECONDS = 1.0
FORGET_SECONDS = 60.0  # stop refreshing a topic nobody published to for this long
FAILED_SECONDS = 30.0  # after a failed refresh (no subscriptions table, HBase trouble), wait this long

_ROW = struct.Struct(">qq")  # a ring's (generation, position) after the topic key

# Bells of this process, by (table prefix, topic key): publishers of the same process ring them directly.
_local: dict[tuple[str, bytes], set[Bell]] = {}
_local_lock = threading.Lock()


class Bell:
    """A consumer's doorbell: a non-blocking UDP socket it waits on between reads."""

    def __init__(self, prefix: str, topic: TopicId, host: str = DEFAULT_HOST) -> None:
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self._sock = socket.socket(family, socket.SOCK_DGRAM)
            self._sock.bind((host, 0))
        except (OSError, UnicodeError) as exc:
            raise InvalidArgument(f"cannot open a doorbell on {host!r}: {exc}") from None
        self._sock.setblocking(False)
        bound = self._sock.getsockname()
        self.address = f"[{bound[0]}]:{bound[1]}" if family == socket.AF_INET6 else f"{bound[0]}:{bound[1]}"
        self._target = bound
        self._ring = topic.key
        self._slot = (prefix, topic.key)
        with _local_lock:
            _local.setdefault(self._slot, set()).add(self)

    def ring(self, content: bytes) -> None:
        """Wake this bell's consumer (from this process) with a ring's ``content`` (:func:`ring_content`)."""
        with contextlib.suppress(OSError):  # closed, or the buffer is full: the consumer is awake anyway
            self._sock.sendto(content, self._target)

    def clear(self) -> list[tuple[int, int] | None]:
        """Forget rings so far (called before a read, so a publish after the read still wakes the wait);
        returns what each said: the (generation, position) of the row its publish wrote, or None."""
        rings: list[tuple[int, int] | None] = []
        try:
            while True:
                data = self._sock.recv(512)
                row = data[len(self._ring) :]
                rings.append(_ROW.unpack(row) if data.startswith(self._ring) and len(row) == _ROW.size else None)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            pass  # closed
        return rings

    def wait(self, timeout: float) -> bool:
        """Block until a ring or ``timeout`` seconds; True if it rang."""
        try:
            return green.wait_readable(self._sock, timeout)
        except (OSError, ValueError):  # closed meanwhile
            return False

    def close(self) -> None:
        with _local_lock:
            bells = _local.get(self._slot)
            if bells is not None:
                bells.discard(self)
                if not bells:
                    del _local[self._slot]
        self._sock.close()


def ring_content(topic: TopicId, row: tuple[int, int] | None = None) -> bytes:
    """What a ring of ``topic`` sends: its key, and the (generation, position) of the row a publish wrote."""
    return topic.key if row is None else topic.key + _ROW.pack(*row)


def ring_local(prefix: str, topic: TopicId, row: tuple[int, int] | None = None) -> set[str]:
    """Ring every bell of this process waiting on ``topic`` (``row``: see :func:`ring_content`); returns
    their addresses."""
    with _local_lock:
        bells = list(_local.get((prefix, topic.key), ()))
    content = ring_content(topic, row)
    for bell in bells:
        bell.ring(content)
    return {bell.address for bell in bells}


class Doorbells:
    """The publishing side of one client: which doorbells each topic has, and ringing them.

    ``list_bells(topic)`` reads the addresses of the topic's active consumers from HBase; it runs only
    on this object's background thread: at once for a topic rung for the first time, then at most
    once a ``refresh`` interval for each topic rung within the last minute.
    """

    def __init__(self, prefix: str, list_bells: Callable[[TopicId], list[str]], refresh: float = REFRESH_SECONDS):
        self.prefix = prefix
        self.list_bells = list_bells
        self.refresh = refresh
        self._addresses: dict[TopicId, list[tuple[str, tuple]]] = {}
        self._rung: dict[TopicId, float] = {}  # topic -> when it was last rung
        self._due: dict[TopicId, float] = {}  # topic -> when its addresses are read again (absent: now)
        self._lock = threading.Lock()
        self._stop = green.event()
        self._wake = green.event()  # a topic was rung for the first time: read its addresses now
        self._thread: green.Joinable | None = None
        self._sock: socket.socket | None = None
        self._sock6: socket.socket | None = None

    def ring(self, topic: TopicId, row: tuple[int, int] | None = None) -> None:
        """Wake the consumers of ``topic``: this process's at once, others' from the last refresh. ``row``:
        the (generation, position) of the batch row a publish wrote, acknowledged already."""
        local = ring_local(self.prefix, topic, row)
        content = ring_content(topic, row)
        with self._lock:
            if self._stop.is_set():
                return
            self._rung[topic] = time.monotonic()
            sends = [(self._socket(t), t) for a, t in self._addresses.get(topic, ()) if a not in local]
            if topic not in self._due:
                self._wake.set()
            if self._thread is None:
                self._thread = green.start_thread(self._refresh_loop, "tms-doorbells")
        for sock, target in sends:
            try:
                sock.sendto(content, target)
                CLIENT_METRICS.doorbell_rings.inc()
            except OSError:
                pass  # best-effort: the consumer's slow poll covers it

    def close(self) -> None:
        """Stop ringing and refreshing (the refresh thread ends after its current read; not waited for,
        so closing a client never waits on HBase)."""
        with self._lock:
            self._stop.set()
            self._wake.set()
            socks = (self._sock, self._sock6)
        for sock in socks:
            if sock is not None:
                sock.close()

    def _socket(self, target: tuple) -> socket.socket:
        """The sending socket for an IPv4 or IPv6 target (made on first use; called under the lock)."""
        if len(target) == 4:
            if self._sock6 is None:
                self._sock6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            return self._sock6
        if self._sock is None:
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        return self._sock

    def _refresh_loop(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lock:
                self._wake.clear()
                for topic in [t for t, at in self._rung.items() if now - at > FORGET_SECONDS]:
                    del self._rung[topic]
                    self._addresses.pop(topic, None)
                    self._due.pop(topic, None)
                if not self._rung:  # nothing published for a while: the next ring starts a new thread
                    self._thread = None
                    return
                topics = [t for t in self._rung if self._due.get(t, 0.0) <= now]
            for topic in topics:
                try:
                    found = [(a, t) for a in self.list_bells(topic) if (t := parse_address(a)) is not None]
                except TmsError as exc:
                    log.debug("doorbells of %s not refreshed: %s", topic, exc)
                    with self._lock:
                        self._due[topic] = time.monotonic() + FAILED_SECONDS
                    continue
                with self._lock:
                    self._addresses[topic] = found
                    self._due[topic] = now + self.refresh
            with self._lock:
                next_due = min((self._due.get(t, 0.0) for t in self._rung), default=now + self.refresh)
            self._wake.wait(max(0.0, next_due - time.monotonic()))


def parse_address(text: str) -> tuple | None:
    """``host:port`` or ``[v6]:port`` as a socket address; None if it is not one (a corrupt cell)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    if host.startswith("["):
        return (host.strip("[]"), int(port), 0, 0)
    return (host, int(port))
