"""``tms_hbase.runtime.bridge.run_to_end``: protocol code run in the awaiting task that a cancellation never
interrupts (the gateway runs every library call with it). Run on asyncio's own loop and on uvloop, the
gateway's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from tms_hbase.runtime import bridge, green
from tms_hbase.runtime.bridge import run_to_end

LOOPS: dict[str, Callable[[Coroutine[Any, Any, Any]], Any]] = {"asyncio": asyncio.run, "uvloop": uvloop.run}


@pytest.fixture(params=sorted(LOOPS))
def run(request: pytest.FixtureRequest) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    return LOOPS[request.param]


def test_it_returns_what_the_code_returns_and_raises_what_it_raises(run: Callable[..., Any]) -> None:
    async def scenario() -> tuple[int, str]:
        loop = asyncio.get_running_loop()

        def waits(value: int) -> int:
            future = bridge.event_loop().create_future()
            loop.call_soon(future.set_result, value)
            return bridge.await_(future) + 1

        def fails(seen: list[str]) -> None:
            future = bridge.event_loop().create_future()
            loop.call_soon(future.set_exception, KeyError("k"))
            try:
                bridge.await_(future)
            except KeyError as error:  # the code sees its wait's error where it waits
                seen.append(f"seen {error}")
                raise

        got = await run_to_end(waits, 41)
        seen: list[str] = []
        with pytest.raises(KeyError):
            await run_to_end(fails, seen)
        return got, seen

    assert run(scenario()) == (42, ["seen 'k'"])


def test_a_cancelled_call_runs_on_through_every_wait_then_raises_cancelled(run: Callable[..., Any]) -> None:
    """Cancelled (twice) while it waits, the code sees neither: each wait ends with its own result, the
    code finishes, and only then does the awaiting task get CancelledError."""

    async def scenario() -> tuple[list[str], bool]:
        loop = asyncio.get_running_loop()
        steps: list[str] = []
        waiting = asyncio.Event()

        def work() -> str:
            for name in ("first", "second"):
                future = bridge.event_loop().create_future()
                loop.call_later(0.05, future.set_result, name)
                loop.call_soon(waiting.set)
                steps.append(bridge.await_(future))
            green.sleep(0.01)  # a coroutine it hands over is not interrupted either
            steps.append("end")
            return "result"

        task = asyncio.ensure_future(run_to_end(work))
        for _ in range(2):
            await asyncio.wait_for(waiting.wait(), 5)  # (a deadline: a broken run_to_end fails, not hangs)
            waiting.clear()
            task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return steps, task.cancelled()

    assert run(scenario()) == (["first", "second", "end"], True)


def test_a_cancelled_call_that_fails_raises_cancelled(run: Callable[..., Any]) -> None:
    async def scenario() -> bool:
        loop = asyncio.get_running_loop()
        ended = asyncio.Event()

        def work() -> None:
            future = bridge.event_loop().create_future()
            loop.call_later(0.05, future.set_exception, RuntimeError("failed after the cancel"))
            try:
                bridge.await_(future)
            finally:
                loop.call_soon(ended.set)

        task = asyncio.ensure_future(run_to_end(work))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return ended.is_set()

    assert run(scenario()) is True


def test_a_timeout_around_it_waits_for_the_end_and_is_a_timeout(run: Callable[..., Any]) -> None:
    """``asyncio.timeout`` cancels the task: the call still ends, and the caller gets TimeoutError."""

    async def scenario() -> list[str]:
        steps: list[str] = []

        def work() -> None:
            green.sleep(0.1)
            steps.append("end")

        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await run_to_end(work)
        return steps

    assert run(scenario()) == ["end"]
