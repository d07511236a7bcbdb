"""How the protocol code waits: on threads, or on an asyncio event loop through greenlets.

The ordering, sequencer, lease and transaction logic is written once, as plain functions over the storage
port. The synchronous client runs it on the caller's thread. The asyncio client (:mod:`tms_hbase.aio`) and
the gateway run the very same code in a greenlet on their event loop (:mod:`tms_hbase.runtime.bridge`).

The waiting primitives below (:func:`sleep`, :func:`lock`, :func:`rlock`, :func:`event`,
:func:`condition`, :func:`semaphore`, :func:`start_thread`, :func:`wait_readable`) are what the protocol
code uses instead of :mod:`threading`, :func:`time.sleep` and select() where it may wait: made or called
inside the bridge's ``run_sync`` they wait on the event loop, elsewhere they are the ordinary thread ones.
State shared by all callers is guarded by :func:`no_wait_lock`, a thread lock under which nothing waits.

This module does not import greenlet: only the bridge does, when an asyncio client or the gateway loads it,
so the synchronous client runs without it (the ``asyncio`` extra installs it).
"""

from __future__ import annotations

import os
import queue
import select
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import socket

# asyncio is imported where code runs on an event loop (inside the bridge, where it is loaded already), not
# here: the synchronous client and the command-line tools never load it.

_BRIDGE = "tms_hbase.runtime.bridge"


def _bridge() -> ModuleType | None:
    """The asyncio bridge if something loaded it: code can run inside it only then."""
    return sys.modules.get(_BRIDGE)


def bridged() -> bool:
    """True inside the bridge's ``run_sync``: waits go to the event loop."""
    bridge = _bridge()
    return bridge is not None and bool(bridge.inside())


def sleep(seconds: float) -> None:
    """Wait ``seconds``: on the event loop inside the bridge, else on this thread."""
    bridge = _bridge()
    if bridge is not None and bridge.inside():
        import asyncio

        bridge.await_(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


class Lock(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> bool: ...
    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /
    ) -> None: ...


class Event(Protocol):
    def is_set(self) -> bool: ...
    def set(self) -> None: ...
    def clear(self) -> None: ...
    def wait(self, timeout: float | None = None) -> bool: ...


class Condition(Protocol):
    def __enter__(self) -> bool: ...
    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /
    ) -> None: ...
    def wait(self, timeout: float | None = None) -> bool: ...
    def notify_all(self) -> None: ...


class Joinable(Protocol):
    def join(self, timeout: float | None = None) -> None: ...


class Semaphore(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float | None = ...) -> bool: ...
    def release(self) -> None: ...


class _ThreadSemaphore:
    """A semaphore of threads: a queue of ``value`` tokens, whose get and put run in C (``threading``'s
    semaphore takes a Condition, a dozen Python calls, for each acquire and release: every HBase call
    takes one)."""

    def __init__(self, value: int) -> None:
        self._tokens: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(value):
            self._tokens.put(None)

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        try:
            self._tokens.get(blocking, None if timeout is None or timeout < 0 else timeout)
        except queue.Empty:
            return False
        return True

    def release(self) -> None:
        self._tokens.put(None)


CHECK_LOCKS_ENV = "TMS_HBASE_CHECK_LOCKS"
"""Set to 1 (the test suite does), :func:`no_wait_lock` makes locks that check their rule."""


class _CheckedLock:
    """A thread lock that counts itself in the bridge's greenlet holding it, so that the bridge's ``await_``
    refuses to switch away from that greenlet (a Python wrapper: the check costs each acquire and release)."""

    __slots__ = ("_lock",)

    def __init__(self, lock: Lock) -> None:
        self._lock = lock

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._lock.acquire(blocking, timeout):
            return False
        bridge = _bridge()
        if bridge is not None:
            bridge.count_held(1)
        return True

    def release(self) -> None:
        bridge = _bridge()
        if bridge is not None:
            bridge.count_held(-1)
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /
    ) -> None:
        self.release()


def no_wait_lock(*, reentrant: bool = False) -> Lock:
    """The lock of state that threads and the greenlets of event loops share (a pool's free connections, a
    cache): a thread lock, held only while nothing waits (no HBase call, no sleep, no other lock's wait).
    A greenlet holding it then never lets another greenlet of its thread run, so none can block the loop
    asking for it. Where a holder must wait, use :func:`lock`. With ``TMS_HBASE_CHECK_LOCKS=1`` in the
    environment (the tests), a wait inside the bridge while holding one raises RuntimeError."""
    lock: Lock = threading.RLock() if reentrant else threading.Lock()
    return _CheckedLock(lock) if os.environ.get(CHECK_LOCKS_ENV) == "1" else lock


def lock() -> Lock:
    """A lock for the code that makes it: a greenlet lock inside the bridge, else a thread lock."""
    bridge = _bridge()
    return bridge.GreenLock() if bridge is not None and bridge.inside() else threading.Lock()


def rlock() -> Lock:
    """A reentrant lock, like :func:`lock`."""
    bridge = _bridge()
    return bridge.GreenRLock() if bridge is not None and bridge.inside() else threading.RLock()


def wait_readable(sock: socket.socket, timeout: float) -> bool:
    """Wait until ``sock`` has something to read or ``timeout`` seconds passed; True if it has. On the
    event loop inside the bridge, else with select()."""
    bridge = _bridge()
    if bridge is not None and bridge.inside():
        return bool(bridge.wait_readable(sock, timeout))
    readable, _, _ = select.select([sock], [], [], max(0.0, timeout))
    return bool(readable)


def event() -> Event:
    """An event, like :func:`lock`."""
    bridge = _bridge()
    return bridge.GreenEvent() if bridge is not None and bridge.inside() else threading.Event()


def condition(on: Lock) -> Condition:
    """A condition variable on the lock ``on`` (made by :func:`lock`)."""
    bridge = _bridge()
    if bridge is not None and isinstance(on, bridge.GreenLock):
        return bridge.GreenCondition(on)
    return threading.Condition(on)  # type: ignore[arg-type]


def semaphore(value: int) -> Semaphore:
    """A semaphore of ``value`` slots, like :func:`lock`."""
    bridge = _bridge()
    return bridge.GreenSemaphore(value) if bridge is not None and bridge.inside() else _ThreadSemaphore(value)


def start_thread(target: Callable[[], None], name: str) -> Joinable:
    """Run ``target`` in the background: a task of the event loop inside the bridge, else a daemon thread."""
    bridge = _bridge()
    if bridge is not None and bridge.inside():
        return bridge.GreenTask(target, name)
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread
