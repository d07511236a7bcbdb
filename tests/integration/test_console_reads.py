"""What the console's screens read of HBase, counted (bench/calls.py), not timed: a screen reads each thing it
shows once."""

from __future__ import annotations

from bench.calls import CallCounter
from tms_hbase import MessagingClient, TopicId
from tms_hbase_gateway.console import views
from tms_hbase_gateway.console.history import History

T = TopicId("consolereads", "orders")


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
    with counter.counting(client.installation, client._subscriptions.table, client._shared_store.table):
        client.list_subscriptions(T)
        listing = _subscription_reads(counter)
        counter.reset()
        detail = views.topic_detail(client, T, History())
        read = _subscription_reads(counter)
    assert [s["name"] for s in detail["subscriptions"]] == [s.name for s in listed] == ["audit", "billing"]
    assert [s["lag"]["messages"] for s in detail["subscriptions"]] == [3, 3]
    assert detail["subscriptions"][0]["shared"]["waiting"] == 3 and detail["subscriptions"][1]["shared"] is None
    assert read == listing, (read, listing)


def _subscription_reads(counter: CallCounter) -> int:
    """The calls to the subscriptions table counted (its rows and the shared subscriptions' state rows)."""
    return sum(n for call, n in counter.calls.items() if call.startswith("subscriptions."))
