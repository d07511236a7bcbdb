"""Rings that carry the row: after an acknowledged publish the ring also carries the row's stored cell (up to
RING_ROW_LIMIT bytes), MACed under the consumer's ring key, and a consumer that has read everything before
exactly that row delivers it from the datagram without reading HBase. On the real HBase, with publishers and
consumers in other processes: the same messages a read gives, each once and in order; a writer killed between
its put and its ring; forged rings; a hole; a row too big to ride; a ring that comes before the earlier rows
were read."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from tms_hbase import MessagingClient, TopicId
from tms_hbase.consume.consumer import Consumer
from tms_hbase.consume.doorbell import RING_ROW_LIMIT, TAG_BYTES, parse_address, ring_content, ring_local
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, message_key
from tms_hbase.ordering import sequencer

from .rings import payloads, reads_of, topic_of_each_ordering

ROOT = Path(__file__).resolve().parents[2]
T = TopicId("ringrows", "orders")


def rung(source: str) -> float:
    """How many rung rows consumers of this process delivered from ``source`` ("datagram" or "read")."""
    CLIENT_METRICS.rung_rows.labels(source)  # made, so the sample exists
    return REGISTRY.get_sample_value("tms_client_rung_rows_total", {"source": source}) or 0.0


def refused() -> float:
    CLIENT_METRICS.rings_refused  # noqa: B018 - made, so the sample exists
    return REGISTRY.get_sample_value("tms_client_doorbell_rings_refused_total") or 0.0


topic = topic_of_each_ordering(T)


def send(consumer: Consumer, datagram: bytes) -> None:
    """Send ``datagram`` to the consumer's doorbell, as any local process can."""
    target = parse_address(consumer._bell.address)
    assert target is not None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(datagram, target)


def test_a_rung_row_comes_from_the_datagram_as_a_read_gives_it(client: MessagingClient, topic: TopicId) -> None:
    sent = [[b"a"], [b"b", b"c"], [b"d"], [b"e" * 2000, b"f", b"g"]]
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer:
        client.publish(topic, sent[0])
        delivered = consumer.poll(timeout_seconds=30)  # a fetch: where the next row starts
        reads = reads_of(client, "get", "scan")
        from_datagram = rung("datagram")
        reservations = client._writer.sequencer.reservations
        released = reservations.released
        for batch in sent[1:]:
            client.publish(topic, batch)
            delivered += consumer.poll(timeout_seconds=30)
        # a sequencer writer's block too old to carve (its publishes more than W/2 apart on a loaded machine)
        # is released with a skip marker no ring carries: the row after it is read, as it must be
        skips = reservations.released - released
        assert rung("datagram") - from_datagram >= len(sent) - 1 - skips
        if not skips:
            assert reads() == 0, "a row that rode in its ring was read from HBase"
            assert rung("datagram") - from_datagram == len(sent) - 1
        assert consumer.poll(timeout_seconds=0) == []
    read = list(client.fetch(topic))
    assert [(m.id, m.payload, m.publish_time) for m in delivered] == [(m.id, m.payload, m.publish_time) for m in read]
    assert payloads(read) == [p for batch in sent for p in batch]


def test_a_row_bigger_than_the_limit_rings_without_it_and_is_read(client: MessagingClient, topic: TopicId) -> None:
    big = b"x" * (RING_ROW_LIMIT + 1)
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer:
        client.publish(topic, [b"a"])
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        by_read, from_datagram = rung("read"), rung("datagram")
        client.publish(topic, [big])
        assert payloads(consumer.poll(timeout_seconds=30)) == [big]
        assert (rung("read") - by_read, rung("datagram") - from_datagram) == (1, 0)
        client.publish(topic, [b"small again"])
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"small again"]
        assert rung("datagram") - from_datagram == 1


def test_forged_rings_deliver_nothing_that_is_not_stored(client: MessagingClient, topic: TopicId) -> None:
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer:
        first = client.publish(topic, [b"a"])
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        after = consumer._next_row
        assert after is not None
        forged = BatchRow(
            publish_time=client.hbase_clock.now_ms(), writer_id=b"f" * 16, batch_no=1, payloads=(b"forged",), span=1
        ).encode()
        place = (first.generation, after)
        refused_before = refused()
        wrong_mac = ring_content(topic, place, forged, os.urandom(16))  # valid framing, another key
        send(consumer, wrong_mac)
        assert consumer.poll(timeout_seconds=1) == []
        cut = ring_content(topic, place, forged, consumer._bell.key)[:-1]  # the right key, a byte short
        send(consumer, cut)
        assert consumer.poll(timeout_seconds=1) == []
        flipped = bytearray(ring_content(topic, place, forged, consumer._bell.key))
        flipped[-TAG_BYTES - 1] ^= 1  # a payload byte changed after the MAC was made
        send(consumer, bytes(flipped))
        assert consumer.poll(timeout_seconds=1) == []
        assert refused() - refused_before == 3
        real = client.publish(topic, [b"real"])
        assert real.position == after  # the place the forgeries named holds the real row now
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"real"]
        assert consumer.poll(timeout_seconds=0) == []
    assert payloads(client.fetch(topic)) == [b"a", b"real"]


def test_a_ring_for_a_row_after_a_hole_waits_for_the_hole(
    client: MessagingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hole's writer is slow, and the test is that writer: a reader passes a hole H (2 W, 1 s) after the row
    above it landed, which a loaded machine can spend before the test writes. H is an hour here, so the consumer
    is held at the hole until the test's late write, at any load."""
    monkeypatch.setattr(sequencer, "hole_wait", lambda _tail_cache_seconds: 3600.0)
    client.create_topic(T, {"ordering": "sequencer"})
    client.create_subscription(T, "svc")
    client.publish(T, [b"first"])
    slow = sequencer.reserve(client.installation.messages, T, 1, 1)  # a writer about to write there
    with client.consumer(T, "svc", poll_interval_seconds=60) as consumer:
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"first"]
        from_datagram = rung("datagram")
        client.publish(T, [b"third"])  # above the hole; its ring carries the row
        assert consumer.poll(timeout_seconds=0.5) == []
        late = BatchRow(
            publish_time=client.hbase_clock.now_ms(), writer_id=b"w" * 16, batch_no=1, payloads=(b"second",), span=1
        ).encode()
        assert client.installation.messages.put_if_absent(message_key(T, 1, slow), MESSAGE_COLUMN, late)
        ring_local(client.installation.prefix, T, (1, slow), late)  # as its publish rings once acknowledged
        got = payloads(consumer.poll(timeout_seconds=30))
        got += payloads(consumer.poll(timeout_seconds=30))
        assert got == [b"second", b"third"]
        assert rung("datagram") - from_datagram == 1  # the hole's row; the one above it was read
        assert consumer.poll(timeout_seconds=0) == []


def test_a_ring_before_the_earlier_rows_were_read_reads_them_first(client: MessagingClient, topic: TopicId) -> None:
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer:
        client.publish(topic, [b"a"])
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        client._writer.publish(topic, [b"b", b"c"])  # stored, not rung
        client.publish(topic, [b"d"])  # its ring carries a row that is not the next one
        got = payloads(consumer.poll(timeout_seconds=30))
        assert got == [b"b", b"c", b"d"]
        assert consumer.poll(timeout_seconds=0.3) == []
        consumer.commit()
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer:  # rings before its first read
        client.publish(topic, [b"e"])
        client.publish(topic, [b"f"])
        got = payloads(consumer.poll(timeout_seconds=30))
        while len(got) < 2:
            more = payloads(consumer.poll(timeout_seconds=5))
            assert more, f"only {got} came"
            got += more
        assert got == [b"e", b"f"]
        assert consumer.poll(timeout_seconds=0.3) == []


CONSUMER = """
import json, sys
from prometheus_client import REGISTRY
from tms_hbase import MessagingClient, TopicId
with MessagingClient(create_tables=False) as c:
    t = TopicId('ringrows', 'orders')
    got = []
    with c.consumer(t, 'svc', poll_interval_seconds=0.5) as con:
        print('ready', flush=True)
        while len(got) < int(sys.argv[1]):
            got += [[m.id.hex(), m.payload.decode(), m.publish_time] for m in con.poll(timeout_seconds=60)]
        datagram = REGISTRY.get_sample_value('tms_client_rung_rows_total', {'source': 'datagram'}) or 0
        print(json.dumps({'got': got, 'datagram': datagram}), flush=True)
"""

KILLED_PUBLISHER = """
import os, sys
from tms_hbase import MessagingClient, TopicId
from tms_hbase.consume.doorbell import Doorbells
Doorbells.ring = lambda *args: os._exit(17)  # killed after the put is acknowledged, before the ring
with MessagingClient(create_tables=False) as c:
    c.publish(TopicId('ringrows', 'orders'), [sys.argv[1].encode()])
"""


def test_a_consumer_in_another_process_gets_each_row_once_in_order_from_rings(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    count = 40
    proc = subprocess.Popen(
        [sys.executable, "-c", CONSUMER, str(count + 1)], cwd=ROOT, env=tms_env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        sent = []
        for i in range(count):
            if i == count // 2:  # a writer killed between its put and its ring: found by the consumer's poll
                killed = subprocess.run(
                    [sys.executable, "-c", KILLED_PUBLISHER, "killed"], cwd=ROOT, env=tms_env, timeout=120
                )
                assert killed.returncode == 17
                sent.append("killed")
            sent.append(f"m{i}")
            client.publish(topic, [sent[-1].encode()])
            time.sleep(0.05)
        out, _ = proc.communicate(timeout=180)
    finally:
        proc.kill()
        proc.wait()
    answer = json.loads(out.splitlines()[-1])
    read = [[m.id.hex(), m.payload.decode(), m.publish_time] for m in client.fetch(topic)]
    assert [p for _, p, _ in read] == sent
    assert answer["got"] == read  # each once, in order, with the ids and times a read gives
    assert answer["datagram"] >= count // 4, f"only {answer['datagram']} of {count} rows came from their rings"
