"""The consumer on the real HBase, in this process: order, durable marks, blocking without busy polling,
doorbells across processes, one active consumer, auto-commit, transactional reads, metrics, bad input."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from tms_hbase import MessagingClient, Record, TopicId
from tms_hbase.errors import (
    InvalidArgument,
    LeaseLost,
    SubscriptionBusy,
    SubscriptionNotFound,
    TopicNotFound,
)
from tms_hbase.tx import NO_TX_IN_PROGRESS, Transaction, write_pointer_now

ROOT = Path(__file__).resolve().parents[2]
T = TopicId("cons", "orders")
# The doorbell tests' slow poll is an hour and a poll waits at most WAIT: a delivery at all came from a ring,
# however loaded the machine
SLOW_POLL = 3600.0
WAIT = 300.0


def payloads(messages) -> list[bytes]:
    return [m.payload for m in messages]


@pytest.fixture
def topic(client: MessagingClient) -> TopicId:
    client.create_topic(T)
    client.create_subscription(T, "svc")
    return T


def test_messages_come_in_order_and_a_new_consumer_resumes_after_the_commit(
    client: MessagingClient, topic: TopicId
) -> None:
    client.publish(topic, [b"a", b"b", b"c"])
    wp = write_pointer_now()
    client.store(topic, [b"s1", b"s2"], tx_write_pointer=wp)
    client.publish(topic, [], tx_write_pointer=wp)  # a pointer row: its stored payloads, in order
    client.publish(topic, [b"d"])
    with client.consumer(topic, "svc", max_wait_seconds=0.2) as consumer:
        got = []
        for message in consumer:
            got.append(message.payload)
            if message.payload == b"s1":
                consumer.commit()
                break
        assert got == [b"a", b"b", b"c", b"s1"]
        committed = consumer.committed
    assert client.get_subscription(topic, "svc").position == committed
    with client.consumer(topic, "svc", max_wait_seconds=0.2) as consumer:
        assert payloads(consumer) == [b"s2", b"d"]
        assert consumer.poll(timeout_seconds=0.1) == []  # the end: nothing more, after the timeout
        consumer.commit()
    assert client.lag(topic, "svc").messages == 0


def test_the_mark_never_moves_backwards_and_only_delivered_messages_can_be_committed(
    client: MessagingClient, topic: TopicId
) -> None:
    client.publish(topic, [b"1", b"2", b"3"])
    with client.consumer(topic, "svc", max_wait_seconds=0.1) as consumer:
        first, second, third = consumer.poll(max_messages=3)
        consumer.commit()
        consumer.commit(first)  # older: ignored
        assert client.get_subscription(topic, "svc").position == third.id
        client.publish(topic, [b"4"])
        fourth = client.fetch(topic, start_message=third.id, inclusive=False)
        with pytest.raises(InvalidArgument, match="not delivered"):
            consumer.commit(next(fourth))
        with pytest.raises(InvalidArgument):
            consumer.commit(b"not an id")
        assert second.id < third.id


def test_a_waiting_consumer_wakes_on_a_publish_from_this_process(client: MessagingClient, topic: TopicId) -> None:
    with client.consumer(topic, "svc", poll_interval_seconds=SLOW_POLL) as consumer:
        threading.Timer(0.3, client.publish, (topic, [b"wake"])).start()
        got = consumer.poll(timeout_seconds=WAIT)
    assert payloads(got) == [b"wake"], "the publish did not ring"


def test_a_publish_from_another_process_rings_the_doorbell(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    script = (
        "import time; from tms_hbase import MessagingClient, TopicId\n"
        "with MessagingClient(create_tables=False) as c:\n"
        "    t = TopicId('cons', 'orders')\n"
        "    for i in range(20):\n"  # the first publishes learn the doorbells (in the background)
        "        c.publish(t, [b'p%d' % i]); time.sleep(0.5)\n"
    )
    with client.consumer(topic, "svc", poll_interval_seconds=SLOW_POLL) as consumer:
        publisher = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=tms_env)
        try:
            first = consumer.poll(timeout_seconds=WAIT)
            second = consumer.poll(timeout_seconds=WAIT)
        finally:
            publisher.kill()
            publisher.wait()
    assert first and second, "no doorbell rang"


def test_after_the_tail_a_ring_that_came_first_or_comes_later_ends_the_wait_for_it(
    client: MessagingClient, topic: TopicId
) -> None:
    """A read that reached the tail with messages makes the next poll wait for a ring before it reads
    again: a ring that came before that poll, and one that comes during it, both end the wait at once."""
    client.publish(topic, [b"a"])
    with client.consumer(topic, "svc", poll_interval_seconds=SLOW_POLL) as consumer:
        assert payloads(consumer.poll(timeout_seconds=WAIT)) == [b"a"]
        client.publish(topic, [b"b"])  # rung before the next poll begins
        assert payloads(consumer.poll(timeout_seconds=WAIT)) == [b"b"], "the ring that came first was missed"
        threading.Timer(0.3, client.publish, (topic, [b"c"])).start()  # rung while it waits
        assert payloads(consumer.poll(timeout_seconds=WAIT)) == [b"c"], "the ring that came later was missed"


def test_after_the_tail_a_poll_returns_what_was_acknowledged_before_it_without_any_ring(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    """The wait for a ring after a read that reached the tail is only a wait: every poll still reads before
    it returns, so a message another process published before the poll, which rang nobody, comes out."""
    script = (
        "from tms_hbase import MessagingClient, TopicId\n"
        "with MessagingClient(create_tables=False) as c:\n"
        "    c.publish(TopicId('cons', 'orders'), [b'unrung'])\n"
    )
    client.publish(topic, [b"a"])
    with client.consumer(topic, "svc", doorbell=None, poll_interval_seconds=60) as consumer:
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=tms_env, check=True, timeout=120)
        assert payloads(consumer.poll(timeout_seconds=0.5)) == [b"unrung"]
        assert consumer.poll(timeout_seconds=0) == []


def test_an_iteration_ends_after_max_wait_without_messages(client: MessagingClient, topic: TopicId) -> None:
    client.publish(topic, [b"only"])
    with client.consumer(topic, "svc", max_wait_seconds=0.3) as consumer:
        started = time.monotonic()
        assert payloads(consumer) == [b"only"]
        assert time.monotonic() - started >= 0.3
        assert payloads(consumer) == []  # iterate again to go on


def test_one_active_consumer_per_subscription(client: MessagingClient, topic: TopicId) -> None:
    with client.consumer(topic, "svc", lease_seconds=30) as owner:
        with pytest.raises(SubscriptionBusy, match="held by consumer"):
            client.consumer(topic, "svc")
        assert client.get_subscription(topic, "svc").owner == owner.owner
    with client.consumer(topic, "svc") as successor:  # closing released the lease at once
        assert successor.owner != owner.owner


def test_a_detached_consumer_is_resumed_by_its_session_in_another_client(
    client: MessagingClient, topic: TopicId, hbase_address: str, prefix: str
) -> None:
    """What the gateway does between HTTP calls: detach keeps the lease, a session resumes after the last
    message delivered (even with a new client), and a session whose lease ran out is refused."""
    client.publish(topic, [b"a", b"b", b"c", b"d"])
    lease = 5.0  # outlasts a loaded machine's steps from detach to resume and commit; short enough to wait out
    consumer = client.consumer(topic, "svc", lease_seconds=lease, owner="svc-owner")
    assert consumer.owner == "svc-owner"
    assert payloads(consumer.poll(max_messages=2, timeout_seconds=5)) == [b"a", b"b"]
    session = consumer.detach()
    assert session.owner == "svc-owner" and session.delivered == consumer.delivered
    with pytest.raises(SubscriptionBusy):  # the lease is still held
        client.consumer(topic, "svc")
    with MessagingClient(hbase_address, prefix) as other:
        resumed = other.consumer(topic, "svc", lease_seconds=lease, session=session)
        assert payloads(resumed.poll(max_messages=1, timeout_seconds=5)) == [b"c"]
        resumed.commit()
        session = resumed.detach()
    assert client.get_subscription(topic, "svc").position == session.delivered
    deadline = time.monotonic() + 60
    while client.get_subscription(topic, "svc").owner is not None:  # the lease runs out by itself
        assert time.monotonic() < deadline
        time.sleep(0.1)
    with pytest.raises(LeaseLost):
        client.consumer(topic, "svc", session=session)
    with client.consumer(topic, "svc", max_wait_seconds=0.2) as fresh:  # after the committed mark
        assert payloads(fresh) == [b"d"]
    with pytest.raises(InvalidArgument):
        client.consumer(topic, "svc", session=session, owner="both")


def test_a_consumer_dropped_without_close_stops_renewing_its_lease(client: MessagingClient, topic: TopicId) -> None:
    dropped = client.consumer(topic, "svc", lease_seconds=3)
    owner = dropped.owner
    del dropped
    gc.collect()
    with client.consumer(topic, "svc", wait_for_lease=30) as successor:
        assert successor.owner != owner


def test_a_forced_reset_takes_the_lease_and_the_old_consumer_cannot_commit(
    client: MessagingClient, topic: TopicId
) -> None:
    client.publish(topic, [b"x", b"y"])
    with client.consumer(topic, "svc", max_wait_seconds=0.1) as consumer:
        consumer.poll(max_messages=2)
        with pytest.raises(SubscriptionBusy):
            client.reset_subscription(topic, "svc", "latest")
        client.reset_subscription(topic, "svc", "earliest", force=True)
        with pytest.raises(LeaseLost, match="lost the lease"):
            consumer.commit()
        with pytest.raises(LeaseLost):
            consumer.poll()
    assert client.get_subscription(topic, "svc").position is None
    assert client.lag(topic, "svc").messages == 2


def test_auto_commit_commits_handled_messages_only(client: MessagingClient, topic: TopicId) -> None:
    client.publish(topic, [b"1", b"2", b"3", b"4"])
    with pytest.raises(RuntimeError), client.consumer(topic, "svc", auto_commit=True, max_wait_seconds=0.1) as consumer:
        for message in consumer:
            if message.payload == b"3":
                raise RuntimeError("handling 3 failed")
    with client.consumer(topic, "svc", auto_commit=True, max_wait_seconds=0.1) as consumer:
        assert payloads(consumer) == [b"3", b"4"]
    assert client.lag(topic, "svc").messages == 0


def test_reading_with_a_transaction_skips_rolled_back_and_stops_at_in_progress(
    client: MessagingClient, topic: TopicId
) -> None:
    base = write_pointer_now()
    client.publish(topic, [b"plain"])
    handle = client.publish(topic, [b"rolled back"], tx_write_pointer=base + 100)
    client.rollback(topic, handle)
    client.publish(topic, [b"committed"], tx_write_pointer=base + 200)
    client.publish(topic, [b"in progress"], tx_write_pointer=base + 300)
    client.publish(topic, [b"after"])
    reader = Transaction(base + 250, base + 251, [], [base + 300], base + 300)
    with client.consumer(topic, "svc", transaction=reader, max_wait_seconds=0.1) as consumer:
        assert payloads(consumer) == [b"plain", b"committed"]


def test_metrics_count_publishes_and_consumed_messages(client: MessagingClient, topic: TopicId) -> None:
    labels = {"topic": str(topic)}

    def value(name: str, extra: dict | None = None) -> float:
        return REGISTRY.get_sample_value(name, {**labels, **(extra or {})}) or 0.0

    names = ("tms_client_published_messages_total", "tms_client_publishes_total", "tms_client_published_bytes_total")
    before = [value(name) for name in names]
    client.publish(topic, [b"12345", Record(b"678", key=b"k")])  # bytes as the totals count them: 5 + 3 + 6 + 1
    assert [value(name) for name in names] == [before[0] + 2, before[1] + 1, before[2] + 15]
    assert REGISTRY.get_sample_value("tms_client_publish_seconds_count") >= 1
    with client.consumer(topic, "svc", max_wait_seconds=0.1) as consumer:
        list(consumer)
    assert value("tms_client_consumed_messages_total", {"subscription": "svc"}) >= 2


def test_bad_input_is_refused_clearly(client: MessagingClient, topic: TopicId) -> None:
    with pytest.raises(SubscriptionNotFound, match="'nope' of topic cons:orders does not exist"):
        client.consumer(topic, "nope")
    with pytest.raises(TopicNotFound):
        client.consumer(TopicId("cons", "missing"), "svc")
    for bad in (
        {"max_wait_seconds": -1},
        {"lease_seconds": 0.1},
        {"poll_interval_seconds": 0},
        {"batch": 0},
        {"auto_commit": 1},
    ):
        with pytest.raises(InvalidArgument):
            client.consumer(topic, "svc", **bad)
    with pytest.raises(InvalidArgument, match="Transaction or a TransactionClient"):
        client.consumer(topic, "svc", transaction="tx")
    with pytest.raises(InvalidArgument, match="bad subscription name"):
        client.consumer(topic, "a b")
    with client.consumer(topic, "svc") as consumer, pytest.raises(InvalidArgument):
        consumer.poll(max_messages=0)
    assert client.get_subscription(topic, "svc").owner is None  # nothing left held


def test_a_consumer_stops_when_its_topic_is_deleted_or_recreated(client: MessagingClient, topic: TopicId) -> None:
    client.publish(topic, [b"old"])
    with client.consumer(topic, "svc", max_wait_seconds=0.1) as consumer:
        assert payloads(consumer) == [b"old"]
        client.delete_topic(topic)
        time.sleep(1.1)  # the metadata cache of this client lives up to a second
        with pytest.raises(TopicNotFound):
            consumer.poll(timeout_seconds=0.1)
        client.create_topic(topic)
        with pytest.raises(SubscriptionNotFound):
            consumer.poll(timeout_seconds=0.1)
    with pytest.raises(SubscriptionNotFound):
        client.get_subscription(topic, "svc")
    assert client.list_subscriptions(topic) == []


def test_no_transaction_state_needed_for_plain_consumers(client: MessagingClient, topic: TopicId) -> None:
    """A consumer without a transaction client reads the transaction state from HBase to settle a mark
    committed in a transaction: one that never committed (no server ever ran here) moves nothing."""
    client.publish(topic, [b"a", b"b"])
    with client.consumer(topic, "svc", max_wait_seconds=0.1) as consumer:
        a, _b = consumer.poll(max_messages=2)
        tx = Transaction(1, 5, [], [], NO_TX_IN_PROGRESS)
        consumer.commit(a, transaction=tx)
        assert client.get_subscription(topic, "svc").pending is not None
    with client.consumer(topic, "svc", max_wait_seconds=0.1) as consumer:
        assert payloads(consumer) == [b"a", b"b"]  # the transaction never committed: nothing consumed
