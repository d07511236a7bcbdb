"""Shared subscriptions in one process: the work is spread, settling (ack, nack with a delay, release,
extend) does what it says, and bad input gives a clear error from the TmsError tree and changes nothing."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tms_hbase import (
    DeadLetter,
    InvalidArgument,
    MessageId,
    MessagingClient,
    NotHeld,
    SharedConsumer,
    SubscriptionNotFound,
    TopicId,
    TopicNotFound,
)
from tms_hbase.shared.state import Claim, ClaimState, Keys
from tms_hbase.shared.store import SharedStore

T = TopicId("queue", "jobs")


@pytest.fixture
def queue(client: MessagingClient) -> MessagingClient:
    client.create_topic(T)
    client.publish(T, [str(i).encode() for i in range(20)])
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=3.0, claim_size=4)
    return client


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    until = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < until, "timed out"
        time.sleep(0.05)


def payloads(deliveries: list) -> list[bytes]:
    return [d.payload for d in deliveries]


def test_two_consumers_share_the_messages_and_settle_them(queue: MessagingClient) -> None:
    with queue.shared_consumer(T, "work") as a, queue.shared_consumer(T, "work") as b:
        first, second = a.receive(6, 1.0), b.receive(6, 1.0)
        assert not set(payloads(first)) & set(payloads(second)), "one message went to two consumers"
        assert all(d.deliveries == 1 for d in first + second)
        a.ack(*first[:4])
        a.nack(first[4], delay_seconds=0.3)
        a.release(first[5])
        extended = b.extend(second[0], 10.0)
        assert extended > second[0].deadline
        got = []
        until = time.monotonic() + 10
        while len(got) < 20 - 6 - 6 + 2 and time.monotonic() < until:  # the rest, and the two given back
            got += a.receive(10, 0.5)
        again = {d.payload: d.deliveries for d in got if d.payload in payloads(first)}
        assert again == {first[4].payload: 2, first[5].payload: 1}, "nack counts a delivery, release does not"
        a.ack(*got)
        b.ack(*second)
    numbers = queue.get_subscription(T, "work").shared
    assert numbers is not None
    assert (numbers.acknowledged, numbers.waiting, numbers.in_flight, numbers.due) == (20, 0, 0, 0)
    assert queue.lag(T, "work").messages == 0


def test_bad_input_is_refused_and_changes_nothing(queue: MessagingClient) -> None:
    with queue.shared_consumer(T, "work") as a, queue.shared_consumer(T, "work") as b:
        held = a.receive(2, 1.0)
        other = b.receive(1, 1.0)
        before = queue.pending(T, "work")
        unknown = bytes(MessageId(1, 10_000, 0))
        with pytest.raises(NotHeld, match="never delivered"):
            a.ack(unknown)
        with pytest.raises(NotHeld, match="not held by this consumer"):
            a.ack(other[0])
        with pytest.raises(InvalidArgument):
            a.ack(b"not an id")
        with pytest.raises(InvalidArgument):
            a.ack(bytes(MessageId(7, 1, 0)))  # another generation
        with pytest.raises(InvalidArgument):
            a.ack()
        with pytest.raises(InvalidArgument):
            a.nack(held[0], delay_seconds=-1)
        for too_long in (1e300, float("inf"), 7 * 86400 + 1):  # bounded as the ack timeout is: a week
            with pytest.raises(InvalidArgument, match="a week"):
                a.nack(held[0], delay_seconds=too_long)
            with pytest.raises(InvalidArgument, match="a week"):
                a.extend(held[0], too_long)
        with pytest.raises(InvalidArgument):
            a.receive(0)
        assert queue.pending(T, "work") == before
        a.ack(held[0])
        with pytest.raises(NotHeld, match="acknowledged already"):
            a.ack(held[0])
        wait_until(lambda: any(p.id == held[1].id and p.state == "expired" for p in queue.pending(T, "work")))
        with pytest.raises(NotHeld, match="deadline passed"):
            a.ack(held[1])
        with pytest.raises(NotHeld, match="deadline passed"):
            a.extend(held[1])
        queue.reset_subscription(T, "work", "earliest")
        with pytest.raises(NotHeld, match="reset"):
            b.ack(other[0])
        assert queue.get_subscription(T, "work").shared.acknowledged == 0  # type: ignore[union-attr]
        fresh = b.receive(1, 1.0)
        assert payloads(fresh) == [b"0"], "after a reset the subscription starts again"
        queue.delete_subscription(T, "work")
        with pytest.raises(SubscriptionNotFound):
            b.ack(fresh[0])
        with pytest.raises(SubscriptionNotFound):
            b.receive(1, 0.1)


def test_an_owner_name_is_bounded(queue: MessagingClient) -> None:
    """An owner is written into every claim and keys its doorbell's row: a huge one is refused at once,
    not by HBase at the first idle wait."""
    with pytest.raises(InvalidArgument, match="at most 300"):
        queue.shared_consumer(T, "work", owner="x" * 40_000)
    with queue.shared_consumer(T, "work", owner="x" * 300, max_wait_seconds=0.2) as longest:
        got = longest.receive(20, 5.0)
        longest.ack(*got)
        assert longest.receive(1, 0.3) == []  # an idle wait: its doorbell's cell is written
    assert {p.owner for p in queue.pending(T, "work")} <= {"x" * 300}


def test_an_ack_of_a_message_held_here_still_fails_after_a_reset_or_deletion(client: MessagingClient) -> None:
    """An ack of a message the consumer holds (before its deadline) is one compare-and-set, without
    reading the settings; the reset or deletion removed its claim, so it fails as it must."""
    client.create_topic(T)
    client.publish(T, [b"0", b"1", b"2"])
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=30)
    with client.shared_consumer(T, "work") as consumer:
        one, two, _three = consumer.receive(3, 5)
        calls = client.installation.calls
        consumer.ack(one)
        assert client.installation.calls - calls == 1, "one compare-and-set"
        client.reset_subscription(T, "work", "earliest")
        with pytest.raises(NotHeld, match="reset"):
            consumer.ack(two)
        assert client.get_subscription(T, "work").shared.acknowledged == 0  # type: ignore[union-attr]
        (again,) = consumer.receive(1, 5)
        client.delete_subscription(T, "work")
        with pytest.raises(SubscriptionNotFound):
            consumer.ack(again)


def test_nonsense_settings_are_refused_and_create_nothing(client: MessagingClient) -> None:
    client.create_topic(T)
    bad = [
        {"ack_timeout_seconds": 0},
        {"ack_timeout_seconds": "30"},
        {"max_deliveries": 0},
        {"max_deliveries": True},
        {"claim_size": 0},
        {"dead_letter": "no-colon"},
        {"dead_letter": T},
    ]
    for options in bad:
        with pytest.raises(InvalidArgument):
            client.create_subscription(T, "work", shared=True, **options)  # type: ignore[arg-type]
    with pytest.raises(TopicNotFound):
        client.create_subscription(T, "work", shared=True, dead_letter=TopicId("queue", "missing"))
    with pytest.raises(InvalidArgument):
        client.create_subscription(T, "work", max_deliveries=3)  # settings of a shared one, not shared
    assert client.list_subscriptions(T) == []
    client.create_subscription(T, "plain")
    with pytest.raises(InvalidArgument, match="not shared"):
        client.shared_consumer(T, "plain")
    client.create_subscription(T, "work", shared=True)
    with pytest.raises(InvalidArgument, match="is shared"):
        client.consumer(T, "work")


@pytest.mark.parametrize("count", [0, 1, 7, 40, 150])
def test_claims_written_at_once_say_which_were_there_already(client: MessagingClient, count: int) -> None:
    """A read's claims go out pipelined over up to four connections at once (40 as four parts of 10, 150 as
    four parts of 38): each is created only if absent, and the answers come back in the claims' order."""
    client.admin.init_tables()
    store = SharedStore(client.installation.table("subscriptions"))
    keys = Keys(b"sub", b"incarnt")
    ids = [bytes(MessageId(1, 10 + i, 0)) for i in range(count)]
    there = set(ids[1::3])
    for message_id in there:
        assert store.swap_claim(keys, message_id, None, Claim(ClaimState.HELD, "other", 5, 1, 0))
    mine = Claim(ClaimState.HELD, "me", 7, 1, 0)
    written = store.create_claims(keys, [(message_id, mine) for message_id in ids])
    assert [w is None for w in written] == [message_id in there for message_id in ids]
    assert [w.message_id for w in written if w is not None] == [m for m in ids if m not in there]
    stored = {c.message_id: c.claim.owner for c in store.claims(keys, bytes(MessageId(1, 0, 0)))}
    assert stored == {m: "other" if m in there else "me" for m in ids}


def test_a_deleted_dead_letter_topic_keeps_the_message_and_the_loop_goes_on(client: MessagingClient) -> None:
    """A poison message whose dead-letter topic was deleted is kept (shown as undeliverable, tried again
    after an ack timeout), never raised out of ``for d in consumer``; once the topic is back it goes there."""
    dead = TopicId("queue", "dead")
    client.create_topic(T)
    client.create_topic(dead)
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=0.5, max_deliveries=1, dead_letter=dead)
    client.delete_topic(dead)
    client.publish(T, [b"poison", b"ok 1"])
    handled: list[bytes] = []

    def work(consumer: SharedConsumer) -> None:
        for d in consumer:
            if d.payload == b"poison":
                consumer.nack(d)  # its one delivery failed: the next reap dead-letters it
            else:
                handled.append(d.payload)
                consumer.ack(d)

    with client.shared_consumer(T, "work", max_wait_seconds=2.0) as consumer:
        work(consumer)
        client.publish(T, [b"ok 2"])
        work(consumer)  # tries the dead letter again (its hold ran out) and goes on
    assert handled == [b"ok 1", b"ok 2"]
    poison = client.pending(T, "work")
    assert [(p.state, p.owner, p.deliveries) for p in poison] == [("undeliverable", None, 1)]
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None and (numbers.acknowledged, numbers.dead_lettered, numbers.consumers) == (2, 0, 0)

    client.create_topic(dead)  # the dead-letter topic again: the kept message goes there
    with client.shared_consumer(T, "work") as consumer:
        wait_until(lambda: consumer.receive(1, 0.2) == [] and client.pending(T, "work") == [])
    assert [DeadLetter.of(m).message_id for m in client.fetch(dead)] == [poison[0].id]
    assert client.get_subscription(T, "work").shared.dead_lettered == 1  # type: ignore[union-attr]
