"""Keys and headers on the real HBase: a message's key and headers survive every read path byte for byte (fetch,
stored payloads of a transaction, exclusive and shared consumers, the asyncio client, another process), rows
written before keys existed still read, and bad keys or headers are refused with nothing stored."""

from __future__ import annotations

import asyncio
import json
import struct
import subprocess
import sys
import time

import pytest

from tms_hbase import DeadLetter, InvalidArgument, MessagingClient, Record, TopicId
from tms_hbase.model.rows import MESSAGE_COLUMN, message_key
from tms_hbase.tx import write_pointer_now

from ..aio_client import async_client

T = TopicId("keys", "orders")
HEADERS = [("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), ("x", b"\x00\xff"), ("x", b"")]
BATCH = [
    b"plain",
    Record(b"body", key=b"order-7", headers=HEADERS),
    Record(b"", key=b""),  # an empty key is a key, not none
    Record(b"no key", headers=[("content-type", b"text/plain")]),
    Record(b"bare record"),  # neither: a plain message
]
EXPECTED = [
    (b"plain", None, ()),
    (b"body", b"order-7", tuple(HEADERS)),
    (b"", b"", ()),
    (b"no key", None, (("content-type", b"text/plain"),)),
    (b"bare record", None, ()),
]


def seen(messages: list) -> list[tuple[bytes, bytes | None, tuple]]:
    return [(m.payload, m.key, m.headers) for m in messages]


@pytest.mark.parametrize("ordering", ["chain", "sequencer"])
def test_keys_and_headers_survive_fetch_consumers_and_stats(client: MessagingClient, ordering: str) -> None:
    client.create_topic(T, {"ordering": ordering})
    client.create_subscription(T, "svc")
    client.create_subscription(T, "work", shared=True)
    client.publish(T, BATCH)
    assert seen(list(client.fetch(T))) == EXPECTED
    with client.consumer(T, "svc", max_wait_seconds=0.2) as consumer:
        assert seen(consumer.poll(max_messages=10, timeout_seconds=30)) == EXPECTED
    got: list = []
    with client.shared_consumer(T, "work") as shared:
        for _ in range(100):
            got += shared.receive(10, 1.0)
            if len(got) >= len(EXPECTED):
                break
        shared.ack(*got)
    assert sorted(seen(got), key=EXPECTED.index) == EXPECTED
    stats = client.topic_stats(T)
    extras = [4 + 7 + 2 + sum(6 + len(n) + len(v) for n, v in HEADERS), 4 + 0 + 2, 4 + 2 + 6 + 12 + 10]
    if stats.bytes_exact:  # what counts: payloads plus the stored key and headers of messages that have any
        assert stats.bytes == sum(len(p) for p, _, _ in EXPECTED) + sum(extras)


def test_stored_payloads_keep_keys_and_headers_until_published(client: MessagingClient) -> None:
    client.create_topic(T)
    pointer = write_pointer_now()
    client.store(T, BATCH[:3], tx_write_pointer=pointer)
    client.store(T, BATCH[3:], tx_write_pointer=pointer)
    assert list(client.fetch(T)) == []
    client.publish(T, [], tx_write_pointer=pointer)
    assert seen(list(client.fetch(T))) == EXPECTED
    assert client.topic_stats(T).messages == len(EXPECTED)


def test_another_process_reads_what_this_one_wrote(client: MessagingClient, hbase_address: str, prefix: str) -> None:
    client.create_topic(T)
    client.publish(T, BATCH)
    script = (
        "import json, sys\n"
        "from tms_hbase import MessagingClient\n"
        "with MessagingClient(sys.argv[1], sys.argv[2]) as c:\n"
        "    print(json.dumps([[m.payload.hex(), None if m.key is None else m.key.hex(),"
        " [[n, v.hex()] for n, v in m.headers]] for m in c.fetch('keys:orders')]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, hbase_address, prefix], capture_output=True, text=True, timeout=120, check=True
    )
    read = [
        (bytes.fromhex(p), None if k is None else bytes.fromhex(k), tuple((n, bytes.fromhex(v)) for n, v in h))
        for p, k, h in json.loads(out.stdout)
    ]
    assert read == EXPECTED


def test_the_asyncio_client_publishes_and_reads_keys_and_headers(hbase_address: str, prefix: str) -> None:
    async def scenario() -> tuple[list, list]:
        async with async_client(hbase_address, prefix) as client:
            await client.create_topic(T)
            await client.create_subscription(T, "svc")
            await client.publish(T, BATCH)
            fetched = [m async for m in client.fetch(T)]
            async with client.consumer(T, "svc", max_wait_seconds=0.2) as consumer:
                polled = await consumer.poll(max_messages=10, timeout_seconds=30)
            return fetched, polled

    fetched, polled = asyncio.run(scenario())
    assert seen(fetched) == EXPECTED
    assert seen(polled) == EXPECTED


def test_a_row_written_before_keys_existed_still_reads(client: MessagingClient) -> None:
    client.create_topic(T, {"ordering": "chain"})
    client.publish(T, [Record(b"new", key=b"k")])
    first = next(iter(client.fetch(T)))
    generation = client.get_topic(T).generation
    # the format-1 row as writers before keys wrote it: header, then count and (length, payload)*
    old = struct.pack(">BBq16sq", 1, 0, first.publish_time, bytes(16), 1) + struct.pack(">I", 2)
    old += struct.pack(">I", 3) + b"old" + struct.pack(">I", 4) + b"rows"
    client.installation.messages.put_if_absent(message_key(T, generation, 2), MESSAGE_COLUMN, old)
    assert seen(list(client.fetch(T))) == [(b"new", b"k", ()), (b"old", None, ()), (b"rows", None, ())]


def test_a_batch_of_plain_payloads_is_stored_as_before(client: MessagingClient) -> None:
    client.create_topic(T, {"ordering": "chain"})
    client.publish(T, [b"a", Record(b"bc")])  # a record with neither key nor headers is a plain payload
    generation = client.get_topic(T).generation
    cell = client.installation.messages.get_cell(message_key(T, generation, 1), MESSAGE_COLUMN)
    assert cell is not None
    flags = cell[1]
    assert flags == 8  # running totals only: no key-and-headers flag (64)
    assert cell.endswith(struct.pack(">I", 2) + struct.pack(">I", 1) + b"a" + struct.pack(">I", 2) + b"bc")


@pytest.mark.parametrize(
    "bad",
    [
        Record(b"x", key="text"),  # type: ignore[arg-type]
        Record(b"x", key=b"k" * 4097),
        Record(b"x", headers=[(b"name", b"v")]),  # type: ignore[list-item]
        Record(b"x", headers=[("", b"v")]),
        Record(b"x", headers=[("n" * 257, b"v")]),
        Record(b"x", headers=[("n", "text")]),  # type: ignore[list-item]
        Record(b"x", headers=[("n", b"v", b"w")]),  # type: ignore[list-item]
        Record(b"x", headers={"n": b"v"}),  # type: ignore[arg-type]
        Record(b"x", headers=[("n", b"v")] * 65),
        Record(b"x", headers=[("a", b"v" * 40_000), ("b", b"v" * 40_000)]),
        Record("text"),  # type: ignore[arg-type]
    ],
)
def test_bad_keys_and_headers_are_refused_and_store_nothing(client: MessagingClient, bad: Record) -> None:
    client.create_topic(T)
    with pytest.raises(InvalidArgument):
        client.publish(T, [b"good", bad])
    with pytest.raises(InvalidArgument):
        client.store(T, [b"good", bad], tx_write_pointer=write_pointer_now())
    assert list(client.fetch(T)) == []
    assert client.topic_stats(T).messages == 0


def test_a_dead_letter_keeps_the_message_and_carries_its_origin_in_headers(client: MessagingClient) -> None:
    dead = TopicId("keys", "dead")
    client.create_topic(T)
    client.create_topic(dead)
    client.create_subscription(T, "work", shared=True, ack_timeout_seconds=30, max_deliveries=1, dead_letter=dead)
    client.publish(T, [Record(b"poison", key=b"order-7", headers=HEADERS)])
    with client.shared_consumer(T, "work") as consumer:
        (delivery,) = consumer.receive(1, 30)
        consumer.nack(delivery)
        deadline = time.monotonic() + 60
        while not list(client.fetch(dead)):  # the next receive's reap dead-letters it
            assert consumer.receive(1, 0.2) == []
            assert time.monotonic() < deadline, "not dead-lettered"
    (message,) = client.fetch(dead)
    assert (message.payload, message.key, message.headers[: len(HEADERS)]) == (b"poison", b"order-7", tuple(HEADERS))
    origin = dict(message.headers[len(HEADERS) :])
    assert origin == {
        "tms-dead-letter-topic": b"keys:orders",
        "tms-dead-letter-subscription": b"work",
        "tms-dead-letter-id": delivery.id.hex().encode(),
        "tms-dead-letter-deliveries": b"1",
        "tms-dead-letter-publish-time": str(delivery.publish_time).encode(),
        "tms-dead-letter-reason": b"max deliveries",
    }
    letter = DeadLetter.of(message)
    assert (letter.topic, letter.message_id, letter.deliveries, letter.reason) == (T, delivery.id, 1, "max deliveries")
    (replayed,) = client.admin.dead_letters(T, "work", replay=True).letters
    assert replayed == letter
    again = list(client.fetch(T))[-1]
    assert (again.payload, again.key, again.headers) == (b"poison", b"order-7", tuple(HEADERS))


def test_a_dead_letter_written_before_headers_still_reads_and_replays(client: MessagingClient) -> None:
    dead = TopicId("keys", "dead")
    client.create_topic(T)
    client.create_topic(dead)
    client.create_subscription(T, "work", shared=True, dead_letter=dead)
    head = b'{"deliveries":3,"id":"00","publish_time":5,"subscription":"work","topic":"keys:orders"}'
    client.publish(dead, [b"TMSDL1\n" + head + b"\nold payload"])
    (letter,) = client.admin.dead_letters(T, "work", replay=True).letters
    assert (letter.topic, letter.deliveries, letter.payload, letter.key) == (T, 3, b"old payload", None)
    assert [(m.payload, m.key, m.headers) for m in client.fetch(T)] == [(b"old payload", None, ())]
