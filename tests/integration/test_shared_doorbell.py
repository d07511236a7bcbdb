"""An idle consumer of a shared subscription waits on its doorbell: a publish, or a message another
consumer gives back, wakes it at once, here and across processes; a message nacked with a delay comes
back when the delay ends (the slow poll in these tests is a minute, so a delivery within the deadline
below came from a ring or the deadline the consumer saw)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tms_hbase import MessagingClient, TopicId

ROOT = Path(__file__).resolve().parents[2]
T = TopicId("queue", "bells")
SLOW_POLL = 60.0
DEADLINE = 20.0  # seconds a ring may take on a loaded machine; far below SLOW_POLL


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    until = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < until, "timed out"
        time.sleep(0.05)


def test_a_publish_from_this_process_wakes_an_idle_consumer(client: MessagingClient) -> None:
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True)
    with client.shared_consumer(T, "work", poll_interval_seconds=SLOW_POLL) as consumer:
        threading.Timer(0.3, client.publish, (T, [b"wake"])).start()
        started = time.monotonic()
        got = consumer.receive(1, SLOW_POLL / 2)
        waited = time.monotonic() - started
        assert [d.payload for d in got] == [b"wake"]
        consumer.ack(*got)
    assert waited < DEADLINE, f"woke after {waited:.1f} s: the publish did not ring"


def test_an_idle_consumer_takes_a_nacked_message_back_when_its_delay_ends(client: MessagingClient) -> None:
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True)
    client.publish(T, [b"again"])
    with client.shared_consumer(T, "work", poll_interval_seconds=SLOW_POLL) as consumer:
        (first,) = consumer.receive(1, SLOW_POLL / 2)
        started = time.monotonic()
        consumer.nack(first, delay_seconds=1.0)
        got = consumer.receive(1, SLOW_POLL / 2)
        waited = time.monotonic() - started
        assert [(d.payload, d.deliveries) for d in got] == [(b"again", 2)]
        consumer.ack(*got)
    # 0.9: the delay is counted on HBase's clock, whose reading here may gain a few ms when it is probed again
    assert 0.9 <= waited < DEADLINE, f"delivered again after {waited:.1f} s, for a delay of 1 s"


def test_a_publish_from_another_process_wakes_an_idle_consumer(
    client: MessagingClient, tms_env: dict[str, str]
) -> None:
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True)
    script = (
        "import time; from tms_hbase import MessagingClient, TopicId\n"
        "with MessagingClient(create_tables=False) as c:\n"
        "    for i in range(40):\n"  # the first publishes learn the doorbells (in the background)
        "        c.publish(TopicId('queue', 'bells'), [b'p%d' % i]); time.sleep(0.5)\n"
    )
    with client.shared_consumer(T, "work", poll_interval_seconds=SLOW_POLL) as consumer:
        publisher = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=tms_env)
        try:
            first = consumer.receive(1, SLOW_POLL / 2)
            consumer.ack(*first)
            started = time.monotonic()
            second = consumer.receive(1, SLOW_POLL / 2)
            waited = time.monotonic() - started
            consumer.ack(*second)
        finally:
            publisher.kill()
            publisher.wait()
    assert first and second
    assert waited < DEADLINE, f"waited {waited:.1f} s: no doorbell rang"


def test_a_message_given_back_in_another_process_wakes_an_idle_consumer(
    client: MessagingClient, tms_env: dict[str, str]
) -> None:
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=120)
    client.publish(T, [b"job"])
    script = (
        "import sys; from tms_hbase import MessagingClient, TopicId\n"
        "with MessagingClient(create_tables=False) as c:\n"
        "    with c.shared_consumer(TopicId('queue', 'bells'), 'work') as s:\n"
        "        (d,) = s.receive(1, 30)\n"
        "        print('held', flush=True)\n"
        "        sys.stdin.readline()\n"
        "        s.release(d)\n"
        "        print('released', flush=True)\n"
        "        sys.stdin.readline()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, env=tms_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "held"
        with client.shared_consumer(T, "work", poll_interval_seconds=SLOW_POLL) as idle:

            def release_once_waiting() -> None:
                wait_until(lambda: idle._bell_expires > 0)  # its doorbell's cell is written: it waits
                holder.stdin.write("go\n")  # type: ignore[union-attr]
                holder.stdin.flush()  # type: ignore[union-attr]

            threading.Thread(target=release_once_waiting, daemon=True).start()
            started = time.monotonic()
            got = idle.receive(1, SLOW_POLL / 2)
            waited = time.monotonic() - started
            assert [(d.payload, d.deliveries) for d in got] == [(b"job", 1)], "a release does not count"
            idle.ack(*got)
        holder.stdin.write("done\n")
        holder.stdin.flush()
        assert holder.wait(30) == 0
    finally:
        holder.kill()
        holder.wait()
    assert waited < DEADLINE, f"waited {waited:.1f} s: the release did not ring"
