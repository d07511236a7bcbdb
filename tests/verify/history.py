"""The history: one JSON line per event, one file per process, in ``<run>/history/<process>.jsonl``.

Every event carries ``p`` (the process name), ``t`` (real wall time, seconds) and ``local`` (the
process's own wall clock, which libfaketime may skew). A process under libfaketime cannot read the real
wall clock, but its monotonic clock is not faked (FAKETIME_DONT_FAKE_MONOTONIC=1) and is the host's, so
``t = time.monotonic() + base`` where the runner, whose clock is real, measured ``base`` once and passes
it in ``$VERIFY_MONO_BASE``.

Operations follow Jepsen's shape: an ``invoke`` event, then ``ok``, ``fail`` (it certainly did not
happen) or ``info`` (unknown: an error that leaves the outcome open); an invoke without a completion
(the process was killed) is unknown too. Each line is flushed before the operation goes on, so a
SIGKILL loses nothing that was recorded.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MONO_BASE_ENV = "VERIFY_MONO_BASE"


def mono_base() -> float:
    """Real wall time minus the monotonic clock, as measured by a process whose clock is real."""
    return time.time() - time.monotonic()


class Recorder:
    """Appends events to this process's history file."""

    def __init__(self, path: Path, process: str, base: float | None = None) -> None:
        self.process = process
        self.base = float(os.environ[MONO_BASE_ENV]) if base is None else base
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - kept open for the process's life
        self._op = 0

    def now(self) -> float:
        """Real wall time (seconds), whatever this process's wall clock says."""
        return time.monotonic() + self.base

    def event(self, event_type: str, /, **fields: Any) -> dict[str, Any]:
        record = {"type": event_type, "p": self.process, "t": round(self.now(), 4), "local": round(time.time(), 4)}
        record.update(fields)
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()
        return record

    def invoke(self, f: str, /, **fields: Any) -> int:
        """Record the start of an operation; returns its number in this process (``op``)."""
        self._op += 1
        self.event("invoke", f=f, op=self._op, **fields)
        return self._op

    def complete(self, outcome: str, f: str, op: int, /, **fields: Any) -> None:
        self.event(outcome, f=f, op=op, **fields)

    def close(self) -> None:
        self._file.close()


def read_history(run_dir: Path) -> list[dict[str, Any]]:
    """Every event of a run, in real time order (a line cut short by a kill is skipped)."""
    events: list[dict[str, Any]] = []
    for path in sorted((run_dir / "history").glob("*.jsonl")):
        events.extend(_lines(path))
    events.sort(key=lambda e: e["t"])
    return events


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with open(path) as f:
        for line in f:
            if line.endswith("\n"):
                try:
                    yield json.loads(line)
                except ValueError:
                    continue
