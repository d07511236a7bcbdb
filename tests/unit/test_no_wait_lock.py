"""``runtime.green.no_wait_lock``: the lock of state shared by threads and the greenlets of event loops. Nothing
may wait while holding it; with the check on (the tests), a wait inside run_sync under it raises at once rather
than leaving the next greenlet that asks for it to stop the event loop."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from tms_hbase.runtime import bridge, green


def test_the_test_suite_checks_its_locks() -> None:
    assert os.environ[green.CHECK_LOCKS_ENV] == "1"
    assert type(green.no_wait_lock()).__name__ == "_CheckedLock"


def test_a_wait_under_the_lock_raises_and_releases_nothing_it_does_not_hold() -> None:
    guard = green.no_wait_lock()

    def waits_under_the_lock() -> None:
        with guard:
            green.sleep(0.01)

    with pytest.raises(RuntimeError, match="no-wait lock"):
        asyncio.run(bridge.run_sync(waits_under_the_lock))
    assert guard.acquire(blocking=False), "the lock is released as the error leaves the with block"
    guard.release()


def test_waits_outside_the_lock_and_reentry_are_fine() -> None:
    guard = green.no_wait_lock(reentrant=True)
    seen = []

    def holds_then_waits() -> None:
        with guard, guard:
            seen.append(1)
        green.sleep(0.01)
        with guard:
            seen.append(2)
        green.sleep(0.01)

    async def both() -> None:
        await asyncio.gather(bridge.run_sync(holds_then_waits), bridge.run_sync(holds_then_waits))

    asyncio.run(both())
    assert sorted(seen) == [1, 1, 2, 2]


def test_threads_use_it_as_a_thread_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(green.CHECK_LOCKS_ENV)
    assert isinstance(green.no_wait_lock(), type(threading.Lock()))
    guard = green.no_wait_lock(reentrant=True)
    with guard, guard:  # reentrant on a thread
        pass
