"""Stored data and arguments that used to escape the error tree (KeyError, OverflowError,
struct.error) now raise documented TmsError subclasses, naming the row where a row is at fault."""

from __future__ import annotations

from collections.abc import Iterator

import happybase
import pytest

from tms_hbase import CorruptData, InvalidArgument, MessageId, MessagingClient, TopicFull, TopicId
from tms_hbase.config import thrift_address
from tms_hbase.model.rows import MAX_POSITION, MESSAGE_COLUMN, BatchRow, message_key
from tms_hbase.model.topic import MAX_TTL_SECONDS

T = TopicId("ns", "t")


@pytest.fixture
def raw(client: MessagingClient, hbase_address: str) -> Iterator[happybase.Table]:
    """The messages table through plain happybase, to store rows no tms-hbase writer would."""
    conn = happybase.Connection(*thrift_address(hbase_address))
    try:
        yield conn.table(client.installation.messages.name)
    finally:
        conn.close()


def a_row(publish_time: int) -> bytes:
    return BatchRow(publish_time=publish_time, writer_id=b"w" * 16, batch_no=1, payloads=(b"last",)).encode()


@pytest.mark.parametrize(
    "cells, reason",
    [({b"d:x": b"stray"}, "no d:m cell"), ({MESSAGE_COLUMN: b"\x01\x00"}, "truncated message row")],
    ids=["no d:m cell", "truncated cell"],
)
def test_a_corrupt_row_is_corrupt_data_naming_topic_and_position(
    client: MessagingClient, hbase_address: str, raw: happybase.Table, cells: dict, reason: str
) -> None:
    client.create_topic(T, {"ordering": "chain"})  # a chain writer reads the tail row before it appends
    client.publish(T, [b"a"])  # position 1
    raw.put(message_key(T, 1, 2), cells)  # position 2: what a writer never stores
    with pytest.raises(CorruptData, match=f"position 2 of ns:t .*{reason}") as fetched:
        list(client.fetch(T))
    assert (fetched.value.topic, fetched.value.generation, fetched.value.position) == ("ns:t", 1, 2)
    with MessagingClient(hbase_address, client.installation.prefix) as fresh:  # no remembered tail: it reads row 2
        with pytest.raises(CorruptData, match=f"position 2 of ns:t .*{reason}") as published:
            fresh.publish(T, [b"b"])
        assert published.value.position == 2
        # a reader can start after the row it names
        after = bytes(MessageId(1, published.value.position + 1, 0))
        assert list(fresh.fetch(T, start_message=after)) == []


def test_an_infinite_or_nan_ttl_is_invalid_and_stores_nothing(client: MessagingClient) -> None:
    client.create_topic(T)
    for ttl in (float("inf"), float("nan"), -1.0, 0):
        with pytest.raises(InvalidArgument, match="per-message ttl"):
            client.publish(T, [b"x"], ttl_seconds=ttl)
    assert list(client.fetch(T)) == []


def test_the_longest_ttl_the_topic_allows_is_stored(client: MessagingClient) -> None:
    client.create_topic(T, {"ttl": str(MAX_TTL_SECONDS)})
    client.publish(T, [b"forever"], ttl_seconds=MAX_TTL_SECONDS)  # its expiry is past the largest stored time
    assert [m.payload for m in client.fetch(T)] == [b"forever"]


def test_a_topic_at_its_last_position_is_full_and_still_readable(
    client: MessagingClient, hbase_address: str, raw: happybase.Table
) -> None:
    client.create_topic(T, {"ordering": "chain"})  # the chain's last position (a sequencer's is its last offset)
    client.publish(T, [b"first"])
    last = next(client.fetch(T)).publish_time + 1
    raw.put(message_key(T, 1, MAX_POSITION), {MESSAGE_COLUMN: a_row(last)})
    with (
        MessagingClient(hbase_address, client.installation.prefix) as fresh,
        pytest.raises(TopicFull, match="ns:t is full"),
    ):
        fresh.publish(T, [b"more"])  # a writer without a remembered tail reads the last row
    assert [m.payload for m in client.fetch(T)] == [b"first", b"last"]
    assert list(client.fetch(T, start_time_ms=last + 1)) == []
    newest = list(client.fetch(T))[-1].id
    assert list(client.fetch(T, start_message=newest, inclusive=False)) == []
    client.delete_topic(T)
    client.create_topic(T)  # a new generation starts at position 1
    client.publish(T, [b"again"])
    assert [m.payload for m in client.fetch(T)] == [b"again"]
