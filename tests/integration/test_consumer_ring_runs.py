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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tms_hbase import MessagingClient, TopicId
from tms_hbase.consume.consumer import Consumer
from tms_hbase.consume.doorbell import ring_content, ring_local
from tms_hbase.fetch.reader import Message
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, message_key
from tms_hbase.publish import sequencer

from .rings import payloads, reads_of, topic_of_each_ordering
from .test_consumer_ring_rows import rung, send

ROOT = Path(__file__).resolve().parents[2]
T = TopicId("ringruns", "orders")

topic = topic_of_each_ordering(T)

PUBLISHER = """
import json, sys, time
from tms_hbase import MessagingClient, TopicId
topic = TopicId.parse(sys.argv[1])
with MessagingClient(create_tables=False) as c:
    c.publish(topic, [b'a'])
    deadline = time.monotonic() + 60
    while not c._doorbells._addresses.get(topic):  # the consumer's doorbell, as the refresh thread read it
        if time.monotonic() > deadline:
            sys.exit('the consumer doorbell was never read')
        time.sleep(0.01)
    print('ready', flush=True)
    for line in sys.stdin:
        for batch, rung in json.loads(line):
            data = [p.encode() for p in batch]
            c.publish(topic, data) if rung else c._writer.publish(topic, data)  # stored, not rung
        print('done', flush=True)
"""


class Publisher:
    """A publisher in another process: it publishes ``a`` first, then each burst it is given, ringing the
    consumer's doorbell after each acknowledged publish (or storing a batch without ringing)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def publish(self, batches: Sequence[tuple[list[str], bool]]) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(batches) + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "done"


@contextmanager
def publisher(topic: TopicId, env: dict[str, str]) -> Iterator[Publisher]:
    proc = subprocess.Popen(
        [sys.executable, "-c", PUBLISHER, str(topic)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield Publisher(proc)
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
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer, publisher(topic, tms_env) as pub:
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]  # a fetch: where the next row starts
        reads, from_datagram = reads_of(client, "get", "scan"), rung("datagram")
        pub.publish([(batch, True) for batch in burst])
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
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer, publisher(topic, tms_env) as pub:
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        reads, from_datagram = reads_of(client, "get", "scan"), rung("datagram")
        pub.publish(batches)
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
    with client.consumer(topic, "svc", poll_interval_seconds=60, batch=4) as consumer, publisher(topic, tms_env) as pub:
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        reads, from_datagram = reads_of(client, "get", "scan"), rung("datagram")
        pub.publish([(batch, True) for batch in burst])
        first = consumer.poll(max_messages=3, timeout_seconds=30)
        assert len(first) <= 3
        delivered = first + until(consumer, 7 - len(first))
        assert rung("datagram") - from_datagram <= 2, "more rows came from rings than fit the read's count"
        assert reads() >= 1, "the rows that did not fit were not read"
        assert consumer.poll(timeout_seconds=0.3) == []
    assert payloads(delivered) == [b"b", b"c", b"d", b"e", b"f", b"g", b"h"]
    as_read(client, topic, delivered)


def test_duplicated_reordered_foreign_and_forged_rings_deliver_each_row_once_in_order(
    client: MessagingClient, topic: TopicId
) -> None:
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer:
        client.publish(topic, [b"a"])
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        written = [client._writer.publish(topic, [p]) for p in (b"b", b"c", b"d", b"e")]  # stored, not rung
        rings = [
            ring_content(topic, (w.result.generation, w.result.position), w.cell, consumer._bell.key) for w in written
        ]
        generation, position = written[1].result.generation, written[1].result.position
        forged_row = BatchRow(
            publish_time=client.hbase_clock.now_ms(), writer_id=b"f" * 16, batch_no=1, payloads=(b"forged",), span=1
        ).encode()
        foreign = ring_content(topic, (generation + 1, position), written[1].cell, consumer._bell.key)
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
    client: MessagingClient, tms_env: dict[str, str]
) -> None:
    client.create_topic(T, {"ordering": "sequencer"})
    client.create_subscription(T, "svc")
    with client.consumer(T, "svc", poll_interval_seconds=60) as consumer, publisher(T, tms_env) as pub:
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        pub.publish([(["b"], True)])
        slow = sequencer.reserve(client.installation.messages, T, 1, 1)  # a writer about to write there
        pub.publish([(["d"], True), (["e"], True)])  # above the hole, rung
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
