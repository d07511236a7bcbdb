"""The faults, chosen by a seeded RNG, and the processes they hit.

- ``kill``: SIGKILL of a random process (writer, reader, consumer, prober, sweeper, transaction server);
  the runner starts a replacement of a long-lived role;
- ``stop``: SIGSTOP of a random process, SIGCONT 0.5-6 s later (a GC pause, a suspended VM);
- ``clock``: a jump of one process's wall clock to a new offset (libfaketime re-reads the offset from
  the process's file every second); every process also starts with an offset of its own: a few seconds
  (half of them), up to ``--max-skew`` (60 s; a third), or none;
- ``proxy``: the Thrift connection of every process goes through a TCP proxy that is stalled (requests
  swallowed) for 0.5-6 s, resets every connection for 0.2-2 s, or cuts every open connection once;
- ``hbase``: SIGKILL of the run's own standalone HBase and a restart (needs ``--own-hbase``; see
  ``own_hbase``).

Every fault is recorded to the runner's history as a ``fault`` event with a ``phase`` (start, end).
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..tcp_proxy import TcpProxy
from .history import Recorder
from .own_hbase import OwnHBase

FAULTS = ("kill", "stop", "clock", "proxy", "hbase")
MAX_SKEW = 60.0

FAKETIME_GLOB = "/usr/lib/*/faketime/libfaketimeMT.so.1"  # Debian's libfaketime (package faketime)


def faketime_lib() -> str:
    """The path of libfaketime's multi-threaded library; SystemExit if it is not installed."""
    found = sorted(glob.glob(FAKETIME_GLOB))
    if not found:
        raise SystemExit(
            "the clock fault needs libfaketime: apt-get install faketime (make verify installs it), "
            "or leave clock out of --faults"
        )
    return found[0]


@dataclass
class Proc:
    name: str
    role: str
    popen: subprocess.Popen[bytes]
    clock_file: Path | None = None
    long_lived: bool = False
    stopped: bool = False
    spared: bool = False  # never a fault's target
    offset: float = 0.0
    cfg: dict[str, Any] = field(default_factory=dict)

    def alive(self) -> bool:
        return self.popen.poll() is None


def initial_offset(rng: random.Random, max_skew: float = MAX_SKEW) -> float:
    """A process's first clock offset: a few seconds (half of them), up to ``max_skew`` (a third), or none."""
    draw = rng.random()
    if draw < 0.5:
        small = min(3.0, max_skew)
        return round(rng.uniform(-small, small), 3)
    if draw < 0.83:
        return round(rng.uniform(-max_skew, max_skew), 3)
    return 0.0


def write_offset(path: Path, seconds: float) -> None:
    """libfaketime's relative offset format: ``+2.5s`` / ``-40s``; written whole, then renamed."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{seconds:+.3f}s\n")
    tmp.replace(path)


class Nemesis:
    def __init__(
        self,
        rng: random.Random,
        faults: set[str],
        rec: Recorder,
        procs: Callable[[], list[Proc]],
        proxy: TcpProxy,
        own_hbase: OwnHBase | None,
        interval: tuple[float, float],
        max_skew: float = MAX_SKEW,
        hbase_gap: float = 0.0,
    ) -> None:
        self.rng, self.faults, self.rec, self.procs = rng, faults, rec, procs
        self.proxy, self.own_hbase, self.interval = proxy, own_hbase, interval
        self.max_skew = max_skew
        self.hbase_gap = hbase_gap  # least seconds HBase serves between the end of one hbase fault and the next
        self.hbase_back = float("-inf")  # when HBase last came back
        self.kinds = sorted(faults & {"kill", "stop", "clock", "proxy", "hbase"})
        self.next_at = rec.now() + rng.uniform(*interval)
        self.pending: list[tuple[float, Callable[[], None]]] = []
        self.hbase_thread: threading.Thread | None = None

    def tick(self) -> None:
        now = self.rec.now()
        due = [action for at, action in self.pending if at <= now]
        self.pending = [(at, action) for at, action in self.pending if at > now]
        for action in due:
            action()
        if self.kinds and now >= self.next_at:
            self.next_at = now + self.rng.uniform(*self.interval)
            getattr(self, "_" + self.rng.choice(self.kinds))()

    def _later(self, seconds: float, action: Callable[[], None]) -> None:
        self.pending.append((self.rec.now() + seconds, action))

    def _target(self, *, with_clock: bool = False) -> Proc | None:
        live = [
            p for p in self.procs() if p.alive() and not p.stopped and not p.spared and (p.clock_file or not with_clock)
        ]
        return self.rng.choice(live) if live else None

    def _kill(self) -> None:
        p = self._target()
        if p is None:
            return
        self.rec.event("fault", fault="kill", phase="start", target=p.name, role=p.role)
        _signal(p, signal.SIGKILL)

    def _stop(self) -> None:
        p = self._target()
        if p is None:
            return
        seconds = round(self.rng.uniform(0.5, 6.0), 2)
        self.rec.event("fault", fault="stop", phase="start", target=p.name, role=p.role, seconds=seconds)
        p.stopped = True
        _signal(p, signal.SIGSTOP)
        self._later(seconds, lambda: self._cont(p))

    def _cont(self, p: Proc) -> None:
        if p.stopped:
            p.stopped = False
            _signal(p, signal.SIGCONT)
            self.rec.event("fault", fault="stop", phase="end", target=p.name)

    def _clock(self) -> None:
        p = self._target(with_clock=True)
        if p is None or p.clock_file is None:
            return
        wide = round(self.rng.uniform(-self.max_skew, self.max_skew), 3)
        offset = wide if self.rng.random() < 0.5 else initial_offset(self.rng, self.max_skew)
        self.rec.event("fault", fault="clock", phase="start", target=p.name, role=p.role, offset=offset, was=p.offset)
        p.offset = offset
        write_offset(p.clock_file, offset)

    def _proxy(self) -> None:
        mode = self.rng.choice(["stall", "reset", "cut"])
        if mode == "cut":
            self.rec.event("fault", fault="proxy", phase="start", mode="cut")
            self.proxy.cut()
            return
        seconds = round(self.rng.uniform(0.5, 6.0) if mode == "stall" else self.rng.uniform(0.2, 2.0), 2)
        self.rec.event("fault", fault="proxy", phase="start", mode=mode, seconds=seconds)
        if mode == "stall":
            self.proxy.stall = True
        else:
            self.proxy.fault = "reset"
        self._later(seconds, self._heal_proxy)

    def _heal_proxy(self) -> None:
        if self.proxy.stall or self.proxy.fault:
            self.proxy.stall, self.proxy.fault = False, None
            self.proxy.cut()  # a stalled connection holds requests nobody will answer
            self.rec.event("fault", fault="proxy", phase="end")

    def _hbase(self) -> None:
        if self.own_hbase is None or (self.hbase_thread and self.hbase_thread.is_alive()):
            return
        if self.rec.now() - self.hbase_back < self.hbase_gap:
            return
        own = self.own_hbase

        def restart() -> None:
            self.rec.event("fault", fault="hbase", phase="start", how="SIGKILL, then start")
            own.kill()
            try:
                own.start()
            except Exception as exc:
                self.rec.event("note", what=f"the run's own HBase did not come back: {exc}")
                raise
            self.hbase_back = self.rec.now()
            self.rec.event("fault", fault="hbase", phase="end")

        self.hbase_thread = threading.Thread(target=restart, daemon=True)
        self.hbase_thread.start()

    def heal(self) -> None:
        """End every fault: resume stopped processes, clocks back to true time, the proxy forwarding,
        HBase up."""
        for _, action in self.pending:
            action()
        self.pending = []
        for p in self.procs():
            if p.stopped:
                self._cont(p)
            if p.clock_file is not None and p.offset:
                p.offset = 0.0
                write_offset(p.clock_file, 0.0)
        self._heal_proxy()
        if self.hbase_thread is not None:
            self.hbase_thread.join()
        if self.own_hbase is not None and not self.own_hbase.launcher.status().answering:
            self.own_hbase.start()  # healing includes HBase being up (raises if it cannot come back)
        self.rec.event("fault", fault="heal", phase="end")


def _signal(p: Proc, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(p.popen.pid, sig)
