"""Publishing from several processes and consuming through a subscription while the cluster is hurt: region
servers SIGKILLed, regions moved and split, a Thrift gateway killed. Nothing acknowledged is lost, nothing is
stored twice, every reader sees one order, and writers and the consumer go on within RESUME_BOUND seconds of
each fault.

``TMS_CLUSTER_FAULT_ROUNDS`` (default 5) is how many faults, taken in turn from FAULTS (every fourth one
after the first is a region server kill: 20 kills need 77 rounds). ``TMS_CLUSTER_RESULTS`` names a JSON
file to write the per-fault resume times to (docs/benchmarks.md).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from tms_hbase import MessagingClient, TopicId
from tms_hbase.launcher.cluster import ClusterHBase

WRITERS = 3
RESUME_BOUND = 120.0
"""Seconds within which writers ack again and the consumer handles a message again after any fault."""
STEADY = 5.0
"""Seconds of work after a fault's stall before the stall is measured and the next fault comes."""

FAULTS = ("kill-regionserver", "move-region", "split-region", "kill-thrift")
ROOT = Path(__file__).resolve().parents[2]


def _lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _stamps(path: Path, kind: str) -> list[float]:
    """Times of the ``ack`` (writer) or ``msg`` (consumer) lines of a log."""
    return [float(row[4] if kind == "ack" else row[2]) for row in _lines(path) if row[0] == kind]


def _stall(path: Path, kind: str, began: float, ended: float) -> float:
    """Wait until the log has a ``kind`` line STEADY seconds after a fault done from ``began`` to ``ended`` (at
    most RESUME_BOUND); returns the longest pause between its lines from the last one before the fault on:
    how long the fault stopped that process (calls in flight that return after it do not count as resuming)."""
    deadline = time.monotonic() + RESUME_BOUND + STEADY
    stamps = _stamps(path, kind)
    while not stamps or stamps[-1] <= ended + STEADY:
        assert time.monotonic() < deadline, f"{path.stem} did not resume within {RESUME_BOUND:.0f}s"
        time.sleep(0.5)
        stamps = _stamps(path, kind)
    before = [t for t in stamps if t <= began]
    window = ([before[-1]] if before else [began]) + [t for t in stamps if began < t]
    return max(b - a for a, b in itertools.pairwise(window))


def _fault(cluster: ClusterHBase, kind: str, table: str) -> str:
    """Do one fault to the cluster; returns what was done."""
    regions = cluster.regions(table)
    if kind == "kill-regionserver":
        port = regions[-1].server.split(",")[1]  # the server of the region where the sequencer writes
        name = next(p for p in cluster.layout.process_names() if cluster.layout.ports_of(p)[0] == int(port))
        cluster.kill(name)
        return f"SIGKILL {name} (holding {regions[-1].name})"
    if kind == "move-region":
        return f"moved {regions[-1].name} to {cluster.move_region(regions[-1].name)}"
    if kind == "split-region":
        return f"split {table}: {len(cluster.split_region(table))} regions"
    cluster.kill("thrift1")
    return "SIGKILL thrift1"


def _heal(cluster: ClusterHBase) -> None:
    """Start whatever a fault killed (a new region server process on the killed one's ports)."""
    cluster.start(timeout=300)


def test_no_loss_no_duplicates_one_order_under_faults(
    cluster: ClusterHBase, client: MessagingClient, tms_env: dict[str, str], prefix: str, tmp_path: Path
) -> None:
    topic = TopicId("cluster", "faults")
    client.create_topic(topic)
    client.create_subscription(topic, "sink")
    table = f"{prefix}_messages"
    stop = tmp_path / "stop"
    env = {**tms_env, "PYTHONPATH": str(ROOT)}
    logs = [tmp_path / f"w{i}.log" for i in range(WRITERS)]
    consumer_log = tmp_path / "consumer.log"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.cluster.writer", str(topic), f"w{i}", str(log), str(stop)], env=env
        )
        for i, log in enumerate(logs)
    ]
    procs.append(
        subprocess.Popen(
            [sys.executable, "-m", "tests.cluster.consumer", str(topic), "sink", str(consumer_log), str(stop)], env=env
        )
    )
    rounds = int(os.environ.get("TMS_CLUSTER_FAULT_ROUNDS", "5"))
    report = []
    try:
        _stall(logs[0], "ack", time.time(), time.time())
        for n in range(rounds):
            kind = FAULTS[n % len(FAULTS)]
            time.sleep(3)  # some load between faults
            began = time.time()
            done = _fault(cluster, kind, table)
            ended = time.time()
            writers = [_stall(log, "ack", began, ended) for log in logs]
            consumed = _stall(consumer_log, "msg", began, ended)
            report.append(
                {
                    "fault": kind,
                    "done": done,
                    "fault_s": round(ended - began, 2),
                    "writers_stalled_s": round(max(writers), 2),
                    "consumer_stalled_s": round(consumed, 2),
                }
            )
            print(report[-1], flush=True)
            _heal(cluster)
        stop.touch()
        for proc in procs:
            proc.wait(timeout=300)
    finally:
        stop.touch()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if os.environ.get("TMS_CLUSTER_RESULTS"):
        Path(os.environ["TMS_CLUSTER_RESULTS"]).write_text(json.dumps(report, indent=2))

    # What the writers were told.
    acked, failed = {}, {}
    for log in logs:
        for row in _lines(log):
            (acked if row[0] == "ack" else failed)[(row[1], int(row[2]))] = int(row[3])
    # What the topic holds, read through the gateways: one order, each message once.
    stored = [m.payload.decode() for m in client.fetch(topic)]
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
    for name in {k[0] for k in batches}:
        order = [k[1] for k in dict.fromkeys((n, int(b)) for n, b, _ in (p.split(":") for p in stored)) if k[0] == name]
        assert order == sorted(order), f"{name}'s batches out of publish order"
    # What the consumer handled: the same order, every message, none again once its commit was acknowledged.
    handled = [row[1] for row in _lines(consumer_log) if row[0] == "msg"]
    assert list(dict.fromkeys(handled)) == stored, "the consumer saw another order or missed messages"
    committed: set[str] = set()
    for row in _lines(consumer_log):
        if row[0] == "commit":
            committed.add(row[1])
        elif row[0] == "msg":
            assert row[1] not in committed, f"{row[1]} redelivered after its commit was acknowledged"
    print(
        f"{len(acked)} batches acked, {len(failed)} failed ({sum(1 for b in failed if b in batches)} of them stored), "
        f"{len(stored)} messages, {len(handled) - len(stored)} redelivered before commit"
    )
