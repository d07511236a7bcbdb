"""Runs of rings: several rings pending at once that name consecutive rows starting exactly at the consumer's
next row are delivered as one run from their datagrams, in order, without reading HBase; the run ends at the
first row no ring carried, at a row that does not fit the read's count, or at a hole, and what follows is read.
On the real HBase, with the publisher in another process, both orderings: every message once, in order, with
the ids and times a read gives; duplicated, reordered, foreign and forged datagrams change nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.consume.consumer import Consumer
from tms_hbase.consume.doorbell import ring_content, ring_local
from tms_hbase.model.message import Message
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, message_key
from tms_hbase.ordering import sequencer

from .rings import payloads, reads_of, topic_of_each_ordering
from .test_consumer_ring_rows import rung, send

ROOT = Path(__file__).resolve().parents[2]
T = TopicId("ringruns", "orders")
Batch = tuple[list[str], bool]  # payloads, and whether the publish rings

topic = topic_of_each_ordering(T)

PUBLISHER = """
import json, sys, time
from tms_hbase import MessagingClient, TopicId
topic, count = TopicId.parse(sys.argv[1]), int(sys.argv[2])
clients = [MessagingClient(create_tables=False) for _ in range(count)]
for c in clients:
    c.notify_consumers(topic)  # starts the refresh that reads the consumer's doorbell
deadline = time.monotonic() + 60
while not all(c._doorbells._addresses.get(topic) for c in clients):
    if time.monotonic() > deadline:
        sys.exit('the consumer doorbell was never read')
    time.sleep(0.01)
print('ready', flush=True)
for c in clients:  # each client a new writer that publishes once
    line = sys.stdin.readline()
    if not line:
        break
    batch, rung = json.loads(line)
    data = [p.encode() for p in batch]
    c.publish(topic, data) if rung else c._writer.publish(topic, data)  # stored, not rung
    print('done', flush=True)
for c in clients:
    c.close()
"""


@contextmanager
def publishers(topic: TopicId, env: dict[str, str], count: int) -> Iterator[Callable[[Sequence[Batch]], None]]:
    """``count`` publishers in another process (one process, so the test pays one interpreter start), each a
    client of its own knowing the consumer's doorbell; the function given publishes one batch with each in
    turn (rung after the acknowledged publish, or stored without a ring). Each publisher is a new writer that
    publishes once, so a sequencer topic gets each batch at exactly the offsets after the one before it (a busy
    writer's block could leave a skip marker that no ring names)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", PUBLISHER, str(topic), str(count)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def publish(batches: Sequence[Batch]) -> None:
        for batch in batches:
            stdin.write(json.dumps(batch) + "\n")
            stdin.flush()
            assert stdout.readline().strip() == "done"

    try:
        assert stdout.readline().strip() == "ready"
        yield publish
        stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()


def until(consumer: Consumer, count: int) -> list[Message]:
    """Poll until ``count`` messages came (each poll up to 30 s)."""
    got: list[Message] = []
    while len(got) < count:
        more = consumer.poll(timeout_seconds=30)
        assert more, f"only {payloads(got)} came"
        got += more
    return got


def as_read(client: MessagingClient, topic: TopicId, delivered: list[Message]) -> None:
    """``delivered`` (after the first message) is the topic as a read gives it: each once, in order, same ids
    and publish times."""
    read = list(client.fetch(topic))[1:]
    assert [(m.id, m.payload, m.publish_time) for m in delivered] == [(m.id, m.payload, m.publish_time) for m in read]


def test_a_burst_of_rings_is_delivered_as_one_run_without_a_read(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    burst = [["b"], ["c", "d"], ["e"], ["f" * 2000, "g", "h"], ["i"]]
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer:
        client.publish(topic, [b"a"])
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]  # a fetch: where the next row starts
        with publishers(topic, tms_env, len(burst)) as publish:
            reads, from_datagram = reads_of(client, "get", "scan"), rung("datagram")
            publish([(batch, True) for batch in burst])
        first = consumer.poll(timeout_seconds=30)
        delivered = first + until(consumer, 8 - len(first))
        assert reads() == 0, "a run of rows that rode in their rings was read from HBase"
        assert len(first) > 1, "the rings pending at the poll were not delivered as one run"
        assert rung("datagram") - from_datagram == len(burst)
        assert consumer.poll(timeout_seconds=0.3) == []
    assert payloads(delivered) == [p.encode() for batch in burst for p in batch]
    as_read(client, topic, delivered)


def test_a_run_ends_at_a_row_no_ring_carried_and_the_rows_after_it_are_read(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    batches = [(["b"], True), (["c", "d"], False), (["e"], True), (["f", "g"], True)]
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer:
        client.publish(topic, [b"a"])
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        with publishers(topic, tms_env, len(batches)) as publish:
            reads, from_datagram = reads_of(client, "get", "scan"), rung("datagram")
            publish(batches)
        delivered = until(consumer, 6)
        assert reads() >= 1, "the rows after the gap were not read"
        assert rung("datagram") - from_datagram <= 1, "a row after the gap came from its ring"
        assert consumer.poll(timeout_seconds=0.3) == []
    assert payloads(delivered) == [b"b", b"c", b"d", b"e", b"f", b"g"]
    as_read(client, topic, delivered)


def test_a_run_larger_than_the_reads_count_delivers_what_fits_and_reads_the_rest(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    burst = [["b", "c"], ["d", "e"], ["f", "g"], ["h"]]
    with client.consumer(topic, "svc", poll_interval_seconds=60, batch=4) as consumer:
        client.publish(topic, [b"a"])
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        with publishers(topic, tms_env, len(burst)) as publish:
            reads, from_datagram = reads_of(client, "get", "scan"), rung("datagram")
            publish([(batch, True) for batch in burst])
        first = consumer.poll(max_messages=3, timeout_seconds=30)
        assert len(first) <= 3
        delivered = first + until(consumer, 7 - len(first))
        assert rung("datagram") - from_datagram <= 2, "more rows came from rings than fit the read's count"
        assert reads() >= 1, "the rows that did not fit were not read"
        assert consumer.poll(timeout_seconds=0.3) == []
    assert payloads(delivered) == [b"b", b"c", b"d", b"e", b"f", b"g", b"h"]
    as_read(client, topic, delivered)


def test_duplicated_reordered_foreign_and_forged_rings_deliver_each_row_once_in_order(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer:
        client.publish(topic, [b"a"])
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        with publishers(topic, tms_env, 4) as publish:
            publish([([p], False) for p in ("b", "c", "d", "e")])  # stored, not rung: the test rings them
        places = [MessageId.decode(m.id) for m in list(client.fetch(topic))[1:]]
        cells = [
            client.installation.messages.get(message_key(topic, p.generation, p.position), [MESSAGE_COLUMN])[
                MESSAGE_COLUMN
            ]
            for p in places
        ]
        key = consumer._bell.key
        rings = [ring_content(topic, (p.generation, p.position), c, key) for p, c in zip(places, cells, strict=True)]
        generation, position = places[1].generation, places[1].position
        forged_row = BatchRow(
            publish_time=client.hbase_clock.now_ms(), writer_id=b"f" * 16, batch_no=1, payloads=(b"forged",), span=1
        ).encode()
        foreign = ring_content(topic, (generation + 1, position), cells[1], key)
        forged = ring_content(topic, (generation, position), forged_row, os.urandom(16))
        cut = rings[2][:-1]
        reads, from_datagram = reads_of(client, "get", "scan"), rung("datagram")
        for datagram in (forged, rings[2], foreign, rings[0], cut, rings[2], rings[1], rings[0], rings[3]):
            send(consumer, datagram)
        delivered = until(consumer, 4)
        assert reads() == 0, "rows whose rings came out of order and twice were read from HBase"
        assert rung("datagram") - from_datagram == 4
        assert consumer.poll(timeout_seconds=0.3) == []
    assert payloads(delivered) == [b"b", b"c", b"d", b"e"]
    as_read(client, topic, delivered)


def test_a_run_stops_at_a_hole_and_the_rows_above_it_wait_for_it(
    client: MessagingClient, tms_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hole's writer is slow, and the test is that writer: a reader passes a hole H (2 W, 1 s) after
    the row above it landed, so on a loaded machine the consumer could pass it before the test writes.
    H is made an hour here, so the consumer is held at the hole until the test's late write, at any load."""
    monkeypatch.setattr(sequencer, "hole_wait", lambda _tail_cache_seconds: 3600.0)
    client.create_topic(T, {"ordering": "sequencer"})
    client.create_subscription(T, "svc")
    with client.consumer(T, "svc", poll_interval_seconds=60) as consumer, publishers(T, tms_env, 3) as publish:
        client.publish(T, [b"a"])
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        publish([(["b"], True)])
        slow = sequencer.reserve(client.installation.messages, T, 1, 1)  # a writer about to write there
        publish([(["d"], True), (["e"], True)])  # above the hole, rung
        got = payloads(consumer.poll(timeout_seconds=30))
        assert got == [b"b"]
        assert consumer.poll(timeout_seconds=0.5) == []  # not past the hole while its writer may still write
        late = BatchRow(
            publish_time=client.hbase_clock.now_ms(), writer_id=b"w" * 16, batch_no=1, payloads=(b"c",), span=1
        ).encode()
        assert client.installation.messages.put_if_absent(message_key(T, 1, slow), MESSAGE_COLUMN, late)
        ring_local(client.installation.prefix, T, (1, slow), late)  # as its publish rings once acknowledged
        delivered = until(consumer, 3)
        assert consumer.poll(timeout_seconds=0.3) == []
    assert payloads(delivered) == [b"c", b"d", b"e"]
    assert payloads(client.fetch(T)) == [b"a", b"b", b"c", b"d", b"e"]
