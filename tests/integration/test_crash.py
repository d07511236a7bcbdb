"""Many writer processes, some SIGKILLed mid-run and restarted, and readers tailing from different
start points: every acknowledged batch is stored exactly once, in one order that all readers share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, TopicId

ROOT = Path(__file__).resolve().parents[2]
T = TopicId("crash", "orders")


def start(env: dict[str, str], module: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", f"tests.workers.{module}", *args], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
    )


def read_lines(path: Path) -> list[list[str]]:
    return [line.split(" ", 2) for line in path.read_text().splitlines()] if path.exists() else []


def finish(writers: dict[str, subprocess.Popen], readers: list[subprocess.Popen], stop: Path, drain: Path) -> None:
    """Stops the writers still running (each must exit 0), then lets the readers read what is left and stop."""
    stop.touch()
    for name, proc in writers.items():
        if proc.returncode is None:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"writer {name} failed: {err}"
    drain.touch()
    for proc in readers:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"reader failed: {err}"


def acknowledged(acks: Path, *names: str) -> int:
    """How many batches the writers ``names`` (all writers if none) have acknowledged so far."""
    files = [acks / n for n in names] if names else list(acks.iterdir())
    return sum(len(f.read_text().splitlines()) for f in files if f.exists())


def wait_for_acks(acks: Path, at_least: int, *names: str, timeout: float = 120.0) -> None:
    """Wait until the writers ``names`` (all if none) have acknowledged ``at_least`` batches: the test goes on by
    what the writers did, not by how long it slept (on a loaded machine a writer process takes seconds to start)."""
    deadline = time.monotonic() + timeout
    while (done := acknowledged(acks, *names)) < at_least:
        assert time.monotonic() < deadline, f"writers {names or 'all'} acknowledged {done} < {at_least} in {timeout}s"
        time.sleep(0.05)


def check_acknowledged(payload_list: list[str], acks: Path) -> list[list[str]]:
    """Every batch a writer acknowledged (its lines in ``acks``) is stored exactly once, its messages
    contiguous and in order; returns the acknowledgements."""
    stored = Counter(p.rsplit(":", 1)[0] for p in payload_list)
    acked = [line.split() for f in acks.iterdir() for line in f.read_text().splitlines()]
    for name, batch, size in acked:
        assert stored[f"{name}:{batch}"] == int(size), f"acknowledged batch {name}:{batch} is not there exactly once"
    for name, batch, _ in acked:  # a batch's messages are contiguous and in order
        first = payload_list.index(f"{name}:{batch}:0")
        size = stored[f"{name}:{batch}"]
        assert payload_list[first : first + size] == [f"{name}:{batch}:{i}" for i in range(size)]
    return acked


def check_readers(folder: Path, truth: list[tuple[str, ...]]) -> None:
    """Reader a (from the start) saw exactly ``truth``; reader b (from a later time) a suffix of it."""
    seen_a = [tuple(line) for line in read_lines(folder / "a")]
    seen_b = [tuple(line) for line in read_lines(folder / "b")]
    assert seen_a == truth, "the reader from the start saw another sequence"
    assert seen_b, "the second reader saw nothing"
    assert seen_b == truth[truth.index(seen_b[0]) :], "the reader from a later start saw another sequence"


@pytest.mark.slow
def test_writers_killed_mid_run_lose_and_duplicate_nothing(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path
) -> None:
    client.create_topic(T, {"ordering": "chain"})  # the chain: times never decrease (the sequencer's test is
    stop = tmp_path / "stop"  # in test_sequencer.py: 8 writers, half killed, times within D)  # writers stop
    drain = tmp_path / "drain"  # readers read what is left and stop (after the writers are gone)
    acks = tmp_path / "acks"
    acks.mkdir()
    writers = {f"w{i}": start(tms_env, "writer", str(T), f"w{i}", str(acks / f"w{i}"), str(stop)) for i in range(4)}
    reader_a = start(tms_env, "tailer", str(T), str(tmp_path / "a"), str(drain))
    wait_for_acks(acks, 20)
    time.sleep(0.5)
    reader_b = start(tms_env, "tailer", str(T), str(tmp_path / "b"), str(drain), str(int(time.time() * 1000)))

    killed = 0
    for round_ in range(3):  # kill two writers mid-publish, start replacements under new names
        victims = [
            [n for n in writers if n.startswith(name) and writers[n].poll() is None][-1]
            for name in (f"w{round_ % 4}", f"w{(round_ + 2) % 4}")
        ]
        for victim in victims:  # each has been publishing for a while (not killed while it starts)
            wait_for_acks(acks, 5, victim)
        time.sleep(0.5)
        for victim in victims:
            os.kill(writers[victim].pid, signal.SIGKILL)
            writers[victim].wait()
            killed += 1
            new = f"{victim}r{round_}"
            writers[new] = start(tms_env, "writer", str(T), new, str(acks / new), str(stop))
    wait_for_acks(acks, 120)
    finish(writers, [reader_a, reader_b], stop, drain)

    truth = [(m.id.hex(), str(m.publish_time), m.payload.decode()) for m in client.fetch(T)]
    payload_list = [p for _, _, p in truth]
    assert len(set(payload_list)) == len(payload_list), "a message was stored twice"
    assert [i for i, _, _ in truth] == sorted(i for i, _, _ in truth)
    times = [int(t) for _, t, _ in truth]
    assert times == sorted(times), "publish time decreased along the order"

    acked = check_acknowledged(payload_list, acks)
    assert len(acked) > 100 and killed == 6
    check_readers(tmp_path, truth)
