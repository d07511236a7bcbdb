"""The console's per-worker state: recent answers served while a fresh read runs behind them, and the
bounded sample history its charts draw."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tms_hbase.errors import HBaseUnavailable
from tms_hbase_gateway.console import history
from tms_hbase_gateway.console.history import History
from tms_hbase_gateway.console.recent import Recent


def _read(value: Callable[[], Any]) -> Callable[[], Awaitable[Any]]:
    """A read (as the console's are: awaited) that answers ``value()``."""

    async def read() -> Any:
        return value()

    return read


def test_a_recent_answer_is_served_while_a_new_read_replaces_it() -> None:
    async def scenario() -> list[Any]:
        recent, reads = Recent(max_age=0.0), iter([1, 2, 3])
        seen = [await recent.get("t", _read(lambda: next(reads)))]  # none yet: read while waiting
        seen.append(await recent.get("t", _read(lambda: next(reads))))  # stale: served, and read behind it
        await asyncio.sleep(0)  # the read behind it finishes
        seen.append(await recent.get("t", _read(lambda: next(reads))))
        return seen

    assert asyncio.run(scenario()) == [1, 1, 2]


def test_a_failed_read_behind_drops_the_answer_so_the_next_caller_sees_the_error() -> None:
    def fail() -> int:
        raise HBaseUnavailable("down")

    async def scenario() -> str:
        recent = Recent(max_age=0.0)
        await recent.get("t", _read(lambda: 1))
        assert await recent.get("t", _read(fail)) == 1
        await asyncio.sleep(0)
        try:
            await recent.get("t", _read(fail))
        except HBaseUnavailable as exc:
            return str(exc)
        return "no error"

    assert asyncio.run(scenario()) == "down"


def test_a_change_replaces_or_drops_the_answer() -> None:
    async def scenario() -> list[Any]:
        recent = Recent(max_age=60.0)
        first = await recent.get("t", _read(lambda: "old"))
        recent.put("t", "changed")
        second = await recent.get("t", _read(lambda: "unused"))
        recent.forget("t")
        return [first, second, await recent.get("t", _read(lambda: "read again"))]

    assert asyncio.run(scenario()) == ["old", "changed", "read again"]


def test_the_history_keeps_one_sample_per_gap_and_a_bounded_number(monkeypatch: Any) -> None:
    now = [1_000_000]
    monkeypatch.setattr(history, "_now_ms", lambda: now[0])
    kept = History(max_topics=2)
    for step in range(history.KEEP + 10):
        kept.record("a:t", step, {"s": (step, step / 10)})
        now[0] += history.MIN_GAP_MS
    now[0] -= 1  # within the gap after the last sample: a new one replaces it
    kept.record("a:t", 999, {})
    samples = kept.samples("a:t")
    assert len(samples) == history.KEEP and samples[-1][1] == 999 and samples[0][1] == 10
    assert samples[-2][1] == history.KEEP + 8
    assert kept.lag_samples("a:t", "s")[-1][1:] == [history.KEEP + 9, (history.KEEP + 9) / 10]
    kept.record("b:t", 1, {})
    kept.record("c:t", 1, {})  # a third series: the oldest one goes
    assert kept.samples("b:t") and kept.samples("c:t") and not kept.samples("a:t")
