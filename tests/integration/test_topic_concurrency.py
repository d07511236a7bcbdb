"""Several real processes changing one topic at once: compare-and-set never loses an update."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, TopicId, TopicNotFound

ROOT = Path(__file__).resolve().parents[2]
T = TopicId("ns", "shared")


def spawn(env: dict[str, str], mode: str, count: int, start_at: float) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.workers.topic_worker", mode, str(T), str(count), str(start_at)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    return out.strip()


def test_two_processes_incrementing_lose_no_update(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(T, {"ttl": "60"})
    start_at = time.time() + 2
    workers = [spawn(tms_env, "increment", 25, start_at) for _ in range(2)]
    outputs = [finish(w) for w in workers]
    meta = client.get_topic(T)
    assert meta.properties["counter"] == "50", outputs
    assert (meta.generation, meta.ttl) == (1, 60)


def test_racing_creates_have_exactly_one_winner(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.admin.init_tables()
    start_at = time.time() + 2
    workers = [spawn(tms_env, "create", 100 + i, start_at) for i in range(4)]
    outputs = sorted(finish(w) for w in workers)
    assert outputs == ["created", "exists", "exists", "exists"]
    meta = client.get_topic(T)
    assert meta.generation == 1 and 100 <= meta.ttl <= 103


def test_update_racing_delete_never_resurrects_the_topic(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(T)
    updater = spawn(tms_env, "update", 0, time.time())
    deadline = time.time() + 60
    while "n" not in client.get_topic(T).properties:
        assert time.time() < deadline, "the updater never updated"
        time.sleep(0.05)
    client.delete_topic(T)
    assert finish(updater).startswith("updates ")
    with pytest.raises(TopicNotFound):  # a concurrent update must not bring the deleted topic back
        client.get_topic(T)
    assert client.create_topic(T).generation == 2
