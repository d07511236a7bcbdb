"""The memory-port scenarios also run through the asyncio bridge (docs/architecture.md#how-protocol-code-waits).

A module opts in with ``pytestmark = pytest.mark.usefixtures("runner")``: each of its tests then runs twice,
on the test's thread as the synchronous client runs protocol code, and inside
:func:`tms_hbase.runtime.bridge.run_sync` on an event loop in asyncio's debug mode, as the asyncio client and
the gateway run it. There, ``time.sleep`` and ``select.select`` called by the library raise, so protocol code
that would block the loop fails the test instead of freezing every coroutine of its thread (the test's own
sleeps wait on the loop); debug mode raises on a loop call from another thread, and a coroutine never
awaited is an error. A test that starts threads of its own, or checks which thread ran a step, is marked
``threads_only`` and runs on threads only.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tms_hbase.runtime import bridge, green


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "threads_only: not run through the asyncio bridge (it starts threads or checks which thread ran)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``runner``: how the test's protocol code runs, on this thread or in the asyncio bridge."""
    if "runner" in metafunc.fixturenames:
        threads_only = metafunc.definition.get_closest_marker("threads_only") is not None
        metafunc.parametrize("runner", ["thread"] if threads_only else ["thread", "bridge"])


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    callspec = getattr(pyfuncitem, "callspec", None)
    if callspec is None or callspec.params.get("runner") != "bridge":
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    with _blocking_calls_refused(), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "coroutine ... was never awaited"
        asyncio.run(bridge.run_sync(pyfuncitem.obj, **kwargs), debug=True)
    return True


def _refuse(name: str, real: Callable[..., Any], instead: Callable[..., Any]) -> Callable[..., Any]:
    """``real`` refused to the library's code inside the bridge; the test's own code (waiting for a window
    to pass, or for a condition) waits with ``instead`` there, on the loop."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if not bridge.inside():
            return real(*args, **kwargs)
        if sys._getframe(1).f_globals.get("__name__", "").startswith("tms_hbase"):
            raise AssertionError(f"{name} inside the asyncio bridge blocks the event loop")
        return instead(*args, **kwargs)

    return call


@contextlib.contextmanager
def _blocking_calls_refused() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time, "sleep", _refuse("time.sleep", time.sleep, green.sleep))
        patch.setattr(select, "select", _refuse("select.select", select.select, select.select))
        yield
