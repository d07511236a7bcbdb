"""tms-hbase in one page: topics, publish, fetch, transactions, async publishing, consumers.

Run it against any HBase Thrift gateway: TMS_HBASE_THRIFT=127.0.0.1:9090 python examples/quickstart.py
(the tests run it too, so it stays true).
"""

from tms_hbase import BackgroundPublisher, MessagingClient, TopicAlreadyExists, TopicId
from tms_hbase.tx import NO_TX_IN_PROGRESS, Transaction, write_pointer_now

# Address and table prefix default to $TMS_HBASE_THRIFT and $TMS_TABLE_PREFIX.
with MessagingClient() as client:
    client.admin.init_tables()  # once per installation, like `tms-admin init`; nothing else creates tables
    topic = TopicId("billing", "events")
    try:
        client.create_topic(topic, {"ttl": "86400"})
    except TopicAlreadyExists:
        client.delete_topic(topic)  # start clean: the next generation is empty
        client.create_topic(topic, {"ttl": "86400"})
    meta = client.get_topic(topic)  # TopicMetadata(.properties, .ttl, .generation)
    print(f"{topic}: generation {meta.generation}, ttl {meta.ttl} s")

    # One batch per publish: stored whole or not at all, in one order every reader sees.
    client.publish(topic, [b"created", b"paid"])

    # Write pointers come from the transaction service (Tephra's: ms since the epoch x 10^6 + n; a pointer
    # older than the 25 h transaction max lifetime is refused). Without one, write_pointer_now() makes one.
    refund, parts = write_pointer_now(), write_pointer_now()

    # Every publish returns where its messages are (result.message_ids); a transactional one also the
    # handle rollback takes (result.rollback; its bytes survive a restart).
    result = client.publish(topic, [b"refund"], tx_write_pointer=refund)
    client.rollback(topic, result)

    # Long transactions store payloads first (from many processes), then publish one pointer row.
    client.store(topic, [b"part-1", b"part-2"], tx_write_pointer=parts)
    client.publish(topic, [], tx_write_pointer=parts)

    # Without a transaction every message comes back, the rolled-back one too.
    messages = list(client.fetch(topic))
    print("all:", [m.payload for m in messages])

    # With one, rolled-back messages are skipped; an in-progress one would stop the fetch.
    reader = Transaction(
        read_pointer=parts,
        tx_id=write_pointer_now(),
        invalids=[],
        in_progress=[],
        first_short_in_progress=NO_TX_IN_PROGRESS,
    )
    print("committed:", [m.payload for m in client.fetch(topic, transaction=reader)])

    # Poll from the last id seen, or start from a publish time (a binary search, O(log n) reads).
    last = messages[1]
    print("after paid:", [m.payload for m in client.fetch(topic, start_message=last.id, inclusive=False)])
    print("since then:", len(list(client.fetch(topic, start_time_ms=last.publish_time))))

    # Fire-and-forget publishing: bounded queue, background batching, retries, a future each.
    with BackgroundPublisher(client, on_full="drop") as publisher:
        future = publisher.publish(topic, [b"async"])
    print("background stored:", future.result().message_ids[0].hex(), publisher.stats)

    # Consume with a durable mark: the subscription remembers where its consumer got to. A subscription
    # delivers committed messages only (the rolled-back refund is skipped; isolation="uncommitted" opts out).
    client.create_subscription(topic, "billing-svc")  # from the earliest message; or "latest", or a time (ms)
    consumed = []
    with client.consumer(topic, "billing-svc", max_wait_seconds=0.5) as consumer:  # one active consumer (a lease)
        for message in consumer:  # in order; waits up to max_wait_seconds for more, then the loop ends
            consumed.append(message.payload)
            consumer.commit()  # after a crash, the next consumer resumes right after this message
    print("consumed:", consumed)
    print("consumed == committed:", consumed == [m.payload for m in client.fetch(topic, transaction=reader)])
    print("behind by:", client.lag(topic, "billing-svc").messages, "messages")
