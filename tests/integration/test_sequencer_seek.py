"""The exact time seek of sequencer generations on the real HBase (docs/ordering.md, "Time seek"): a seek
for T starts at the first row, in order, holding messages dated >= T (Kafka's offsetsForTimes), whatever
the publish times around it, for fetch, subscriptions, reset and positions; skip markers are never the
answer; a hole below the answer that may still be written is waited on; and HBase itself filters the
rows, so the scan sends back only the row that matched."""

from __future__ import annotations

import threading
import time

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, generation_prefix, message_key, past_last, skip_marker
from tms_hbase.ordering import sequencer
from tms_hbase.ordering.lookup import dated_at_or_after

T = TopicId("seq", "seek")
CACHE = 1  # tail-cache seconds: W = 0.5 s, H = 1 s, D = W + C = 1.5 s, settled after 2W + 2C = 3 s
H = sequencer.hole_wait(CACHE)
AHEAD_MS = 20_000  # rows dated this far ahead stay young (unsettled) for 20 s + 3 s


@pytest.fixture
def seq(client: MessagingClient) -> MessagingClient:
    client.admin.set_tail_cache_seconds(CACHE)
    client.create_topic(T, {"ordering": "sequencer", "ttl": "86400"})
    return client


def put(client: MessagingClient, offset: int, cell: bytes) -> None:
    client.installation.messages.put(message_key(T, client.get_topic(T).generation, offset), {MESSAGE_COLUMN: cell})


def batch(client: MessagingClient, offset: int, publish_time: int, payload: bytes) -> None:
    put(client, offset, BatchRow(publish_time, b"w" * 16, offset, (payload,), span=1).encode())


def crafted(client: MessagingClient, base: int) -> int:
    """Rows whose times are out of order within D (1.5 s), as concurrent writers leave them; returns T.
    In order: a, b, a skip marker dated >= T, c (< T), d (>= T: the answer), e (< T), f."""
    at = base + 4000
    for offset, (dt, payload) in enumerate([(2000, b"a"), (3000, b"b")], start=1):
        batch(client, offset, base + dt, payload)
    put(client, 3, skip_marker(base + 4200, 1))
    for offset, (dt, payload) in enumerate([(3500, b"c"), (4100, b"d"), (3900, b"e"), (5000, b"f")], start=4):
        batch(client, offset, base + dt, payload)
    return at


def payloads(client: MessagingClient, **kwargs) -> list[bytes]:
    return [m.payload for m in client.fetch(T, **kwargs)]


def next_payloads(client: MessagingClient, name: str) -> list[bytes]:
    with client.consumer(T, name, max_wait_seconds=0.1) as consumer:
        got = [m.payload for m in consumer]
        consumer.commit()
        return got


def write_late(seq: MessagingClient, publish_time: int) -> threading.Thread:
    """A slow writer's batch ``late`` landing in the hole at offset 2 in 0.2 s (started; join it)."""
    row = BatchRow(publish_time, b"s" * 16, 1, (b"late",), span=1).encode()
    late = threading.Thread(
        target=lambda: (
            time.sleep(0.2),
            seq.installation.messages.put_if_absent(message_key(T, 1, 2), MESSAGE_COLUMN, row),
        )
    )
    late.start()
    return late


def test_fetch_subscriptions_reset_and_positions_start_at_the_first_row_dated_at_or_after_t(
    seq: MessagingClient,
) -> None:
    at = crafted(seq, int(time.time() * 1000) - 3_600_000)  # an hour ago: every hole long settled
    assert payloads(seq) == [b"a", b"b", b"c", b"d", b"e", b"f"]
    assert payloads(seq, start_time_ms=at) == [b"d", b"e", b"f"]  # e is dated < T: it comes after d, as in Kafka
    assert payloads(seq, start_time_ms=at - 1, inclusive=False) == [b"d", b"e", b"f"]
    assert payloads(seq, start_time_ms=at + 101) == [b"f"]
    assert payloads(seq, start_time_ms=at + 1001) == []  # after every row
    seq.create_subscription(T, "since", start=at)
    assert next_payloads(seq, "since") == [b"d", b"e", b"f"]
    seq.create_subscription(T, "svc")
    assert next_payloads(seq, "svc") == [b"a", b"b", b"c", b"d", b"e", b"f"]
    seq.reset_subscription(T, "svc", start_time_ms=at)
    assert next_payloads(seq, "svc") == [b"d", b"e", b"f"]
    span = seq.slices.positions(T, at, at + 1000)
    assert (span.first, span.last) == (5, 6)  # d and e: f, the first row dated >= the end, is not in it
    assert (seq.slices.positions(T, at).first, seq.slices.positions(T, at).last) == (5, 7)
    assert seq.slices.positions(T, at + 1001).first == 8  # past the last row


def test_a_hole_below_the_answer_that_nobody_writes_is_filled_and_passed(seq: MessagingClient) -> None:
    now = int(time.time() * 1000)
    batch(seq, 1, now - 60_000, b"old")
    began = time.monotonic()  # the hole is due H after HBase stored the row above it
    batch(seq, 3, now - 200, b"recent")  # offset 2: reserved, not written; recent, so it may still be
    assert payloads(seq, start_time_ms=now - 1000) == [b"recent"]  # the seek waited on the hole and filled it
    assert time.monotonic() - began >= H * 0.9  # (by the reader's reckoning of HBase's clock: a few ms off)
    assert seq.installation.messages.get_cell(message_key(T, 1, 2), MESSAGE_COLUMN) is not None


def test_a_hole_below_the_answer_written_in_time_with_a_later_date_is_the_answer(seq: MessagingClient) -> None:
    now = int(time.time() * 1000)
    batch(seq, 1, now - 60_000, b"old")
    batch(seq, 3, now - 900, b"before")  # dated < T, but after the hole
    batch(seq, 4, now - 200, b"recent")
    late = write_late(seq, now)
    got = payloads(seq, start_time_ms=now - 500)
    late.join()
    if seq.installation.messages.get_cell(message_key(T, 1, 2), MESSAGE_COLUMN) == skip_marker(now - 60_000, 1):
        pytest.fail("the hole was filled before the late writer came: the machine is too slow for this test")
    assert got == [b"late", b"before", b"recent"]  # the late batch is dated >= T: everything after it follows


def test_the_server_side_filter_sends_back_only_rows_holding_messages_dated_at_or_after_t(
    seq: MessagingClient,
) -> None:
    base = int(time.time() * 1000) - 3_600_000
    at = crafted(seq, base)
    batch(seq, 8, 0x2727_2727_2727, b"quotes")  # a time whose bytes are all quotes: escaped in the filter
    batch(seq, 9, (base + 4000) | 0x8080, b"high bytes")  # bytes >= 0x80: compared as bytes, not text
    prefix = generation_prefix(T, 1)
    found = seq.installation.messages.scan(
        prefix + bytes(8), past_last(prefix), columns=[MESSAGE_COLUMN], filter=dated_at_or_after(at)
    )
    times = {int.from_bytes(k[-8:], "big"): BatchRow.decode(v[MESSAGE_COLUMN]).publish_time for k, v in found}
    assert sorted(times) == [5, 7, 8, 9]  # d, f, quotes, high bytes; not the skip marker, nor rows dated before
    assert all(t >= at for t in times.values())
    exact = seq.installation.messages.scan(
        prefix + bytes(8), past_last(prefix), columns=[MESSAGE_COLUMN], filter=dated_at_or_after(0x2727_2727_2727)
    )
    assert [int.from_bytes(k[-8:], "big") for k, _ in exact] == [8]


def test_a_hole_below_a_skip_marker_at_the_tail_is_waited_on_whatever_the_markers_date(
    seq: MessagingClient,
) -> None:
    now = int(time.time() * 1000)
    batch(seq, 1, now - 60_000, b"old")
    put(seq, 3, skip_marker(0, 1))  # offset 2: reserved, not written; a marker's date is an older row's
    late = write_late(seq, now)
    got = payloads(seq, start_time_ms=now - 59_000)  # after every row there is: the seek reads the rows
    late.join()
    assert got == [b"late"]


def test_a_batch_landing_in_a_hole_above_the_frontier_is_the_answer_and_the_frontier_never_passes_a_hole(
    seq: MessagingClient,
) -> None:
    """Every row young (within the settle time): the seeks read the rows from the generation's frontier, move it
    up to where they stopped, and the next seek filters the rows below it once more instead of reading them.
    The rows are dated AHEAD of the clock (inside the 30 s skew bound a writer's clock may be off by), so they
    stay young for the whole test however loaded the machine is: a seek that finds its rows settled (3 s past
    their dates) trusts them without reading and rightly moves no frontier."""
    now = int(time.time() * 1000) + AHEAD_MS
    batch(seq, 1, now - 1000, b"a")
    batch(seq, 3, now - 900, b"b")  # offset 2: reserved, not written yet
    batch(seq, 4, now - 200, b"d")
    frontier = sequencer.frontier(seq.installation.messages, T, 1).offset
    assert frontier == 1  # nothing read yet
    late = write_late(seq, now)  # lands in offset 2, dated now
    got = payloads(seq, start_time_ms=now - 950)
    late.join()
    if seq.installation.messages.get_cell(message_key(T, 1, 2), MESSAGE_COLUMN) == skip_marker(now - 1000, 1):
        pytest.fail("the hole was filled before the late writer came: the machine is too slow for this test")
    assert got == [b"late", b"b", b"d"]  # the late batch (dated now >= T) comes first in order
    assert sequencer.frontier(seq.installation.messages, T, 1).offset == 3  # the read stopped at the late batch
    with MessagingClient(config=seq.config) as fresh:  # a new reader: the rows below the frontier are not read
        assert [m.payload for m in fresh.fetch(T, start_time_ms=now - 500)] == [b"late", b"b", b"d"]
        assert [m.payload for m in fresh.fetch(T, start_time_ms=now - 300)] == [b"late", b"b", b"d"]
        assert [m.payload for m in fresh.fetch(T, start_time_ms=now - 100)] == [b"late", b"b", b"d"]
        assert [m.payload for m in fresh.fetch(T, start_time_ms=now + 1)] == []
    assert (
        sequencer.frontier(seq.installation.messages, T, 1).offset == 5
    )  # every offset through the last row holds one
