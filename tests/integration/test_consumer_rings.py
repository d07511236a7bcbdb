"""A ring that names the row its publish wrote: a consumer that has read everything before exactly that
row reads it with one get instead of a scan. On the real HBase, with rings from this process and from
publishers and consumers in other processes, rings that come before and during a wait, a slow and a dead
writer's hole, an expired row and rings that name no row there: every acknowledged message comes out once,
in order, and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.consume.doorbell import ring_local
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, message_key
from tms_hbase.ordering import sequencer

from .rings import payloads, reads_of, topic_of_each_ordering

ROOT = Path(__file__).resolve().parents[2]
T = TopicId("rings", "orders")
H = sequencer.hole_wait(1)  # the writers' tail-cache time is 1 s while the installation has no setting


topic = topic_of_each_ordering(T)


def test_each_rung_row_comes_out_once_in_order_read_with_a_get(client: MessagingClient, topic: TopicId) -> None:
    sent = [[b"a"], [b"b", b"c"], [b"d"], [b"e", b"f", b"g"], [b"h"]]
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer:
        client.publish(topic, sent[0])
        assert payloads(consumer.poll(timeout_seconds=30)) == sent[0]  # a fetch: where the next row starts
        scans = reads_of(client, "scan")
        got = []
        for i, batch in enumerate(sent[1:]):
            if i % 2:  # rung during the wait
                threading.Timer(0.2, client.publish, (topic, batch)).start()
            else:  # rung before the poll
                client.publish(topic, batch)
            got.append(payloads(consumer.poll(timeout_seconds=30)))
        assert got == sent[1:]
        assert scans() == 0, "a ring naming the next row was read with a scan"
        assert consumer.poll(timeout_seconds=0) == []
    assert payloads(client.fetch(topic)) == [p for batch in sent for p in batch]


def test_a_ring_that_names_no_plain_row_where_the_next_starts_changes_nothing(
    client: MessagingClient, topic: TopicId
) -> None:
    first = client.publish(topic, [b"a"])
    prefix = client.installation.prefix
    with client.consumer(topic, "svc", poll_interval_seconds=60) as consumer:
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"a"]
        after = first.position + 1
        ring_local(prefix, topic, (first.generation, after))  # no row there (yet)
        assert consumer.poll(timeout_seconds=0.5) == []
        ring_local(prefix, topic, (first.generation + 1, after))  # another generation
        assert consumer.poll(timeout_seconds=0.5) == []
        old = client.publish(topic, [b"old"], ttl_seconds=1)  # rings: left unread until it expired
        deadline = time.monotonic() + 60
        while list(client.fetch(topic, start_message=first.message_ids[-1], inclusive=False)):
            assert time.monotonic() < deadline, "the message with a 1 s TTL never expired"
            time.sleep(0.2)
        assert old.position == after
        assert consumer.poll(timeout_seconds=0.5) == []  # the ring names an expired row
        client.publish(topic, [b"new"])
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"new"]


def _slow_writers_hole(client: MessagingClient) -> tuple[int, TopicId]:
    client.create_topic(T, {"ordering": "sequencer"})
    client.create_subscription(T, "svc")
    client.publish(T, [b"first"])
    return sequencer.reserve(client.installation.messages, T, 1, 1), T  # a writer about to write there


def test_a_slow_writers_row_rung_into_its_hole_comes_before_the_row_above_it(
    client: MessagingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test is the slow writer: H (1 s here) is made an hour, so that the consumer is held at the hole until
    the test's late write however long a loaded machine takes to get there."""
    monkeypatch.setattr(sequencer, "hole_wait", lambda _tail_cache_seconds: 3600.0)
    slow, topic = _slow_writers_hole(client)
    with client.consumer(topic, "svc", poll_interval_seconds=3600) as consumer:
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"first"]
        client.publish(topic, [b"third"])  # above the hole, and rung: not the next row
        assert consumer.poll(timeout_seconds=0.5) == []  # not past the hole while its writer may still write
        late = BatchRow(
            publish_time=client.hbase_clock.now_ms(), writer_id=b"w" * 16, batch_no=1, payloads=(b"second",), span=1
        )
        assert client.installation.messages.put_if_absent(message_key(topic, 1, slow), MESSAGE_COLUMN, late.encode())
        ring_local(client.installation.prefix, topic, (1, slow))  # as its publish rings once acknowledged
        got = payloads(consumer.poll(timeout_seconds=30))
        # an earlier ring named the row above: no wait for another (the slow poll, an hour, would come after the
        # poll's timeout, so a forgotten ring leaves it out)
        got += payloads(consumer.poll(timeout_seconds=30))
        assert got == [b"second", b"third"], "the row above was left out: its ring, read before, was forgotten"
        assert consumer.poll(timeout_seconds=0) == []


def test_a_dead_writers_hole_holds_the_rung_row_above_it_until_it_is_filled(client: MessagingClient) -> None:
    _slow, topic = _slow_writers_hole(client)
    with client.consumer(topic, "svc", poll_interval_seconds=0.2) as consumer:
        assert payloads(consumer.poll(timeout_seconds=30)) == [b"first"]
        acked = time.monotonic()
        deadline = acked + H + 120
        client.publish(topic, [b"third"])
        got: list[bytes] = []
        while not got:
            assert time.monotonic() < deadline, "the dead writer's hole was never passed"
            got = payloads(consumer.poll(timeout_seconds=1))
            if not got:
                continue
            assert time.monotonic() - acked >= H * 0.5, "the row above the hole came before the hole was due"
        assert got == [b"third"]
        assert consumer.poll(timeout_seconds=0.3) == []


def test_a_consumer_in_another_process_gets_each_rung_row_once_in_order(
    client: MessagingClient, topic: TopicId, tms_env: dict[str, str]
) -> None:
    count = 40
    script = (
        "import json, sys\n"
        "from tms_hbase import MessagingClient, TopicId\n"
        "with MessagingClient(create_tables=False) as c:\n"
        "    t = TopicId('rings', 'orders')\n"
        "    scans = [0]\n"
        "    table = c._reader.messages\n"
        "    scan = table.scan\n"
        "    def counted(*a, **k):\n"
        "        scans[0] += 1\n"
        "        return scan(*a, **k)\n"
        "    table.scan = counted\n"
        "    got = []\n"
        "    with c.consumer(t, 'svc', poll_interval_seconds=60) as con:\n"
        "        print('ready', flush=True)\n"
        f"        while len(got) < {count}:\n"
        "            got += [m.payload.decode() for m in con.poll(timeout_seconds=60)]\n"
        "        print(json.dumps({'got': got, 'scans': scans[0]}), flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=tms_env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        sent = []
        for i in range(count):
            sent.append(f"m{i}")
            client.publish(topic, [sent[-1].encode()])
            time.sleep(0.05)
        out, _ = proc.communicate(timeout=180)
    finally:
        proc.kill()
        proc.wait()
    answer = json.loads(out.splitlines()[-1])
    assert answer["got"] == sent
    assert answer["scans"] < count // 2, f"{answer['scans']} scans for {count} rung rows: the rings were not read"
