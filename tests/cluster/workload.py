"""The load the cluster tests hurt the cluster under, and what they check afterwards: writer processes
(tests/cluster/writer.py) publishing numbered batches and consumer processes (tests/cluster/consumer.py)
consuming through subscriptions, each logging what it was told (fsynced) so that a stall can be measured
from the logs and, at the end, every acknowledged batch looked for exactly once and in order."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from bench.cluster import longest_pause
from tms_hbase import MessagingClient, TopicId

ROOT = Path(__file__).resolve().parents[2]

RESUME_BOUND = 120.0
"""Seconds within which writers ack again and consumers handle a message again after any fault."""
STEADY = 5.0
"""Seconds of work after a fault's stall before the stall is measured and the next fault comes."""


def lines(path: Path) -> list[list[str]]:
    """The rows of a writer's or consumer's log, split on spaces."""
    return [line.split() for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _stamps(path: Path, kind: str) -> list[float]:
    """Times of the ``ack`` (writer) or ``msg`` (consumer) lines of a log."""
    return [float(row[4] if kind == "ack" else row[2]) for row in lines(path) if row[0] == kind]


def stall(path: Path, kind: str, began: float, ended: float) -> float:
    """Wait until the log has a ``kind`` line STEADY seconds after a fault done from ``began`` to ``ended`` (at
    most RESUME_BOUND); returns the longest pause between its lines from the last one before the fault on:
    how long the fault stopped that process (calls in flight that return after it do not count as resuming)."""
    deadline = time.monotonic() + RESUME_BOUND + STEADY
    stamps = _stamps(path, kind)
    while not stamps or stamps[-1] <= ended + STEADY:
        assert time.monotonic() < deadline, f"{path.stem} did not resume within {RESUME_BOUND:.0f}s"
        time.sleep(0.5)
        stamps = _stamps(path, kind)
    return longest_pause(stamps, began)


class Workload:
    """``writers`` writer processes publishing to ``topic`` (a pause of ``interval`` seconds between batches)
    and one consumer process per subscription name, all logging into ``folder``."""

    def __init__(
        self,
        env: dict[str, str],
        topic: TopicId,
        folder: Path,
        writers: int,
        subscriptions: list[str],
        interval: float = 0.0,
    ) -> None:
        self.topic = topic
        self.stop_file = folder / "stop"
        self.writer_logs = [folder / f"w{i}.log" for i in range(writers)]
        self.consumer_logs = {name: folder / f"consumer-{name}.log" for name in subscriptions}
        env = {**env, "PYTHONPATH": str(ROOT)}
        stop = str(self.stop_file)
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.cluster.writer", str(topic), f"w{i}", str(log), stop, str(interval)],
                env=env,
            )
            for i, log in enumerate(self.writer_logs)
        ] + [
            subprocess.Popen(
                [sys.executable, "-m", "tests.cluster.consumer", str(topic), name, str(log), stop],
                env=env,
            )
            for name, log in self.consumer_logs.items()
        ]

    def running(self) -> None:
        """Wait until every writer has had a batch acknowledged."""
        for log in self.writer_logs:
            stall(log, "ack", time.time(), time.time())

    def stalls(self, began: float, ended: float) -> tuple[float, float]:
        """The longest stall of any writer and of any consumer around a fault (see :func:`stall`)."""
        writers = max(stall(log, "ack", began, ended) for log in self.writer_logs)
        consumers = max(stall(log, "msg", began, ended) for log in self.consumer_logs.values())
        return writers, consumers

    def finish(self, timeout: float = 600.0) -> None:
        """Tell every process to stop; the consumers stop once they have drained their subscription."""
        self.stop_file.touch()
        deadline = time.monotonic() + timeout
        try:
            for proc in self.procs:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            self.kill()

    def kill(self) -> None:
        """End every process still running (a failed test)."""
        self.stop_file.touch()
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def check(self, client: MessagingClient) -> str:
        """Assert that the topic holds every acknowledged batch once, whole, in each writer's order, and that
        every consumer handled every stored message in that order, none again after its commit was
        acknowledged; returns a one-line summary."""
        acked, failed = {}, {}
        for log in self.writer_logs:
            for row in lines(log):
                (acked if row[0] == "ack" else failed)[(row[1], int(row[2]))] = int(row[3])
        stored = [m.payload.decode() for m in client.fetch(self.topic)]
        counts = Counter(stored)
        assert not [p for p, c in counts.items() if c > 1], "messages stored twice"
        batches: dict[tuple[str, int], list[int]] = defaultdict(list)
        for payload in stored:
            name, batch, index = payload.split(":")
            batches[(name, int(batch))].append(int(index))
        lost = [b for b in acked if b not in batches]
        assert not lost, f"{len(lost)} acknowledged batches lost, e.g. {lost[:5]}"
        for key, indexes in batches.items():
            size = acked.get(key, failed.get(key))
            assert size is not None, f"batch {key} stored but never published"
            assert indexes == list(range(size)), f"batch {key} stored partly or out of order: {indexes}"
        keys = list(dict.fromkeys((n, int(b)) for n, b, _ in (p.split(":") for p in stored)))
        for name in {k[0] for k in keys}:
            order = [k[1] for k in keys if k[0] == name]
            assert order == sorted(order), f"{name}'s batches out of publish order"
        redelivered = 0
        for sub, log in self.consumer_logs.items():
            handled = [row[1] for row in lines(log) if row[0] == "msg"]
            assert list(dict.fromkeys(handled)) == stored, f"consumer {sub} saw another order or missed messages"
            committed: set[str] = set()
            for row in lines(log):
                if row[0] == "commit":
                    committed.add(row[1])
                elif row[0] == "msg":
                    assert row[1] not in committed, f"{sub}: {row[1]} redelivered after its commit was acknowledged"
            redelivered += len(handled) - len(stored)
        return (
            f"{len(acked)} batches acked, {len(failed)} failed ({sum(1 for b in failed if b in batches)} of them "
            f"stored), {len(stored)} messages, {redelivered} redelivered before commit"
        )
