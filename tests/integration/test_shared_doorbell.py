"""An idle consumer of a shared subscription waits on its doorbell: a publish, or a message another
consumer gives back, wakes it at once, here and across processes; a message nacked with a delay comes
back when the delay ends. The slow poll in these tests is an hour and a receive waits at most WAIT, so a
delivery at all came from a ring or the deadline the consumer saw, however loaded the machine."""

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
SLOW_POLL = 3600.0
WAIT = 300.0  # a receive's timeout: ample for a ring on a loaded machine, far below SLOW_POLL


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
        got = consumer.receive(1, WAIT)
        assert [d.payload for d in got] == [b"wake"], "the publish did not ring"
        consumer.ack(*got)


def test_an_idle_consumer_takes_a_nacked_message_back_when_its_delay_ends(client: MessagingClient) -> None:
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True)
    client.publish(T, [b"again"])
    with client.shared_consumer(T, "work", poll_interval_seconds=SLOW_POLL) as consumer:
        (first,) = consumer.receive(1, WAIT)
        started = time.monotonic()
        consumer.nack(first, delay_seconds=1.0)
        got = consumer.receive(1, WAIT)
        waited = time.monotonic() - started
        assert [(d.payload, d.deliveries) for d in got] == [(b"again", 2)]
        consumer.ack(*got)
    # 0.9: the delay is counted on HBase's clock, whose reading here may gain a few ms when it is probed again
    assert waited >= 0.9, f"delivered again after {waited:.1f} s, for a delay of 1 s"


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
            first = consumer.receive(1, WAIT)
            consumer.ack(*first)
            second = consumer.receive(1, WAIT)
            consumer.ack(*second)
        finally:
            publisher.kill()
            publisher.wait()
    assert first and second, "no doorbell rang"


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
            got = idle.receive(1, WAIT)
            assert got, "the release did not ring"
            assert [(d.payload, d.deliveries) for d in got] == [(b"job", 1)], "a release does not count"
            idle.ack(*got)
        holder.stdin.write("done\n")
        holder.stdin.flush()
        assert holder.wait(30) == 0
    finally:
        holder.kill()
        holder.wait()
