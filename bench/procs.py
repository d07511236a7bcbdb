"""A few long-lived worker processes (spawn start method) that run module-level benchmark functions.

Starting a Python process and importing happybase takes about a second, so workers are started
once per benchmark and given one job after another; module-level caches in the jobs (open clients)
survive between jobs. A job is ``(module, function, args)``; its return value comes back pickled.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import multiprocessing as mp
import signal
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn`` of a server the benchmark starts: Linux kills it (SIGKILL) when the benchmark
    process dies, even by SIGKILL, so no server outlives its run."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _serve(pipe: Connection) -> None:
    pipe.send(("ok", "ready"))
    while True:
        job = pipe.recv()
        if job is None:
            return
        module, name, args = job
        try:
            answer = ("ok", getattr(importlib.import_module(module), name)(*args))
        except BaseException:  # reported to the parent, which raises
            answer = ("error", traceback.format_exc())
        pipe.send(answer)


class Workers:
    """``count`` worker processes; ``submit`` a job to one, then collect its ``result``."""

    def __init__(self, count: int, start_timeout: float = 60.0) -> None:
        ctx = mp.get_context("spawn")
        self._pipes: list[Connection] = []
        self._procs = []
        try:
            for _ in range(count):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(child,), daemon=True)
                proc.start()
                child.close()
                self._pipes.append(parent)
                self._procs.append(proc)
            for i in range(count):
                self.result(i, start_timeout)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def submit(self, worker: int, function: Callable[..., Any], *args: object) -> None:
        self._pipes[worker].send((function.__module__, function.__name__, args))

    def result(self, worker: int, timeout: float) -> Any:
        pipe = self._pipes[worker]
        if not pipe.poll(timeout):
            raise TimeoutError(f"benchmark worker {worker} did not answer within {timeout:.0f} s")
        try:
            status, value = pipe.recv()
        except EOFError:
            raise RuntimeError(f"benchmark worker {worker} exited (see its error above)") from None
        if status != "ok":
            raise RuntimeError(f"benchmark worker {worker} failed:\n{value}")
        return value

    def close(self) -> None:
        for pipe in self._pipes:
            with contextlib.suppress(OSError):
                pipe.send(None)
        for proc in self._procs:
            proc.join(10)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
        self._procs.clear()
