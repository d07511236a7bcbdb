"""Key-ordered shared subscriptions with consumers as real processes, SIGKILLed and SIGSTOPped (past the
ack timeout) while they hold messages: the independent checker (tests/verify/key_order.py) finds each
key's messages delivered and acknowledged in topic order, every message acknowledged or dead-lettered, none
lost; a poison message goes to the dead letters and its key moves on. And 100,000 distinct keys leave no
state behind once consumed: what is kept grows with the messages in play, not with the keys seen."""

from __future__ import annotations

import random
import signal
import subprocess
from pathlib import Path

import pytest

from tests.verify.key_order import check
from tms_hbase import DeadLetter, MessagingClient, Record, TopicId
from tms_hbase.consume.subscriptions import row_key
from tms_hbase.shared.state import state_prefix
from tms_hbase.storage.hbase import KEYS_ONLY

from ..shared_workers import events, land_faults, start

T = TopicId("queue", "orders")
DLT = TopicId("queue", "orders-dead")


@pytest.mark.slow
def test_killed_and_stopped_consumers_keep_every_key_in_order(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path
) -> None:
    keys = {f"k{k}": [f"k{k}:{n}" for n in range(25)] for k in range(12)}
    keyless = [f"-:{n}" for n in range(30)]
    # each key's messages in order, the keys interleaved, keyless messages spread among them
    rng = random.Random(45)
    order: list[Record | bytes] = []
    plain = [p.encode() for p in keyless]
    for n in range(25):
        for k, payloads in keys.items():
            order.append(Record(payloads[n].encode(), key=k.encode()))
            if plain and rng.random() < 0.1:
                order.append(plain.pop())
    order += plain
    client.create_topic(T)
    client.create_topic(DLT)
    for first in range(0, len(order), 10):
        client.publish(T, order[first : first + 10])
    client.create_subscription(
        T, "work", shared=True, ordering="key", ack_timeout_seconds=2.0, max_deliveries=4, dead_letter=DLT, claim_size=8
    )
    poison = "k3:5"
    files: list[Path] = []

    def spawn() -> tuple[int, subprocess.Popen]:
        files.append(tmp_path / f"w{len(files)}")
        return len(files) - 1, start(T, tms_env, files[-1], "--delay", "0.03", "--idle", "6", "--poison", poison)

    workers = dict(spawn() for _ in range(4))

    def settled_all() -> bool:
        return sum(1 for _, f in events(files) if f[0] == "acked") >= len(order) - 1

    land_faults(workers, files, spawn, rng, (2.5, 3.5), settled_all)
    for proc in workers.values():
        _, err = proc.communicate(timeout=240)
        assert proc.returncode in (0, -signal.SIGKILL), err

    dead = [DeadLetter.of(m).payload.decode() for m in client.fetch(DLT)]
    assert poison in dead
    assert check(events(files), keys, keyless, dead) == {}
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None
    assert (numbers.waiting, numbers.in_flight, numbers.due) == (0, 0, 0)
    assert numbers.acknowledged + numbers.dead_lettered == len(order)
    assert numbers.redelivered > 0, "no consumer died or hung holding messages: the test tested nothing"
    assert client.pending(T, "work") == []


@pytest.mark.slow
def test_a_hundred_thousand_keys_leave_no_state_behind(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path
) -> None:
    total, size = 100_000, 1000
    client.create_topic(T)
    for first in range(0, total, size):
        client.publish(T, [Record(str(n).encode(), key=b"key-%d" % n) for n in range(first, first + size)])
    # an ack timeout far past a batch's acknowledgements on a loaded machine: a delivery that outlived it is
    # acknowledged by the consumer that took it next, still once
    client.create_subscription(T, "work", shared=True, ordering="key", claim_size=size, ack_timeout_seconds=600)
    files = [tmp_path / "a", tmp_path / "b"]
    procs = [start(T, tms_env, f, "--count", "--batch", "100", "--idle", "6") for f in files]
    for proc in procs:
        _, err = proc.communicate(timeout=1200)
        assert proc.returncode == 0, err
    done = [int(f[1]) for _, f in events(files) if f[0] == "done"]
    assert sum(done) == total and all(done), f"acknowledged {done}: both consumers took part"
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None
    assert (numbers.acknowledged, numbers.waiting, numbers.in_flight, numbers.due) == (total, 0, 0, 0)
    table = client.installation.table("subscriptions")
    generation = client.get_topic(T).generation
    rows = [k for k, _ in table.scan(prefix=state_prefix(row_key(T, generation, "work")), filter=KEYS_ONLY)]
    # what is left: the counter, the floor, and the range at the tail with its claims (kept until a message
    # beyond it shows up, as in any shared subscription): one range's worth, not one row per key
    assert len(rows) <= size + 8, f"{len(rows)} state rows after {total} keys: state grows with the keys seen"
