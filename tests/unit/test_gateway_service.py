"""The gateway's library calls on its event loop (gateway/service.py, ``Gateway.run`` and ``Gateway.wait``):
results and errors come back, at most ``threads`` calls (``long_polls`` waits) run at once, a cancelled
request waits for its started call to end (never leaving it half-way) and its call still waiting for a
slot never runs. The calls here wait on the loop as library code does (through ``bridge.await_``); the
real client's calls are covered by the gateway's integration tests."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tms_hbase.runtime import bridge, green
from tms_hbase_gateway.config import Settings
from tms_hbase_gateway.metrics import Metrics
from tms_hbase_gateway.service import Gateway


def gateway(threads: int = 2, long_polls: int = 1) -> Gateway:
    client = cast(Any, SimpleNamespace(max_batch_bytes=1024))
    return Gateway(Settings(threads=threads, long_polls=long_polls), Metrics(), client)


def test_results_errors_and_the_limits() -> None:
    running, most = 0, {"run": 0, "wait": 0}

    def work(kind: str, n: int) -> int:
        nonlocal running
        running += 1
        most[kind] = max(most[kind], running)
        green.sleep(0.01)  # waits on the loop: the other calls run meanwhile, up to the limit
        running -= 1
        if n == 3:
            raise ValueError("three")
        return n * 10

    async def main() -> tuple[list[object], list[object]]:
        g = gateway(threads=2, long_polls=1)
        calls = await asyncio.gather(*(g.run(work, "run", n) for n in range(6)), return_exceptions=True)
        waits = await asyncio.gather(*(g.wait(work, "wait", n) for n in range(3)), return_exceptions=True)
        return calls, waits

    calls, waits = asyncio.run(main())
    assert calls[:3] == [0, 10, 20] and calls[4:] == [40, 50]
    assert isinstance(calls[3], ValueError)
    assert waits == [0, 10, 20]
    assert most == {"run": 2, "wait": 1}


def test_a_cancelled_request_waits_for_its_started_call_and_its_queued_call_never_runs() -> None:
    ran: list[str] = []

    async def main() -> list[str]:
        g = gateway(threads=1)
        started, release = asyncio.Event(), asyncio.Event()

        def slow() -> None:
            started.set()
            bridge.await_(release.wait())
            ran.append("slow")

        first = asyncio.create_task(g.run(slow))
        queued = asyncio.create_task(g.run(ran.append, "queued"))
        await started.wait()  # slow holds the one slot; queued waits for it
        queued.cancel()
        first.cancel()
        await asyncio.sleep(0)
        first.cancel()  # cancelled again while it waits for its call: it still waits
        asyncio.get_running_loop().call_soon(release.set)
        with pytest.raises(asyncio.CancelledError):
            await first
        seen = list(ran)  # what had run when the cancelled request ended
        with pytest.raises(asyncio.CancelledError):
            await queued
        await g.run(ran.append, "after")  # the slot was given back
        return seen

    seen = asyncio.run(main())
    assert seen == ["slow"], "the cancelled request ended while its call was still running"
    assert ran == ["slow", "after"]
