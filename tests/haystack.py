"""A topic to search: thousands of keyed messages and one needle near the end (the console's search tests)."""

from __future__ import annotations

from tms_hbase import Message, MessagingClient, Record, TopicId

NEEDLE_KEY = b"needle-key"


def fill_haystack(client: MessagingClient, topic: TopicId, batches: int) -> Message:
    """Create ``topic`` with ``batches`` × 1,000 keyed messages; one in the next-to-last batch is the needle
    (key ``needle-key``, header ``trace: needle-trace``, payload ``the needle``). Returns the needle as fetched."""
    client.create_topic(topic)
    for batch in range(batches):
        records = [Record(f"order {batch}-{n}".encode(), key=f"k-{batch}-{n}".encode()) for n in range(1000)]
        if batch == batches - 2:
            records[500] = Record(b"the needle", key=NEEDLE_KEY, headers=[("trace", b"needle-trace")])
        client.publish(topic, records)
    return next(m for m in client.fetch(topic) if m.key == NEEDLE_KEY)
