"""The asyncio bridge: protocol code run in a greenlet on an event loop (:func:`run_sync`).

The asyncio client (:mod:`tms_hbase.aio`) and the gateway run the very code of the synchronous client here:
wherever it waits (an HBase call, a backoff, a lock another publish holds, a hand-over between publishes)
the greenlet hands an awaitable to the event loop (:func:`await_`) and is resumed with its result, so
thousands of operations are in flight on one thread and nothing blocks the loop. This is how SQLAlchemy
runs its ORM over asyncio drivers.

Protocol code does not import this module: it waits through :mod:`tms_hbase.runtime.green`, whose
primitives use the greenlet ones below inside :func:`run_sync` only. So the synchronous client never loads
greenlet, which the ``asyncio`` extra installs (``pip install 'tms-hbase[asyncio]'``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

try:
    import greenlet
except ModuleNotFoundError as missing:
    raise ModuleNotFoundError(
        "tms-hbase's asyncio client and gateway need greenlet: pip install 'tms-hbase[asyncio]'", name="greenlet"
    ) from missing

if TYPE_CHECKING:
    import asyncio
    import socket

# asyncio is imported where code runs on an event loop (inside run_sync, where it is loaded already).

T = TypeVar("T")


class _Bridged(greenlet.greenlet):
    """A greenlet running protocol code for an event loop (its parent is the coroutine awaiting it)."""

    loop: asyncio.AbstractEventLoop
    holding = 0  # the checked no-wait locks it holds (see no_wait_lock)


def inside() -> bool:
    """True inside :func:`run_sync`: waits go to the event loop."""
    return isinstance(greenlet.getcurrent(), _Bridged)


def count_held(step: int) -> None:
    """Count a checked no-wait lock taken (1) or given back (-1) by the :func:`run_sync` running this code,
    so that :func:`await_` refuses to switch while it holds one (``green.no_wait_lock``)."""
    current = greenlet.getcurrent()
    if isinstance(current, _Bridged):
        current.holding += step


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


class GreenSemaphore:
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


class GreenLock(GreenSemaphore):
    """A lock of greenlets on one event loop (a semaphore of one slot)."""

    def __init__(self) -> None:
        super().__init__(1)


class GreenRLock(GreenLock):
    """A reentrant :class:`GreenLock`: the greenlet holding it may take it again."""

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


class GreenEvent:
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


class GreenCondition:
    """A condition variable over a :class:`GreenLock` (``wait`` releases it while waiting)."""

    def __init__(self, lock: GreenLock) -> None:
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


class GreenTask:
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


def wait_readable(sock: socket.socket, timeout: float) -> bool:
    """Wait on the event loop until ``sock`` has something to read or ``timeout`` seconds passed; True if it has."""
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
