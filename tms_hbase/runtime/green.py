"""How the protocol code waits: on threads, or on an asyncio event loop through greenlets.

The ordering, sequencer, lease and transaction logic is written once, as plain functions over the storage
port. The synchronous client runs it on the caller's thread. The asyncio client
(:mod:`tms_hbase.aio`) runs the very same code in a greenlet (:func:`run_sync`): wherever it waits (an
HBase call, a backoff, a lock another publish holds, a hand-over between publishes) the greenlet hands
an awaitable to the event loop (:func:`await_`) and is resumed with its result, so thousands of
operations are in flight on one thread and nothing blocks the loop. This is how SQLAlchemy runs its ORM
over asyncio drivers.

The waiting primitives below (:func:`sleep`, :func:`lock`, :func:`rlock`, :func:`event`,
:func:`condition`, :func:`semaphore`, :func:`start_thread`, :func:`wait_readable`) are what the protocol
code uses instead of :mod:`threading`, :func:`time.sleep` and select() where it may wait: made or called
inside :func:`run_sync` they wait on the event loop, elsewhere they are the ordinary thread ones. State
shared by all callers is guarded by :func:`no_wait_lock`, a thread lock under which nothing waits.
"""

from __future__ import annotations

import os
import queue
import select
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import greenlet

if TYPE_CHECKING:
    import asyncio
    import socket

# asyncio is imported where code runs on an event loop (inside run_sync, where it is loaded already), not
# here: the synchronous client and the command-line tools never load it.

T = TypeVar("T")


class _Bridged(greenlet.greenlet):
    """A greenlet running protocol code for an event loop (its parent is the coroutine awaiting it)."""

    loop: asyncio.AbstractEventLoop
    holding = 0  # the checked no-wait locks it holds (see no_wait_lock)


def bridged() -> bool:
    """True inside :func:`run_sync`: waits go to the event loop."""
    return isinstance(greenlet.getcurrent(), _Bridged)


async def run_sync(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` run on this event loop: each :func:`await_` inside it awaits here.

    Cancelling the awaiting task throws CancelledError into ``fn`` where it waits (and the storage port
    discards a connection interrupted mid-call)."""
    import asyncio

    child = _Bridged(fn, greenlet.getcurrent())
    child.loop = asyncio.get_running_loop()
    step = child.switch(*args, **kwargs)
    while not child.dead:
        try:
            value = await step
        except BaseException as exc:
            step = child.throw(exc)
        else:
            step = child.switch(value)
    return step


async def run_to_end(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` run on this event loop like :func:`run_sync`, in the awaiting task itself, but never
    interrupted: cancelling the awaiting task does not reach ``fn``. It runs on to its end, and then
    CancelledError is raised (its result or error goes nowhere).

    Each wait of ``fn`` is awaited through an :class:`_Unstoppable` that refuses the task's cancel request
    (asyncio then delivers CancelledError once the wait is over): no task of its own and no shield, which
    would cost two more turns of the event loop per call and one per wait. A coroutine ``fn`` hands over
    runs as a task of its own, so that it is not interrupted either."""
    import asyncio

    child = _Bridged(fn, greenlet.getcurrent())
    child.loop = asyncio.get_running_loop()
    cancelled = False
    try:
        step = child.switch(*args)
        while not child.dead:
            wait = step if isinstance(step, asyncio.Future) else asyncio.ensure_future(step)
            if not wait.done():
                gate = _Unstoppable(wait)
                await gate
                cancelled = cancelled or gate.refused
            try:
                value = wait.result()
            except BaseException as exc:
                step = child.throw(exc)
            else:
                step = child.switch(value)
    except (Exception, asyncio.CancelledError):
        if not cancelled:
            raise
    if cancelled:
        raise asyncio.CancelledError
    return step


class _Unstoppable:
    """An asyncio future's wait as :func:`run_to_end`'s task sees it: the task's cancel request is refused
    (and noted), so the task is woken when the future is done, with CancelledError."""

    __slots__ = ("_asyncio_future_blocking", "_future", "refused")

    def __init__(self, future: asyncio.Future[Any]) -> None:
        self._future = future
        self._asyncio_future_blocking = False
        self.refused = False

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._future.get_loop()

    def add_done_callback(self, fn: Callable[..., object], *, context: Any = None) -> None:
        self._future.add_done_callback(fn, context=context)

    def remove_done_callback(self, fn: Callable[..., object]) -> int:
        return self._future.remove_done_callback(fn)

    def done(self) -> bool:
        return self._future.done()

    def result(self) -> Any:
        return self._future.result()

    def cancel(self, msg: object = None) -> bool:
        self.refused = True
        return False

    def __await__(self) -> Any:
        """Wait until the future is done; its outcome is read from the future (asyncio throws its error
        here, or CancelledError for a refused cancel request)."""
        self._asyncio_future_blocking = True
        try:
            yield self
        except BaseException:
            if not self._future.done():  # (the task is being closed)
                raise


def await_(awaitable: Awaitable[T]) -> T:
    """Wait for ``awaitable`` on the event loop from protocol code running in :func:`run_sync`."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Bridged):
        raise RuntimeError("await_ outside run_sync: this object belongs to an asyncio client")
    if current.holding:
        if hasattr(awaitable, "close"):  # (a coroutine that will never be awaited)
            awaitable.close()
        raise RuntimeError(
            "protocol code waits while it holds a no-wait lock: another greenlet of this thread asking for it"
            " would stop the event loop (wait outside the lock, or use runtime.green.lock)"
        )
    return current.parent.switch(awaitable)


def event_loop() -> asyncio.AbstractEventLoop:
    """The event loop of the :func:`run_sync` running this code (RuntimeError outside one)."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Bridged):
        raise RuntimeError("this object belongs to an asyncio client: use it inside its event loop")
    return current.loop


def sleep(seconds: float) -> None:
    """Wait ``seconds``: on the event loop inside :func:`run_sync`, else on this thread."""
    if bridged():
        import asyncio

        await_(asyncio.sleep(seconds))
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


class _GreenSemaphore:
    """A semaphore of greenlets on one event loop: a holder may wait (an HBase call) while others queue.
    Taking a free slot needs no trip through the loop."""

    def __init__(self, value: int) -> None:
        self._value = value
        self._waiters: deque[asyncio.Future[None]] = deque()

    def acquire(self, blocking: bool = True, timeout: float | None = -1) -> bool:
        import asyncio

        if self._value > 0 and not self._waiters:
            self._value -= 1
            return True
        if not blocking:
            return False
        waiter = event_loop().create_future()
        self._waiters.append(waiter)
        try:
            forever = timeout is None or timeout < 0
            await_(waiter if forever else asyncio.wait_for(asyncio.shield(waiter), timeout))
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():  # handed over as the time ran out: ours
                return True
            waiter.cancel()
            return False
        except BaseException:
            if waiter.done() and not waiter.cancelled():  # handed over meanwhile: pass it on
                self.release()
            waiter.cancel()
            raise
        return True  # handed over by release()

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to it, still taken
                return
        self._value += 1

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /
    ) -> None:
        self.release()


class _GreenLock(_GreenSemaphore):
    """A lock of greenlets on one event loop (a semaphore of one slot)."""

    def __init__(self) -> None:
        super().__init__(1)


class _GreenRLock(_GreenLock):
    """A reentrant :class:`_GreenLock`: the greenlet holding it may take it again."""

    def __init__(self) -> None:
        super().__init__()
        self._owner: object = None
        self._depth = 0

    def acquire(self, blocking: bool = True, timeout: float | None = -1) -> bool:
        me = greenlet.getcurrent()
        if self._owner is me:
            self._depth += 1
            return True
        if not super().acquire(blocking, timeout):
            return False
        self._owner, self._depth = me, 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            super().release()


class _GreenEvent:
    """An event of greenlets on one event loop. A wait is one future of the loop (and a timer when it has a
    timeout): no task, as ``asyncio.wait_for`` makes for every wait, which a background loop waking every
    few milliseconds (the sequencer's reservation keeper) would pay each time."""

    def __init__(self) -> None:
        self._flag = False
        self._waiters: list[asyncio.Future[bool]] = []

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        self._flag = True
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            _resolve(waiter, True)

    def clear(self) -> None:
        self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        loop = event_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        timer = None if timeout is None else loop.call_later(max(0.0, timeout), _resolve, waiter, False)
        try:
            return await_(waiter)
        finally:
            if timer is not None:
                timer.cancel()
            if waiter in self._waiters:  # timed out or cancelled: no longer waiting
                self._waiters.remove(waiter)


def _resolve(waiter: asyncio.Future[bool], value: bool) -> None:
    if not waiter.done():
        waiter.set_result(value)


class _GreenCondition:
    """A condition variable over a :class:`_GreenLock` (``wait`` releases it while waiting)."""

    def __init__(self, lock: _GreenLock) -> None:
        self._lock = lock
        self._waiters: list[asyncio.Future[None]] = []

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None, /
    ) -> None:
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        import asyncio

        waiter = event_loop().create_future()
        self._waiters.append(waiter)
        self._lock.release()
        try:
            await_(asyncio.wait_for(asyncio.shield(waiter), timeout))
            return True
        except TimeoutError:
            return False
        finally:
            waiter.cancel()
            self._lock.acquire()

    def notify_all(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


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


class _GreenTask:
    """A background loop of protocol code run as a task of the event loop (instead of a thread)."""

    def __init__(self, target: Callable[[], None], name: str) -> None:
        self._task = event_loop().create_task(run_sync(target), name=name)

    def join(self, timeout: float | None = None) -> None:
        import asyncio

        if not self._task.done() and asyncio.current_task() is not self._task:  # (never waits for itself)
            try:
                await_(asyncio.wait_for(asyncio.shield(self._task), timeout))
            except TimeoutError:
                return


CHECK_LOCKS_ENV = "TMS_HBASE_CHECK_LOCKS"
"""Set to 1 (the test suite does), :func:`no_wait_lock` makes locks that check their rule."""


class _CheckedLock:
    """A thread lock that counts itself in the :func:`run_sync` greenlet holding it, so that :func:`await_`
    refuses to switch away from that greenlet (a Python wrapper: the check costs each acquire and release)."""

    __slots__ = ("_lock",)

    def __init__(self, lock: Lock) -> None:
        self._lock = lock

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._lock.acquire(blocking, timeout):
            return False
        current = greenlet.getcurrent()
        if isinstance(current, _Bridged):
            current.holding += 1
        return True

    def release(self) -> None:
        current = greenlet.getcurrent()
        if isinstance(current, _Bridged):
            current.holding -= 1
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
    environment (the tests), a wait inside :func:`run_sync` while holding one raises RuntimeError."""
    lock: Lock = threading.RLock() if reentrant else threading.Lock()
    return _CheckedLock(lock) if os.environ.get(CHECK_LOCKS_ENV) == "1" else lock


def lock() -> Lock:
    """A lock for the code that makes it: a greenlet lock inside :func:`run_sync`, else a thread lock."""
    return _GreenLock() if bridged() else threading.Lock()


def rlock() -> Lock:
    """A reentrant lock, like :func:`lock`."""
    return _GreenRLock() if bridged() else threading.RLock()


def wait_readable(sock: socket.socket, timeout: float) -> bool:
    """Wait until ``sock`` has something to read or ``timeout`` seconds passed; True if it has. On the
    event loop inside :func:`run_sync`, else with select()."""
    if not bridged():
        readable, _, _ = select.select([sock], [], [], max(0.0, timeout))
        return bool(readable)
    import asyncio

    loop = event_loop()
    rang: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not rang.done():
            rang.set_result(None)

    loop.add_reader(sock, ready)
    try:
        await_(asyncio.wait_for(rang, max(0.0, timeout)))
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(sock)


def event() -> Event:
    """An event, like :func:`lock`."""
    return _GreenEvent() if bridged() else threading.Event()


def condition(on: Lock) -> Condition:
    """A condition variable on the lock ``on`` (made by :func:`lock`)."""
    if isinstance(on, _GreenLock):
        return _GreenCondition(on)
    return threading.Condition(on)  # type: ignore[arg-type]


def semaphore(value: int) -> Semaphore:
    """A semaphore of ``value`` slots, like :func:`lock`."""
    return _GreenSemaphore(value) if bridged() else _ThreadSemaphore(value)


def start_thread(target: Callable[[], None], name: str) -> Joinable:
    """Run ``target`` in the background: a task of the event loop inside :func:`run_sync`, else a daemon thread."""
    if bridged():
        return _GreenTask(target, name)
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread
