"""Slices of a topic for parallel readers (positions, fetch_range, batches, stored_sequences) on the real HBase."""

from __future__ import annotations

import pytest

from tms_hbase import InvalidArgument, MessageId, MessagingClient, TopicId
from tms_hbase.fetch.reader import PAYLOAD_CHUNK
from tms_hbase.tx import write_pointer_now

T = TopicId("slices", "t")
# These tests name rows by their dense chain positions 1..6 (one per batch row), so their topics are
# chains. Slices of sequencer topics (positions are first message offsets) are tested in test_spark.py
# (both orderings) and in tests/unit/test_sequencer.py (a range cut inside a row's span).
CHAIN = {"ordering": "chain"}
WRITE_POINTER = write_pointer_now()


def fill(client: MessagingClient) -> list:
    """Into an empty topic: rows 1..3 inline (3 payloads each), row 4 a pointer row of 5 stored payloads,
    row 5 inline, row 6 a transactional row that is then rolled back."""
    for r in range(3):
        client.publish(T, [b"r%d-%d" % (r, i) for i in range(3)])
    client.store(T, [b"s%d" % i for i in range(5)], WRITE_POINTER, sequence=2**40)
    client.publish(T, [], tx_write_pointer=WRITE_POINTER)
    client.publish(T, [b"after"])
    handle = client.publish(T, [b"rolled back"], tx_write_pointer=WRITE_POINTER + 1)
    client.rollback(T, handle)
    return list(client.fetch(T))


def test_positions_cover_the_generation_and_time_ranges(client: MessagingClient) -> None:
    client.create_topic(T, CHAIN)
    assert len(client.slices.positions(T)) == 0 and client.slices.positions(T).first == 1
    every = fill(client)
    whole = client.slices.positions(T)
    assert (whole.generation, whole.first, whole.last) == (1, 1, 6)
    times = [m.publish_time for m in every]
    ranged = client.slices.positions(T, start_time_ms=times[3], end_time_ms=times[-1] + 1)
    # The first row with a message at or after times[3]: row 2's, or row 1's when both share that ms.
    first = min(MessageId.decode(m.id).position for m in every if m.publish_time >= times[3])
    assert ranged.first == first and ranged.last == 6
    assert len(client.slices.positions(T, start_time_ms=times[-1] + 1)) == 0
    with pytest.raises(InvalidArgument, match="start_time"):
        client.slices.positions(T, start_time_ms=-1)


def test_fetch_range_equals_the_same_slice_of_a_fetch(client: MessagingClient) -> None:
    client.create_topic(T, CHAIN)
    every = fill(client)
    ids = [m.id for m in every]
    for a, b in [(0, len(ids)), (1, 4), (4, 11), (9, 12), (10, 10), (2, 15)]:
        end = ids[b] if b < len(ids) else None
        got = [m.id for m in client.slices.fetch_range(T, ids[a], end)]
        assert got == ids[a:b], (a, b)
    pointer_row = [MessageId.decode(i) for i in ids if MessageId.decode(i).position == 4]
    assert [i.index for i in pointer_row] == [2**40 + i for i in range(5)]
    split = MessageId(1, 4, 2**40 + 2)  # a slice that ends inside the pointer row
    assert [m.payload for m in client.slices.fetch_range(T, MessageId(1, 3, 0), split)] == [
        b"r2-0",
        b"r2-1",
        b"r2-2",
        b"s0",
        b"s1",
    ]
    assert [m.payload for m in client.slices.fetch_range(T, split, MessageId(1, 5, 0))] == [b"s2", b"s3", b"s4"]
    with pytest.raises(InvalidArgument, match="generation 2"):
        client.slices.fetch_range(T, MessageId(2, 1, 0))
    with pytest.raises(InvalidArgument, match="corrupt message id"):
        client.slices.fetch_range(T, b"nope")


def test_fetch_range_ending_a_whole_number_of_chunks_into_a_pointer_row_excludes_its_end(
    client: MessagingClient,
) -> None:
    """Stored payloads are read in chunks of PAYLOAD_CHUNK rows; when the end falls exactly where the
    next chunk would begin, that chunk's scan must not run (HBase reads a scan from a key to the same
    key as a get of that row, which returned the end message as one more)."""
    client.create_topic(T)
    client.publish(T, [b"inline"])
    chunk = PAYLOAD_CHUNK
    client.store(T, [b"a%d" % i for i in range(chunk + 5)], WRITE_POINTER, sequence=2**40)
    client.store(T, [b"b%d" % i for i in range(chunk + 5)], WRITE_POINTER, sequence=2**40 + 2**32)
    client.publish(T, [], tx_write_pointer=WRITE_POINTER)
    every = list(client.fetch(T))
    for end_index in (2**40 + chunk, 2**40 + 2**32 + chunk - 5):  # one chunk in; two chunks in, across blocks
        got = [m.payload for m in client.slices.fetch_range(T, MessageId(1, 1, 0), MessageId(1, 2, end_index))]
        assert got == [m.payload for m in every if m.id < bytes(MessageId(1, 2, end_index))]
        assert got[-1] != every[len(got)].payload == (b"a%d" % chunk if end_index < 2**40 + 2**32 else b"b995")


def test_batches_describe_rows_and_filter_transactional_ones_in_hbase(client: MessagingClient) -> None:
    client.create_topic(T, CHAIN)
    fill(client)
    rows = list(client.slices.batches(T, 1, 1, 6))
    assert [(b.position, b.messages, b.tx_write_pointer) for b in rows] == [
        (1, 3, None),
        (2, 3, None),
        (3, 3, None),
        (4, None, WRITE_POINTER),
        (5, 1, None),
        (6, 1, -(WRITE_POINTER + 1)),
    ]
    assert [b.position for b in client.slices.batches(T, 1, 2, 4)] == [2, 3, 4]
    assert [b.position for b in client.slices.batches(T, 1, 1, 6, transactional_only=True)] == [4, 6]
    for i in range(70):  # more than one scan chunk
        client.publish(T, [b"x"], tx_write_pointer=WRITE_POINTER + 2 + i)
    assert len(list(client.slices.batches(T, 1, 1, 10**6, transactional_only=True))) == 72


def test_stored_sequences_read_keys_only(client: MessagingClient) -> None:
    client.create_topic(T)
    client.store(T, [b"a", b"b", b"c"], WRITE_POINTER)  # counter sequences 1..3
    client.store(T, [b"d", b"e"], WRITE_POINTER, sequence=2**40 + 2**32)
    assert client.slices.stored_sequences(T, 1, WRITE_POINTER) == [1, 2, 3, 2**40 + 2**32, 2**40 + 2**32 + 1]
    assert client.slices.stored_sequences(T, 1, WRITE_POINTER, start=3, limit=2) == [3, 2**40 + 2**32]
    assert client.slices.stored_sequences(T, 1, WRITE_POINTER, limit=1, reverse=True) == [2**40 + 2**32 + 1]
    assert client.slices.stored_sequences(T, 1, WRITE_POINTER, stop=2**40, limit=5, reverse=True) == [3, 2, 1]
    assert client.slices.stored_sequences(T, 1, WRITE_POINTER, start=2, stop=3) == [2]
    assert client.slices.stored_sequences(T, 1, WRITE_POINTER, stop=3, limit=1, reverse=True) == [2]
    assert client.slices.stored_sequences(T, 1, WRITE_POINTER, start=3, stop=3) == []
    assert client.slices.stored_sequences(T, 1, WRITE_POINTER + 1) == []
