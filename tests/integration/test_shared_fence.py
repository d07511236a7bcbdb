"""Fenced acknowledgements: an ack, nack, extend or release of a delivery whose hold ended (its deadline
passed and another consumer, in another process, took the message again) is refused with NotHeld, changes
nothing, and is counted; the new holder's delivery stays held and is acknowledged by it once. The consumers
are real processes (:mod:`tests.workers.shared_fence`), one of them SIGSTOPped past its deadline; the two
share an owner name in the cases that matter most (two processes of one gateway session, or a name given
twice), where only the delivery's incarnation tells them apart."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, NotHeld, TopicId
from tms_hbase.ops.exporter import TopicCollector
from tms_hbase.tx.client import TransactionClient

ROOT = Path(__file__).resolve().parents[2]
T = TopicId("queue", "fenced")


class Worker:
    """One consumer process, driven a command at a time."""

    def __init__(self, env: dict[str, str], owner: str | None) -> None:
        args = [sys.executable, "-m", "tests.workers.shared_fence", str(T), "work", *([owner] if owner else [])]
        self.proc = subprocess.Popen(
            args, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.owner = self.read()["ready"]

    def read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            _, err = self.proc.communicate(timeout=30)
            raise AssertionError(f"worker ended: {err}")
        return json.loads(line)

    def ask(self, command: str) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


@pytest.fixture
def workers(tms_env: dict[str, str]) -> Iterator[Callable[[str | None], Worker]]:
    started: list[Worker] = []

    def start(owner: str | None) -> Worker:
        started.append(Worker(tms_env, owner))
        return started[-1]

    yield start
    for w in started:
        w.close()


@pytest.fixture
def one_job(client: MessagingClient) -> MessagingClient:
    client.create_topic(T)
    client.publish(T, [b"job"])
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=1.0, max_deliveries=10)
    return client


def wait_until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    until = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < until, "timed out"
        time.sleep(0.05)


def expired(client: MessagingClient) -> bool:
    return [p.state for p in client.pending(T, "work")] == ["expired"]


def late_acks(client: MessagingClient) -> int:
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None
    return numbers.late_acks


def taken_over(b: Worker, first_id: bytes, first_incarnation: int) -> None:
    """B receives the message again (its second delivery, a new incarnation) and holds it long (an extension
    keeps the incarnation), so that only the refused settlements could change it."""
    (taken,) = b.ask("receive")["got"]
    assert (bytes.fromhex(taken["id"]), taken["deliveries"]) == (first_id, 2)
    assert taken["incarnation"] not in (first_incarnation, 0)
    assert b.ask("extend") == {"done": "extend"}


def check_taken_over_once(client: MessagingClient, b: Worker, refused: int) -> None:
    """B's delivery was left alone by the ``refused`` settlements, B acknowledges it once (a second ack is
    refused and counted too), and that is all."""
    (pending,) = client.pending(T, "work")
    assert (pending.owner, pending.state, pending.deliveries) == (b.owner, "held", 2), "the late settlement changed it"
    assert late_acks(client) == refused
    assert b.ask("ack") == {"done": "ack"}
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None
    assert (numbers.acknowledged, numbers.redelivered, numbers.in_flight, numbers.due) == (1, 1, 0, 0)
    assert client.pending(T, "work") == []
    assert b.ask("ack")["refused"] == "NotHeld"  # once: acknowledged already
    assert late_acks(client) == refused + 1
    with client.shared_consumer(T, "work") as c:
        assert c.receive(1, 1.5) == []  # never delivered again


@pytest.mark.parametrize("owners", ["distinct", "shared owner"])
def test_a_late_settlement_after_another_process_took_the_message_is_refused(
    one_job: MessagingClient, workers: Callable[[str | None], Worker], owners: str
) -> None:
    owner = None if owners == "distinct" else f"session-{uuid.uuid4().hex[:8]}"
    with one_job.shared_consumer(T, "work", owner=owner) as a:
        (first,) = a.receive(1, 10.0)
        wait_until(lambda: expired(one_job))  # A's deadline passed (on HBase's clock)
        b = workers(owner)
        taken_over(b, first.id, first.incarnation)
        for settle in (a.ack, a.extend, a.nack, a.release):
            with pytest.raises(NotHeld, match=r"delivered again|not held by this consumer"):
                settle(first)
        with pytest.raises(NotHeld):
            a.ack(first.id)  # by id: A's own delivery of it ended too
        check_taken_over_once(one_job, b, refused=5)
    families = {f.name: f for f in TopicCollector(one_job).collect()}
    (sample,) = [s for s in families["tms_shared_late_acks"].samples if s.name == "tms_shared_late_acks_total"]
    assert (sample.labels["subscription"], sample.value) == ("work", 6)


@pytest.mark.parametrize("owners", ["distinct", "shared owner"])
def test_a_consumer_stopped_past_its_deadline_has_its_ack_refused(
    one_job: MessagingClient, workers: Callable[[str | None], Worker], owners: str
) -> None:
    owner = None if owners == "distinct" else f"session-{uuid.uuid4().hex[:8]}"
    a = workers(owner)
    (got,) = a.ask("receive")["got"]
    a.proc.send_signal(signal.SIGSTOP)
    wait_until(lambda: expired(one_job))
    b = workers(owner)
    taken_over(b, bytes.fromhex(got["id"]), got["incarnation"])
    a.proc.send_signal(signal.SIGCONT)
    refused = a.ask("ack")
    assert refused["refused"] == "NotHeld", refused
    check_taken_over_once(one_job, b, refused=1)


def test_a_transactional_ack_of_a_delivery_taken_over_fails_its_transaction(
    one_job: MessagingClient, workers: Callable[[str | None], Worker], tx_client: TransactionClient
) -> None:
    owner = f"session-{uuid.uuid4().hex[:8]}"
    with one_job.shared_consumer(T, "work", owner=owner) as a:
        (first,) = a.receive(1, 10.0)
        wait_until(lambda: expired(one_job))
        b = workers(owner)
        taken_over(b, first.id, first.incarnation)
        tx = tx_client.start_short()
        with pytest.raises(NotHeld, match="delivered again"):
            a.ack(first, transaction=tx)
        tx_client.abort(tx)
        check_taken_over_once(one_job, b, refused=1)
