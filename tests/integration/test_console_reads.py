"""What the console's screens read of HBase, counted (bench/calls.py), not timed: a screen reads each thing it
shows once."""

from __future__ import annotations

from bench.calls import CallCounter
from tms_hbase import MessagingClient, TopicId
from tms_hbase_gateway.console import views
from tms_hbase_gateway.console.history import History

T = TopicId("consolereads", "orders")
READS = ("metadata.get", "metadata.get_cells", "metadata.scan")  # reads of the topics' metadata rows


def test_the_topic_screen_reads_its_subscriptions_once(client: MessagingClient) -> None:
    """A topic's screen (views.topic_detail: its numbers and its subscriptions with their lag) reads the topic's
    subscriptions, and a shared one's numbers, as one listing does: it read them twice (topic_stats, then
    list_subscriptions). What it shows is what the library's own calls give."""
    client.create_topic(T)
    client.publish(T, [b"one", b"two", b"three"])
    client.create_subscription(T, "billing")
    client.create_subscription(T, "audit", shared=True)
    listed = client.list_subscriptions(T)  # the client's parts made, HBase's clock read
    counter = CallCounter()
    tables = (client._subscriptions.table, client._shared_store.table)
    with counter.counting(client.installation, *tables, this_thread=True):
        client.list_subscriptions(T)
        listing = _subscription_reads(counter)
        counter.reset()
        detail = views.topic_detail(client, T, History())
        read = _subscription_reads(counter)
    assert [s["name"] for s in detail["subscriptions"]] == [s.name for s in listed] == ["audit", "billing"]
    assert [s["lag"]["messages"] for s in detail["subscriptions"]] == [3, 3]
    assert detail["subscriptions"][0]["shared"]["waiting"] == 3 and detail["subscriptions"][1]["shared"] is None
    assert read == listing, (read, listing)


def test_a_page_of_the_topic_list_reads_its_topics_at_once(client: MessagingClient) -> None:
    """The numbers of a page of the topic list (views.topics_numbers) read the page's topics' metadata in one call
    and their subscriptions in one scan, for 2 topics or 6 (each topic's numbers read them in calls of its own:
    the first view of a page of 50 topics after the gateway starts made a hundred of them more). Each topic's
    numbers are what topic_stats gives; a topic that does not exist has none."""
    topics = [TopicId("consolereads", f"page-{n}") for n in range(6)]
    for n, topic in enumerate(topics):
        client.create_topic(topic)
        if n % 2:
            client.publish(topic, [b"m"] * n)
            client.create_subscription(topic, "first", start="earliest")
            client.create_subscription(topic, "second", start="latest")
    views.topics_numbers(client, topics[:1])  # the client's parts made, HBase's clock read
    counter = CallCounter()
    spent = {}
    with counter.counting(client.installation, client._subscriptions.table, this_thread=True):
        for page in (topics[:2], [*topics, TopicId("consolereads", "missing")]):
            counter.reset()
            numbers = views.topics_numbers(client, page)
            # (not metadata.get_cell: the installation's settings are read again once they are a second old)
            spent[len(page)] = {c: n for c, n in counter.calls.items() if c in READS or c.startswith("subscriptions.")}
    assert sorted(numbers) == sorted(str(t) for t in topics)
    for topic in topics:
        stats = client.topic_stats(topic)
        shown = numbers[str(topic)]
        assert (shown["messages"], shown["subscription_count"]) == (stats.messages, len(stats.subscriptions))
        assert shown["lag_messages"] == max((lag.messages for _, _, lag in stats.subscriptions), default=None)
    assert numbers[str(topics[5])]["lag_messages"] == 5
    assert spent[2] == spent[7] == {"metadata.get_cells": 1, "subscriptions.scan": 1}, spent


def _subscription_reads(counter: CallCounter) -> int:
    """The calls to the subscriptions table counted (its rows and the shared subscriptions' state rows)."""
    return sum(n for call, n in counter.calls.items() if call.startswith("subscriptions."))
