"""The gateway's thread pool (gateway/threads.py): results and errors come back, at most ``size`` calls run
at once, a cancelled task waits for its started call (unless it abandons it) and its queued call never runs."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tms_hbase_gateway.threads import Threads


def test_results_errors_and_the_limit() -> None:
    threads = Threads(2, "t")
    running, most = 0, 0
    lock = threading.Lock()

    def work(n: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        if n == 3:
            raise ValueError("three")
        return n * 10

    async def main() -> list[object]:
        return await asyncio.gather(*(threads.run(work, n) for n in range(6)), return_exceptions=True)

    results = asyncio.run(main())
    assert results[:3] == [0, 10, 20] and results[4:] == [40, 50]
    assert isinstance(results[3], ValueError)
    assert most == 2
    threads.close()


def test_a_cancelled_task_waits_for_its_started_call_and_its_queued_call_never_runs() -> None:
    threads = Threads(1, "t")
    release = threading.Event()
    ran: list[str] = []

    def slow() -> None:
        release.wait(10)
        ran.append("slow")

    async def main() -> float:
        first = asyncio.create_task(threads.run(slow))
        queued = asyncio.create_task(threads.run(ran.append, "queued"))
        await asyncio.sleep(0.1)  # slow has started; queued waits for the one thread
        queued.cancel()
        first.cancel()
        asyncio.get_running_loop().call_later(0.3, release.set)
        started = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await first
        with pytest.raises(asyncio.CancelledError):
            await queued
        return time.monotonic() - started

    waited = asyncio.run(main())
    assert waited >= 0.25, "the cancelled task returned while its call was still running"
    assert ran == ["slow"]
    threads.close()


def test_an_abandoned_call_does_not_hold_up_its_task() -> None:
    threads = Threads(1, "t")
    release = threading.Event()

    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await threads.run(release.wait, 10, abandon=True)
        return time.monotonic() - started

    assert asyncio.run(main()) < 5
    release.set()
    threads.close()
