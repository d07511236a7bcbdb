"""Shared-subscription consumers as real processes for crash tests (tests/workers/shared_consumer.py): start
one, read what the workers wrote, and tell whether one holds a delivery (so a kill lands while it does)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tms_hbase import TopicId

ROOT = Path(__file__).resolve().parents[1]


def start(topic: TopicId, env: dict[str, str], out: Path, *args: str) -> subprocess.Popen:
    """A consumer of ``topic``'s shared subscription "work", writing what it does to ``out``."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.workers.shared_consumer", str(topic), "work", str(out), *args],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )


def events(files: list[Path]) -> list[tuple[int, list[str]]]:
    """(file number, fields) of every line of every worker's file."""
    return [(i, line.split()) for i, f in enumerate(files) if f.exists() for line in f.read_text().splitlines()]


def holds(file: Path) -> bool:
    """Whether the consumer writing ``file`` holds a delivery whose ack (or nack) it has not begun."""
    held: set[str] = set()
    for fields in (line.split() for line in file.read_text().splitlines()) if file.exists() else ():
        if fields[0] == "got":
            held.add(fields[1])
        elif fields[0] in ("acking", "nacked"):
            held.discard(fields[1])
    return bool(held)


def land_faults(
    workers: dict[int, subprocess.Popen],
    files: list[Path],
    spawn: Callable[[], tuple[int, subprocess.Popen]],
    rng: random.Random,
    pause: tuple[float, float],
    settled_all: Callable[[], bool],
) -> set[int]:
    """Kill, stop, kill and stop consumers, each fault landing on one that holds messages: a consumer is stopped
    first, and its file (final while it is stopped) must show a delivery whose ack it has not begun, else it goes
    on and another is tried. A killed one is replaced by ``spawn()``; a stopped one sleeps ``pause`` (a range of
    seconds) before it goes on. ``settled_all()`` true before the faults landed fails the test (they would have
    tested nothing). Returns the numbers of the killed consumers."""
    faults, landed, killed = ["kill", "stop", "kill", "stop"], [], set()
    deadline = time.monotonic() + 300
    while faults:
        assert time.monotonic() < deadline, f"no consumer was caught holding messages for {faults} ({landed} landed)"
        assert not settled_all(), f"every message was settled before the faults {faults} landed ({landed} did)"
        i = rng.choice(sorted(workers))
        workers[i].send_signal(signal.SIGSTOP)
        if not holds(files[i]):
            workers[i].send_signal(signal.SIGCONT)
            time.sleep(0.01)
            continue
        if faults.pop(0) == "kill":
            workers.pop(i).send_signal(signal.SIGKILL)
            killed.add(i)
            workers.update([spawn()])
        else:
            time.sleep(rng.uniform(*pause))  # past the ack deadline or near it: its messages may go to others
            workers[i].send_signal(signal.SIGCONT)
        landed.append("kill" if i in killed else "stop")
    return killed
