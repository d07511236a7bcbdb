"""Shared subscriptions with consumers as real processes, SIGKILLed and SIGSTOPped at random while others
go on: every message is acknowledged exactly once, none is lost, none is delivered again before its
deadline; a poison message reaches the dead-letter topic after max_deliveries while the rest flows."""

from __future__ import annotations

import random
import signal
import subprocess
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import pytest

from tms_hbase import DeadLetter, MessagingClient, TopicId

from ..shared_workers import events, land_faults, start

T = TopicId("queue", "jobs")
DLT = TopicId("queue", "dead")


def publish(client: MessagingClient, total: int) -> None:
    client.create_topic(T)
    client.create_topic(DLT)
    for first in range(0, total, 10):
        client.publish(T, [str(i).encode() for i in range(first, min(total, first + 10))])


def check_deliveries(seen: list[tuple[int, list[str]]]) -> dict[str, list[tuple[int, int, int]]]:
    """Per payload its deliveries (count, deadline, at); no count twice, and each redelivery of a message
    not given back (nacked) came no earlier than the deadline of the delivery before it (both on HBase's
    clock)."""
    given_back = {fields[1] for _, fields in seen if fields[0] == "nacked"}
    deliveries: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for _, fields in seen:
        if fields[0] == "got":
            deliveries[fields[1]].append((int(fields[2]), int(fields[3]), int(fields[4])))
    for payload, got in deliveries.items():
        got.sort()
        counts = [n for n, _, _ in got]
        assert len(counts) == len(set(counts)), f"message {payload} delivered twice as delivery {counts}"
        for (n, deadline, _), (m, _, at) in pairwise(got):
            if m == n + 1 and payload not in given_back:
                assert at >= deadline, f"message {payload} delivered again {deadline - at} ms before its deadline"
    return deliveries


@pytest.mark.slow
def test_killed_and_stopped_consumers_lose_nothing_and_ack_each_message_once(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path
) -> None:
    total = 400
    publish(client, total)
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=2.0, max_deliveries=100, claim_size=8)
    rng = random.Random(25)
    files: list[Path] = []

    def spawn() -> tuple[int, subprocess.Popen]:
        files.append(tmp_path / f"w{len(files)}")
        return len(files) - 1, start(T, tms_env, files[-1], "--delay", "0.05", "--idle", "4")

    workers = dict(spawn() for _ in range(4))

    def settled_all() -> bool:
        return sum(1 for _, f in events(files) if f[0] == "acked") >= total

    killed = land_faults(workers, files, spawn, rng, (1.0, 3.5), settled_all)
    for proc in workers.values():
        _, err = proc.communicate(timeout=180)
        assert proc.returncode in (0, -signal.SIGKILL), err

    seen = events(files)
    check_deliveries(seen)
    acks = [f[1] for i, f in seen if f[0] == "acked"]
    assert len(acks) == len(set(acks)), "a message was acknowledged twice"
    # an ack under way when its process was killed may have landed without being noted
    maybe = {f[1] for i, f in seen if f[0] == "acking" and i in killed} - set(acks)
    assert set(acks) | maybe == {str(n) for n in range(total)}, "a message was lost"
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None
    assert (numbers.acknowledged, numbers.waiting, numbers.in_flight, numbers.due) == (total, 0, 0, 0)
    assert numbers.dead_lettered == 0
    assert numbers.redelivered > 0, "no consumer died or hung holding messages: the test tested nothing"
    assert client.lag(T, "work").messages == 0
    assert client.pending(T, "work") == []


@pytest.mark.slow
def test_a_poison_message_goes_to_the_dead_letters_while_the_rest_flows(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path
) -> None:
    total = 60
    publish(client, total)
    client.create_subscription(
        T, "work", shared=True, ack_timeout_seconds=5.0, max_deliveries=3, dead_letter=DLT, claim_size=4
    )
    files = [tmp_path / "a", tmp_path / "b"]
    procs = [start(T, tms_env, f, "--poison", "13", "--idle", "3") for f in files]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err

    seen = events(files)
    deliveries = check_deliveries(seen)
    assert [n for n, _, _ in deliveries["13"]] == [1, 2, 3], "the poison message is delivered max_deliveries times"
    acks = [f[1] for _, f in seen if f[0] == "acked"]
    assert sorted(acks, key=int) == [str(n) for n in range(total) if n != 13]
    letters = [DeadLetter.of(m) for m in client.fetch(DLT)]
    assert [(d.topic, d.subscription, d.payload, d.deliveries) for d in letters] == [(T, "work", b"13", 3)]
    original = next(m for m in client.fetch(T) if m.payload == b"13")
    assert letters[0].message_id == original.id
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None
    assert (numbers.acknowledged, numbers.dead_lettered, numbers.waiting, numbers.in_flight) == (total - 1, 1, 0, 0)
    assert numbers.redelivered == 2
