"""A row dated far in the future : later publishes are not pinned to its time, a time
seek still finds every message, and the sweeper expires it by when HBase stored it (tms_hbase/model/row_time.py)."""

from __future__ import annotations

import uuid

import happybase

from tms_hbase import MessageId, MessagingClient, TopicId
from tms_hbase.config import thrift_address
from tms_hbase.model.clock import now_ms
from tms_hbase.model.row_time import check_row_time
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, message_key, peek
from tms_hbase_sweeper.sweep import Sweeper

T = TopicId("ns", "clocks")
YEAR_MS = 365 * 24 * 3600 * 1000


def raw_table(address: str, table: str) -> tuple[happybase.Connection, happybase.Table]:
    host, port = thrift_address(address)
    conn = happybase.Connection(host, port)
    return conn, conn.table(table)


def test_a_future_dated_row_neither_pins_later_times_nor_lives_forever(
    client: MessagingClient, hbase_address: str
) -> None:
    client.admin.set_tail_cache_seconds(1)  # also the clock-skew bound: 1 s
    client.create_topic(T, {"ttl": "2", "ordering": "chain"})  # the chain follows its predecessor's time
    client.publish(T, [b"m1"])
    forged_time = now_ms() + 10 * YEAR_MS
    conn, table = raw_table(hbase_address, client.installation.messages.name)
    try:  # as a row written around the library, or by a host whose clock jumped, would arrive
        forged = BatchRow(forged_time, uuid.uuid4().bytes, 1, (b"forged",))
        table.put(message_key(T, 1, 2), {MESSAGE_COLUMN: forged.encode()})

        before = now_ms()
        client.publish(T, [b"m3"])  # loses position 2 to the forged row, reads its time, goes on at 3
        client.publish(T, [b"m4"])
        after = now_ms()
        messages = list(client.fetch(T))
        assert [m.payload for m in messages] == [b"m1", b"forged", b"m3", b"m4"]
        m1, _, m3, m4 = messages
        assert before <= m3.publish_time <= after + 1000  # at most the 1 s skew bound ahead, not 10 years
        assert m3.publish_time <= m4.publish_time <= after + 1000  # and later ones follow m3, not the forged row
        assert client.admin.future_predecessors == 1  # counted (and logged)

        # a time seek may start at the forged row (earlier than asked), never after a message it should return
        for start, first_wanted in ((m1.publish_time, b"m1"), (m3.publish_time, b"m3"), (m4.publish_time, b"m4")):
            got = [m.payload for m in client.fetch(T, start_time_ms=start)]
            assert first_wanted in got and got == [m.payload for m in messages][-len(got) :]

        # what inspection reports: the forged row is future-dated by its cell timestamp, the others are not
        rows = {MessageId.decode(m.id).position: m for m in messages}
        stored = {p: table.row(message_key(T, 1, p), include_timestamp=True)[MESSAGE_COLUMN] for p in rows}
        verdicts = {p: check_row_time(peek(value), ts, 1000).future_dated for p, (value, ts) in stored.items()}
        assert verdicts == {1: False, 2: True, 3: False, 4: False}
    finally:
        conn.close()

    # a sweep a minute from now: every row is past its TTL (2 s) and grace (4 s), the forged one counted
    # from when HBase stored it; only the newest row stays, without its payload
    report = Sweeper(client.installation, grace_seconds=4, clock=lambda: now_ms() + 60_000).sweep_once()
    assert (report.messages_dropped, report.messages_stripped, report.messages_future_dated) == (3, 1, 1)
    client.publish(T, [b"m5"])
    (m5,) = list(client.fetch(T))
    assert m5.payload == b"m5" and MessageId.decode(m5.id).position == 5
