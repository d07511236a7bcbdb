"""Subscriptions, lag and topic statistics on the real HBase: start points, resets, deletion with the
topic, counts that need no scan (also after the sweeper removed the head of a topic), and bad input."""

from __future__ import annotations

import time

import pytest

from bench.calls import CallCounter
from tms_hbase import MessagingClient, TopicId
from tms_hbase.errors import (
    InvalidArgument,
    LeaseLost,
    SubscriptionAlreadyExists,
    SubscriptionBusy,
    SubscriptionNotFound,
    TopicAlreadyExists,
    TopicNotFound,
)
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, generation_prefix, message_key
from tms_hbase.model.stats import Lag
from tms_hbase.tx import write_pointer_now
from tms_hbase_sweeper.sweep import Sweeper

T = TopicId("subs", "events")
CHAIN = {"ordering": "chain"}  # dense positions 1, 2, 3, exact lag


def ids(client: MessagingClient, topic: TopicId = T) -> list[bytes]:
    return [m.id for m in client.fetch(topic)]


def next_payloads(client: MessagingClient, name: str, topic: TopicId = T) -> list[bytes]:
    """Consume what is there and commit it."""
    with client.consumer(topic, name, max_wait_seconds=0.1) as consumer:
        got = [m.payload for m in consumer]
        consumer.commit()
        return got


def test_create_get_list_delete(client: MessagingClient) -> None:
    client.create_topic(T)
    created = client.create_subscription(T, "b")
    assert (created.name, created.position, created.generation, created.owner) == ("b", None, 1, None)
    client.create_subscription(T, "a")
    with pytest.raises(SubscriptionAlreadyExists):
        client.create_subscription(T, "a", start="latest")
    assert [s.name for s in client.list_subscriptions(T)] == ["a", "b"]
    assert client.get_subscription("subs:events", "b") == created
    client.delete_subscription(T, "b")
    with pytest.raises(SubscriptionNotFound):
        client.get_subscription(T, "b")
    with pytest.raises(SubscriptionNotFound):
        client.delete_subscription(T, "b")
    assert client.create_subscription(T, "b").position is None  # the name can be used again


def test_start_points_earliest_latest_and_time(client: MessagingClient) -> None:
    client.create_topic(T)
    client.publish(T, [b"1", b"2"])
    client.publish(T, [b"3"])
    cut = time.time_ns() // 1_000_000 + 1
    while time.time_ns() // 1_000_000 <= cut:
        time.sleep(0.001)
    client.publish(T, [b"4"])
    client.create_subscription(T, "all", start="earliest")
    client.create_subscription(T, "new", start="latest")
    client.create_subscription(T, "since", start=cut)
    client.publish(T, [b"5"])
    assert next_payloads(client, "all") == [b"1", b"2", b"3", b"4", b"5"]
    assert next_payloads(client, "new") == [b"5"]
    assert next_payloads(client, "since") == [b"4", b"5"]


def test_reset_moves_the_mark_both_ways(client: MessagingClient) -> None:
    client.create_topic(T)
    client.publish(T, [b"1", b"2", b"3"])
    client.create_subscription(T, "svc")
    assert next_payloads(client, "svc") == [b"1", b"2", b"3"]
    client.reset_subscription(T, "svc", start_message=ids(client)[1])  # the next message delivered
    assert next_payloads(client, "svc") == [b"2", b"3"]
    client.reset_subscription(T, "svc", "earliest")
    assert next_payloads(client, "svc") == [b"1", b"2", b"3"]
    client.reset_subscription(T, "svc", "latest")
    assert next_payloads(client, "svc") == []
    client.reset_subscription(T, "svc", start_time_ms=0)
    assert client.lag(T, "svc").messages == 3


def test_bad_input_changes_nothing(client: MessagingClient) -> None:
    client.create_topic(T)
    client.publish(T, [b"1"])
    with pytest.raises(TopicNotFound):
        client.create_subscription(TopicId("subs", "missing"), "svc")
    for bad_name in ("", "a:b", "x" * 256, 5, None):
        with pytest.raises(InvalidArgument, match="bad subscription name"):
            client.create_subscription(T, bad_name)
    for bad_start in ("soon", -1, 1.5, True, b"earliest"):
        with pytest.raises(InvalidArgument, match="bad start"):
            client.create_subscription(T, "svc", start=bad_start)
    assert client.list_subscriptions(T) == []
    client.create_subscription(T, "svc")
    other = TopicId("subs", "other")
    client.create_topic(other)
    client.delete_topic(other)
    client.create_topic(other)
    client.publish(other, [b"x"])
    foreign = ids(client, other)[0]  # generation 2 of another topic
    for args, kwargs, match in [
        ((), {}, "exactly one"),
        ((b"short",), {}, "corrupt message id"),
        ((foreign,), {}, "generation 2"),
        ((bytes(MessageId(1, 99, 0)),), {}, "past the end"),
        (("earliest",), {"start_time_ms": 5}, "exactly one"),
        ((), {"start_time_ms": -5}, "bad start"),
    ]:
        with pytest.raises(InvalidArgument, match=match):
            client.reset_subscription(T, "svc", *args, **kwargs)
    assert client.get_subscription(T, "svc").position is None


def test_subscriptions_go_with_their_topic(client: MessagingClient) -> None:
    client.create_topic(T)
    client.publish(T, [b"old"])
    client.create_subscription(T, "svc")
    client.delete_topic(T)
    with pytest.raises(TopicNotFound):
        client.list_subscriptions(T)
    client.create_topic(T)
    assert client.list_subscriptions(T) == []
    with pytest.raises(SubscriptionNotFound):
        client.lag(T, "svc")
    client.create_subscription(T, "svc")
    client.publish(T, [b"new"])
    assert next_payloads(client, "svc") == [b"new"]


def test_the_sweeper_removes_subscriptions_of_old_generations(client: MessagingClient) -> None:
    client.create_topic(T)
    client.create_subscription(T, "gone")
    client.delete_topic(T)
    client.create_topic(T)
    client.create_subscription(T, "kept")
    table = client.installation.table("subscriptions")
    assert len(table.scan()) == 2
    assert Sweeper(client.installation, dry_run=True).sweep_once().subscriptions_dropped == 1
    assert len(table.scan()) == 2
    assert Sweeper(client.installation).sweep_once().subscriptions_dropped == 1
    assert [s.name for s in client.list_subscriptions(T)] == ["kept"] and len(table.scan()) == 1


def test_the_sweeper_removes_the_state_rows_of_shared_subscriptions_of_old_generations(
    client: MessagingClient,
) -> None:
    """A shared subscription's claims, ranges and counters live in rows of their own (no ``d:s``): when
    its topic is deleted they go with the subscription; a live generation's stay."""
    first = client.create_topic(T).generation
    client.publish(T, [b"1", b"2", b"3"])
    client.create_subscription(T, "gone", shared=True)
    with client.shared_consumer(T, "gone") as consumer:
        consumer.ack(*consumer.receive(2, 5))
        consumer.receive(1, 5)  # one left in flight
    client.delete_topic(T)
    client.create_topic(T)
    client.publish(T, [b"new"])
    client.create_subscription(T, "kept", shared=True)
    with client.shared_consumer(T, "kept") as consumer:
        consumer.receive(1, 5)
    table = client.installation.table("subscriptions")
    old = generation_prefix(T, first)
    live = generation_prefix(T, client.get_topic(T).generation)
    assert len([k for k, _ in table.scan(prefix=old)]) > 1, "the old subscription has state rows"
    kept = [k for k, _ in table.scan(prefix=live)]
    assert Sweeper(client.installation, dry_run=True).sweep_once().subscriptions_dropped == 1
    assert len([k for k, _ in table.scan(prefix=old)]) > 1
    assert Sweeper(client.installation).sweep_once().subscriptions_dropped == 1
    assert table.scan(prefix=old) == []
    assert [k for k, _ in table.scan(prefix=live)] == kept
    assert [s.name for s in client.list_subscriptions(T)] == ["kept"]


def test_busy_subscriptions_are_not_reset_or_deleted_unless_forced(client: MessagingClient) -> None:
    client.create_topic(T)
    client.create_subscription(T, "svc")
    with client.consumer(T, "svc", lease_seconds=30):
        with pytest.raises(SubscriptionBusy, match="active consumer"):
            client.delete_subscription(T, "svc")
        with pytest.raises(SubscriptionBusy):
            client.reset_subscription(T, "svc", "latest")
        client.delete_subscription(T, "svc", force=True)
    assert client.list_subscriptions(T) == []


def test_lag_counts_messages_and_age_without_scanning(client: MessagingClient) -> None:
    client.create_topic(T, CHAIN)
    client.create_subscription(T, "svc")
    assert client.lag(T, "svc") == Lag(0, 0.0)
    for _ in range(50):
        client.publish(T, [b"x" * 10] * 20)  # 50 rows of 20
    wp = write_pointer_now()
    client.store(T, [b"s"] * 7, tx_write_pointer=wp)
    client.publish(T, [], tx_write_pointer=wp)  # a pointer row counts its stored payloads
    time.sleep(0.05)
    lag = client.lag(T, "svc")
    assert lag.messages == 1007 and lag.exact and lag.seconds >= 0.05
    with client.consumer(T, "svc", max_wait_seconds=0.1) as consumer:
        consumer.poll(max_messages=30)  # one row and a half
        consumer.commit()
        calls = client.installation.calls
        assert client.lag(T, "svc").messages == 977
        # a few reads, not a scan: those of the numbers, the rollback index's and the transaction state's
        assert client.installation.calls - calls <= 11, "lag must take a few reads, not a scan"
        wanted = 973  # up to the pointer row's third payload
        while wanted:
            wanted -= len(consumer.poll(max_messages=wanted))
        consumer.commit()
    assert client.lag(T, "svc").messages == 4
    assert next_payloads(client, "svc") == [b"s"] * 4
    assert client.lag(T, "svc").messages == 0


def test_topic_stats_count_readable_messages_also_after_the_sweeper(
    client: MessagingClient, hbase_address: str, prefix: str
) -> None:
    client.admin.set_tail_cache_seconds(1)  # writers trust a remembered tail 1 s: a grace of 4 s is allowed
    client.create_topic(T, {"ttl": "1", **CHAIN})
    client.publish(T, [b"aaa", b"bb"])
    client.publish(T, [b"c"])
    time.sleep(1 + 4 + 0.3)  # those three expire, and the grace passes
    Sweeper(client.installation, grace_seconds=4).sweep_once()
    assert [m.payload for m in client.fetch(T)] == []
    stats = client.topic_stats(T)
    assert (stats.messages, stats.bytes, stats.last_position, stats.first_position) == (0, 0, 2, None)
    client.update_topic(T, {"ttl": "3600"})  # nothing more expires while the test looks
    with MessagingClient(hbase_address, prefix) as other:  # a writer that reads the stripped tail row
        other.publish(T, [b"dddd", b"ee"])
    client.create_subscription(T, "svc")
    stats = client.topic_stats(T, windows=[60])
    assert (stats.messages, stats.bytes, stats.exact) == (2, 6, True)
    assert stats.published == 5, "the stripped tail row kept its totals"
    assert (stats.first_position, stats.last_position) == (2, 3)  # row 2 is readable again, but empty
    assert stats.rates == {60: 2 / 60}
    assert [(name, lag.messages) for name, _, lag in stats.subscriptions] == [("svc", 2)]


def test_rows_without_totals_give_estimates_marked_as_such(client: MessagingClient) -> None:
    client.create_topic(T)
    client.publish(T, [b"1"])
    generation = client.get_topic(T).generation
    old = BatchRow(time.time_ns() // 1_000_000, b"w" * 16, 1, (b"a", b"b"))  # as an older writer wrote it
    client.installation.table("messages").put(message_key(T, generation, 2), {MESSAGE_COLUMN: old.encode()})
    client.create_subscription(T, "svc")
    stats = client.topic_stats(T)
    assert not stats.exact and stats.messages > 0
    client.publish(T, [b"3"])  # counting starts again after a row without totals
    assert client.get_subscription(T, "svc").position is None
    assert next_payloads(client, "svc") == [b"1", b"a", b"b", b"3"]


def test_times_that_look_like_seconds_or_overflow_are_refused_and_change_nothing(client: MessagingClient) -> None:
    client.create_topic(T)
    client.publish(T, [b"m"])
    client.create_subscription(T, "s")
    for bad in (int(time.time()), 10**27, -1):
        with pytest.raises(InvalidArgument, match="start"):
            list(client.fetch(T, start_time_ms=bad))
        with pytest.raises(InvalidArgument):
            client.create_subscription(T, "t", start=bad)
        with pytest.raises(InvalidArgument):
            client.reset_subscription(T, "s", start_time_ms=bad)
    with pytest.raises(InvalidArgument, match="looks like seconds"):
        list(client.fetch(T, start_time_ms=int(time.time())))
    assert [s.name for s in client.list_subscriptions(T)] == ["s"] and client.lag(T, "s").messages == 1
    assert [m.payload for m in client.fetch(T, start_time_ms=0)] == [b"m"]  # 0 (and small times) still mean "all"


def test_exist_ok_returns_what_exists_and_changes_nothing(client: MessagingClient) -> None:
    created = client.create_topic(T, {"ttl": "60"})
    assert client.create_topic(T, {"ttl": "99"}, exist_ok=True) == created
    with pytest.raises(TopicAlreadyExists):
        client.create_topic(T)
    client.publish(T, [b"m"])
    sub = client.create_subscription(T, "s", "latest")
    assert client.create_subscription(T, "s", "earliest", exist_ok=True) == sub  # its mark is kept
    with pytest.raises(SubscriptionAlreadyExists):
        client.create_subscription(T, "s")


def test_release_takes_the_lease_from_a_consumer_that_is_gone_and_keeps_the_mark(client: MessagingClient) -> None:
    client.create_topic(T)
    client.publish(T, [b"a", b"b"])
    client.create_subscription(T, "s")
    stuck = client.consumer(T, "s", lease_seconds=60, max_wait_seconds=0.1)
    assert next(iter(stuck)).payload == b"a"
    stuck.commit()
    with pytest.raises(SubscriptionBusy):
        client.consumer(T, "s", wait_for_lease=0)
    released = client.release_subscription(T, "s")
    assert released.owner is None and released.position == client.get_subscription(T, "s").position
    with client.consumer(T, "s", max_wait_seconds=0.1) as successor:
        assert [m.payload for m in successor] == [b"b"]
    with pytest.raises(LeaseLost):  # the old consumer, back: its next write finds the lease gone
        for _ in stuck:
            stuck.commit()
    stuck.close()
    with pytest.raises(SubscriptionNotFound):
        client.release_subscription(T, "nope")


def test_a_topics_subscriptions_are_listed_in_the_same_calls_whatever_their_number(client: MessagingClient) -> None:
    """list_subscriptions and topic_stats read a topic's subscriptions, the shared ones' settings included, in the
    same calls to the subscriptions table for 2 subscriptions or 30 (each one listed used to cost one or two
    reads more: its shared settings, and for an exclusive one whether it exists), and the shared one still has
    its numbers. Calls are counted, not timed (bench/calls.py)."""
    few, many = TopicId("subs", "few"), TopicId("subs", "many")
    for topic, exclusive in ((few, 1), (many, 29)):
        client.create_topic(topic)
        client.publish(topic, [b"one", b"two"])
        client.create_subscription(topic, "shared", shared=True)
        for n in range(exclusive):
            client.create_subscription(topic, f"exclusive-{n:02d}")
    client.topic_stats(few)  # the client's parts made, HBase's clock read
    counter = CallCounter()
    spent = {}
    tables = (client._subscriptions.table, client._shared_store.table)
    with counter.counting(client.installation, *tables, this_thread=True):
        for topic, exclusive in ((few, 1), (many, 29)):
            counter.reset()
            listed = client.list_subscriptions(topic)
            stats = client.topic_stats(topic)
            spent[topic] = sum(n for call, n in counter.calls.items() if call.startswith("subscriptions."))
            assert [s.name for s in listed] == [*(f"exclusive-{n:02d}" for n in range(exclusive)), "shared"]
            assert [s.shared is None for s in listed] == [True] * exclusive + [False]
            assert listed[-1].shared is not None and listed[-1].shared.waiting == 2
            assert [lag.messages for _name, _mark, lag in stats.subscriptions] == [2] * (exclusive + 1)
    assert spent[many] == spent[few], spent


def test_a_listing_reads_the_subscription_rows_in_one_scan(client: MessagingClient) -> None:
    """list_subscriptions reads a topic's subscription rows once: one scan for the subscriptions and the shared
    ones' settings (the settings had a scan of their own, which passed over the topic's rows again, its shared
    subscriptions' state rows included). Calls are counted, not timed (bench/calls.py)."""
    topic = TopicId("subs", "scanned")
    client.create_topic(topic)
    client.publish(topic, [b"one"])
    for name in ("a", "b", "c"):
        client.create_subscription(topic, name)
    client.list_subscriptions(topic)  # the client's parts made, HBase's clock read
    counter = CallCounter()
    tables = (client._subscriptions.table, client._shared_store.table)
    with counter.counting(client.installation, *tables, this_thread=True):
        listed = client.list_subscriptions(topic)
    assert [s.name for s in listed] == ["a", "b", "c"] and all(s.shared is None for s in listed)
    assert {call: n for call, n in counter.calls.items() if call.startswith("subscriptions.")} == {
        "subscriptions.scan": 1
    }
