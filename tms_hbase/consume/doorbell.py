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
scan (:class:`~tms_hbase.consume.consumer.Consumer`); anything else, or a stray datagram, costs one
ordinary read.

**Rings that carry the row.** A row's cell of at most :data:`RING_ROW_LIMIT` bytes also rides in the ring,
exactly as the publish stored it (after HBase acknowledged it, so it is durable), and that consumer
delivers its messages from the datagram without reading HBase: decoded as a read decodes them, so the
ids, publish times and order are the same. Any local process can send a datagram, so such a ring is
authenticated: each consumer draws a random key (:data:`KEY_BYTES`) and writes it, hex, into its
subscription's cell beside its doorbell's address; publishers read both with the addresses, and a ring
carrying a row ends in a keyed BLAKE2b MAC (:data:`TAG_BYTES`) over the topic key, the row's place and
the cell. A ring whose MAC does not check carries nothing: it is a plain "look now" (counted in
``tms_client_doorbell_rings_refused``). Doorbells without a key (shared subscriptions' idle consumers)
get the plain ring.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import socket
import struct
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import NamedTuple

from tms_hbase.errors import InvalidArgument, TmsError
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.topic import TopicId
from tms_hbase.runtime import green

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
REFRESH_SECONDS = 1.0
FORGET_SECONDS = 60.0  # stop refreshing a topic nobody published to for this long
FAILED_SECONDS = 30.0  # after a failed refresh (no subscriptions table, HBase trouble), wait this long

RING_ROW_LIMIT = 8192  # bytes: a stored row cell up to this size rides in the ring (one loopback datagram)
KEY_BYTES = 16  # a doorbell's ring key
TAG_BYTES = 16  # the MAC that ends a ring carrying a row

_ROW = struct.Struct(">qq")  # a ring's (generation, position) after the topic key
_RECEIVE = RING_ROW_LIMIT + 4096  # room for the topic key, the place and the MAC (a bigger datagram fails the MAC)


class Ring(NamedTuple):
    """What one ring said: the place of the batch row its publish wrote and, when the ring carried it and its
    MAC checked, the row's stored cell."""

    generation: int
    position: int
    stored: bytes | None = None


class Address(NamedTuple):
    """A doorbell as the publishers read it: its ``host:port`` and its ring key (None: rings carry no row)."""

    address: str
    key: bytes | None = None


# Bells of this process, by (table prefix, topic key): publishers of the same process ring them directly.
_local: dict[tuple[str, bytes], set[Bell]] = {}
_local_lock = green.no_wait_lock()
_NO_BELLS: frozenset[str] = frozenset()


class Bell:
    """A consumer's doorbell: a non-blocking UDP socket it waits on between reads."""

    def __init__(self, prefix: str, topic: TopicId, host: str = DEFAULT_HOST) -> None:
        self.key = os.urandom(KEY_BYTES)  # authenticates rings carrying a row (written into the consumer's cell)
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

    def clear(self) -> list[Ring | None]:
        """Forget rings so far (called before a read, so a publish after the read still wakes the wait);
        returns what each said (:func:`read_ring`)."""
        rings: list[Ring | None] = []
        try:
            while True:
                rings.append(read_ring(self._sock.recv(_RECEIVE), self._ring, self.key))
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


def ring_content(
    topic: TopicId, row: tuple[int, int] | None = None, stored: bytes | None = None, key: bytes | None = None
) -> bytes:
    """What a ring of ``topic`` sends: its key, the (generation, position) of the row a publish wrote and,
    for a doorbell with a ring ``key``, the row's ``stored`` cell (if at most :data:`RING_ROW_LIMIT` bytes)
    and the MAC over all of it."""
    if row is None:
        return topic.key
    place = topic.key + _ROW.pack(*row)
    if key is None or stored is None or len(stored) > RING_ROW_LIMIT:
        return place
    body = place + stored
    return body + _mac(key, body)


def read_ring(data: bytes, topic_key: bytes, key: bytes) -> Ring | None:
    """What a datagram received by a doorbell of the topic ``topic_key`` with the ring ``key`` says: the
    place of the row a publish wrote, and the row's cell if it carried one whose MAC checks; None for a
    plain ring or anything else (a look costs one ordinary read). A ring carrying a row with a wrong MAC
    counts as a plain one: nothing it carries is trusted."""
    if not data.startswith(topic_key):
        return None
    size = len(data) - len(topic_key)
    if size == _ROW.size:
        return Ring(*_ROW.unpack_from(data, len(topic_key)))
    if size <= _ROW.size + TAG_BYTES:
        return None
    if not hmac.compare_digest(_mac(key, data[:-TAG_BYTES]), data[-TAG_BYTES:]):
        CLIENT_METRICS.rings_refused.inc()
        return None
    generation, position = _ROW.unpack_from(data, len(topic_key))
    return Ring(generation, position, data[len(topic_key) + _ROW.size : -TAG_BYTES])


def ring_key(text: object) -> bytes | None:
    """A ring key as a subscription's cell holds it (hex); None if there is none or it is not one (a corrupt
    cell: that doorbell gets plain rings)."""
    if not isinstance(text, str) or len(text) != 2 * KEY_BYTES:
        return None
    try:
        return bytes.fromhex(text)
    except ValueError:
        return None


def _mac(key: bytes, body: bytes) -> bytes:
    return hashlib.blake2b(body, key=key, digest_size=TAG_BYTES).digest()


def ring_local(
    prefix: str, topic: TopicId, row: tuple[int, int] | None = None, stored: bytes | None = None
) -> AbstractSet[str]:
    """Ring every bell of this process waiting on ``topic`` (``row``, ``stored``: see :func:`ring_content`);
    returns their addresses."""
    if not _local:  # no bell in this process (a publisher's usual case): nothing to look up or lock
        return _NO_BELLS
    with _local_lock:
        bells = list(_local.get((prefix, topic.key), ()))
    for bell in bells:
        bell.ring(ring_content(topic, row, stored, bell.key))
    return {bell.address for bell in bells}


class Doorbells:
    """The publishing side of one client: which doorbells each topic has, and ringing them.

    ``list_bells(topic)`` reads the doorbells of the topic's active consumers from HBase; it runs only
    on this object's background thread: at once for a topic rung for the first time, then at most
    once a ``refresh`` interval for each topic rung within the last minute.
    """

    def __init__(
        self, prefix: str, list_bells: Callable[[TopicId], list[Address]], refresh: float = REFRESH_SECONDS
    ) -> None:
        self.prefix = prefix
        self.list_bells = list_bells
        self.refresh = refresh
        # topic -> its doorbells (address, target, ring key) as last read; [] until a first read succeeded
        self._addresses: dict[TopicId, list[tuple[str, tuple, bytes | None]]] = {}
        self._rung: dict[TopicId, float] = {}  # topic -> when it was last rung
        self._due: dict[TopicId, float] = {}  # topic -> when its addresses are read again (absent: now)
        self._lock = green.no_wait_lock()
        self._closed = False
        self._wake = green.event()  # a topic was rung for the first time: read its addresses now (or stop)
        self._thread: green.Joinable | None = None
        self._sock: socket.socket | None = None
        self._sock6: socket.socket | None = None

    def ring(self, topic: TopicId, row: tuple[int, int] | None = None, stored: bytes | None = None) -> None:
        """Wake the consumers of ``topic``: this process's at once, others' from the last refresh. ``row``:
        the (generation, position) of the batch row a publish wrote, acknowledged already; ``stored``: that
        row's cell as stored, carried to the doorbells with a ring key (:func:`ring_content`)."""
        local = ring_local(self.prefix, topic, row, stored)
        with self._lock:
            if self._closed:
                return
            self._rung[topic] = time.monotonic()
            addresses = self._addresses.get(topic)
            if addresses is None:  # rung for the first time (or again after being forgotten)
                self._addresses[topic] = addresses = []
                self._wake.set()
                if self._thread is None:
                    self._thread = green.start_thread(self._refresh_loop, "tms-doorbells")
            sends = [(self._socket(t), t, k) for a, t, k in addresses if a not in local] if addresses else ()
        for sock, target, key in sends:
            try:
                sock.sendto(ring_content(topic, row, stored, key), target)
                CLIENT_METRICS.doorbell_rings.inc()
            except OSError:
                pass  # best-effort: the consumer's slow poll covers it

    def close(self) -> None:
        """Stop ringing and refreshing (the refresh thread ends after its current read; not waited for,
        so closing a client never waits on HBase)."""
        with self._lock:
            self._closed = True
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
        while not self._closed:
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
                    found = [
                        (b.address, t, b.key)
                        for b in self.list_bells(topic)
                        if (t := parse_address(b.address)) is not None
                    ]
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
