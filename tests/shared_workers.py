"""Shared-subscription consumers as real processes for crash tests (tests/workers/shared_consumer.py): start
one, read what the workers wrote, and tell whether one holds a delivery (so a kill lands while it does)."""

from __future__ import annotations

import subprocess
import sys
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
