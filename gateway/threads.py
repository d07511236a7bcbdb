"""A small thread pool for the event loop's blocking calls: at most ``size`` run at once, the rest queue.

Why not ``anyio.to_thread.run_sync`` (what the gateway used first): per call it takes a capacity limiter,
enters a cancel scope, looks the async library up and hands the call over through a ``queue.Queue``
(a Python condition variable): about 28 µs of CPU per hop on uvloop against 10 µs here, and the event
loop's CPU per publish went from about 300 to 230 µs with it (docs/benchmarks-history.md, 2026-11-23 18:07).
Here a call is one put on a ``queue.SimpleQueue`` (C) and one ``call_soon_threadsafe`` back, with the same semantics the
gateway relied on:

* a call a thread has started is waited for when the awaiting task is cancelled (the library is never
  left running behind a finished request), unless ``abandon`` (a hung ping);
* a call still queued when its task is cancelled never runs (its slot is not held by nobody).

Threads start on demand, up to ``size``, and stay until :meth:`Threads.close`.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
_QUEUED, _RUNNING, _SKIPPED = 0, 1, 2


class _Call(Generic[T]):
    """One call on its way through the pool; ``state`` changes under the pool's lock."""

    __slots__ = ("args", "done", "function", "future", "loop", "state", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, function: Callable[..., T], args: tuple[Any, ...]) -> None:
        self.loop, self.function, self.args = loop, function, args
        self.future: asyncio.Future[T] = loop.create_future()
        self.state = _QUEUED
        self.done = False  # set on the loop once the call returned (or was skipped)
        self.waiter: asyncio.Future[None] | None = None  # a cancelled task waiting for the call to end

    def finish(self, result: Any, error: BaseException | None) -> None:
        """On the loop: hand the outcome to the awaiting task, or tell a cancelled one that the call ended."""
        self.done = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)
        if self.future.done():
            return
        if error is None:
            self.future.set_result(result)
        else:
            self.future.set_exception(error)


class Threads:
    """Runs blocking calls for one event loop in at most ``size`` threads named ``name``."""

    def __init__(self, size: int, name: str) -> None:
        self.size, self.name = size, name
        self._calls: queue.SimpleQueue[_Call[Any] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting for a call
        self._queued = 0  # calls no thread has taken yet

    async def run(self, function: Callable[..., T], *args: Any, abandon: bool = False) -> T:
        """``function(*args)`` in a pool thread; its result or its exception."""
        call = _Call(asyncio.get_running_loop(), function, args)
        with self._lock:
            self._queued += 1
            start = self._queued > self._idle and len(self._threads) < self.size
            if start:
                thread = threading.Thread(target=self._serve, name=f"{self.name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
        if start:
            thread.start()
        self._calls.put(call)
        try:
            return await call.future
        except asyncio.CancelledError:
            with self._lock:
                if call.state == _QUEUED:
                    call.state = _SKIPPED
            if call.state == _RUNNING and not abandon:
                await self._outlast(call)
            raise

    @staticmethod
    async def _outlast(call: _Call[Any]) -> None:
        """Wait (through further cancellations) until a started call has returned."""
        while not call.done:
            call.waiter = call.loop.create_future()
            try:
                await call.waiter
            except asyncio.CancelledError:
                continue

    def close(self) -> None:
        """Let every thread end once the calls queued before this one are done (does not wait)."""
        with self._lock:
            threads = len(self._threads)
        for _ in range(threads):
            self._calls.put(None)

    def _serve(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            call = self._calls.get()
            with self._lock:
                self._idle -= 1
                if call is None:
                    return
                self._queued -= 1
                if call.state == _SKIPPED:
                    continue
                call.state = _RUNNING
            result, error = None, None
            try:
                result = call.function(*call.args)
            except BaseException as exc:  # handed to the awaiting task
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
                call.loop.call_soon_threadsafe(call.finish, result, error)
            del call, result, error
