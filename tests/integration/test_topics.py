"""Topic administration against the real HBase: CDAP's generation rules, CAS, bad input."""

from __future__ import annotations

import re

import happybase
import pytest

from tms_hbase import (
    ConcurrentModification,
    CorruptData,
    InvalidArgument,
    MessagingClient,
    TopicAlreadyExists,
    TopicId,
    TopicNotFound,
)
from tms_hbase.config import thrift_address
from tms_hbase.installation.metadata import COLUMN
from tms_hbase.model.topic import DEFAULT_TTL_SECONDS
from tms_hbase.tx import write_pointer_now

T = TopicId("ns", "orders")


def raw_row(address: str, prefix: str, topic: TopicId) -> dict[bytes, bytes]:
    """The stored metadata row, read with plain happybase (not through the code under test)."""
    host, port = thrift_address(address)
    conn = happybase.Connection(host, port)
    try:
        return conn.table(f"{prefix}_metadata").row(topic.key)
    finally:
        conn.close()


def test_create_get_defaults(client: MessagingClient) -> None:
    meta = client.create_topic(T)
    assert (meta.generation, meta.ttl) == (1, DEFAULT_TTL_SECONDS)
    got = client.get_topic(T)
    assert got == meta
    assert isinstance(got.ttl, int) and isinstance(got.generation, int)
    assert dict(got.properties) == {"generation": "1", "ordering": "sequencer", "ttl": str(DEFAULT_TTL_SECONDS)}


def test_create_with_properties_and_string_topic(client: MessagingClient) -> None:
    client.create_topic("ns:s", {"ttl": "3600", "owner": "billing"})
    got = client.get_topic(TopicId("ns", "s"))
    assert got.ttl == 3600 and got.properties["owner"] == "billing"


def test_tables_are_created_with_the_documented_families(client: MessagingClient, hbase_address: str) -> None:
    client.create_topic(T)
    host, port = thrift_address(hbase_address)
    conn = happybase.Connection(host, port)
    try:
        for kind in ("messages", "payloads", "metadata", "txstate"):
            families = conn.table(client.installation.names.name(kind)).families()
            assert list(families) == [b"d"]
            assert families[b"d"]["max_versions"] == 1
            assert families[b"d"]["bloom_filter_type"] == b"ROW"
        assert conn.table(client.installation.metadata.name).families()[b"d"]["in_memory"] is True
    finally:
        conn.close()


def test_fifty_create_delete_cycles_count_generations(client: MessagingClient, hbase_address: str, prefix: str) -> None:
    for i in range(1, 51):
        assert client.create_topic(T).generation == i
        assert client.get_topic(T).generation == i
        client.delete_topic(T)
        with pytest.raises(TopicNotFound):
            client.get_topic(T)
        stored = raw_row(hbase_address, prefix, T)[b"d:p"]
        assert f'"generation":"-{i}"'.encode() in stored


def test_duplicate_create_leaves_properties_unchanged(client: MessagingClient) -> None:
    client.create_topic(T, {"ttl": "100", "p": "1"})
    with pytest.raises(TopicAlreadyExists):
        client.create_topic(T, {"ttl": "200", "p": "2"})
    got = client.get_topic(T)
    assert (got.ttl, got.properties["p"], got.generation) == (100, "1", 1)


def test_delete_twice_is_not_found_and_deleted_topic_is_gone_everywhere(client: MessagingClient) -> None:
    client.create_topic(T)
    client.delete_topic(T)
    with pytest.raises(TopicNotFound):
        client.delete_topic(T)
    with pytest.raises(TopicNotFound):
        client.update_topic(T, {"ttl": "5"})
    assert client.list_topics("ns") == []


def test_recreate_after_delete_takes_new_properties(client: MessagingClient) -> None:
    client.create_topic(T, {"ttl": "100", "old": "x"})
    client.delete_topic(T)
    meta = client.create_topic(T, {"ttl": "7"})
    assert (meta.generation, meta.ttl, "old" in meta.properties) == (2, 7, False)


def test_list_hides_deleted_and_keeps_namespaces_apart(client: MessagingClient) -> None:
    for ns, name in [("ns", "b"), ("ns", "a-b"), ("ns", "a"), ("ns", "gone"), ("nsx", "a"), ("other", "z")]:
        client.create_topic(TopicId(ns, name))
    client.delete_topic(TopicId("ns", "gone"))
    assert client.list_topics("ns") == [TopicId("ns", "a"), TopicId("ns", "a-b"), TopicId("ns", "b")]
    assert client.list_topics("nsx") == [TopicId("nsx", "a")]
    assert client.list_topics("empty") == []
    assert len(client.list_topics()) == 5
    with pytest.raises(InvalidArgument):
        client.list_topics("bad ns")


def test_the_first_topics_are_read_without_the_rest_and_say_whether_they_are_all(client: MessagingClient) -> None:
    """``admin.first_topics(n)``: the first n existing topics in key order (a deleted topic's row, and the rows
    past them, not counted), and whether those are every topic there is (a page of a long list read alone)."""
    for ns, name in [("ns", "b"), ("ns", "a-b"), ("ns", "a"), ("ns", "gone"), ("ns", "c"), ("nt", "a")]:
        client.create_topic(TopicId(ns, name))
    client.delete_topic(TopicId("ns", "gone"))
    keyed = [TopicId("ns", "a-b"), TopicId("ns", "a"), TopicId("ns", "b"), TopicId("ns", "c"), TopicId("nt", "a")]

    def first(count: int) -> tuple[list[TopicId], bool]:
        found, complete = client.admin.first_topics(count)
        return [meta.topic for meta in found], complete

    assert first(2) == (keyed[:2], False)
    assert first(5) == (keyed, False)  # the deleted topic's row (between ns:c and nt:a) passed over
    assert first(6) == (keyed, True)
    found, complete = client.admin.first_topics(3, after=TopicId("ns", "b"))
    assert ([meta.topic for meta in found], complete) == (keyed[3:], True)
    with pytest.raises(InvalidArgument):
        client.admin.first_topics(0)


def test_update_replaces_properties_and_keeps_generation(client: MessagingClient) -> None:
    client.create_topic(T)
    client.delete_topic(T)
    client.create_topic(T, {"ttl": "50", "a": "1"})
    meta = client.update_topic(T, {"b": "2"})
    assert meta.generation == 2
    got = client.get_topic(T)
    expected = {"b": "2", "generation": "2", "ordering": "sequencer", "ttl": str(DEFAULT_TTL_SECONDS)}
    assert dict(got.properties) == expected  # the ordering is the generation's, kept by an update


def test_update_with_stale_expected_changes_nothing(client: MessagingClient) -> None:
    client.create_topic(T, {"ttl": "10"})
    seen = client.get_topic(T)
    client.update_topic(T, {"ttl": "20"})
    with pytest.raises(ConcurrentModification):
        client.update_topic(T, {"ttl": "30"}, expected=seen)
    assert client.get_topic(T).ttl == 20
    assert client.update_topic(T, {"ttl": "40"}, expected=client.get_topic(T)).ttl == 40


@pytest.mark.parametrize("ttl", ["xyz", "0", "-1", "", "2.5"])
def test_bad_ttl_changes_nothing(client: MessagingClient, hbase_address: str, prefix: str, ttl: str) -> None:
    with pytest.raises(InvalidArgument, match="ttl"):
        client.create_topic(T, {"ttl": ttl})
    assert client.installation.missing() == client.installation.names.core()  # not even the tables
    client.admin.init_tables()
    with pytest.raises(InvalidArgument, match="ttl"):
        client.create_topic(T, {"ttl": ttl})
    assert raw_row(hbase_address, prefix, T) == {}
    client.create_topic(T, {"ttl": "9"})
    with pytest.raises(InvalidArgument, match="ttl"):
        client.update_topic(T, {"ttl": ttl})
    assert client.get_topic(T).ttl == 9


def test_bad_names_and_reserved_property(client: MessagingClient) -> None:
    client.admin.init_tables()
    for bad in ["ns:bad name", "ns", "n s:t", "ns:t/x"]:
        with pytest.raises(InvalidArgument):
            client.create_topic(bad)
    with pytest.raises(InvalidArgument):
        client.create_topic(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="generation"):
        client.create_topic(T, {"generation": "9"})
    assert client.list_topics() == []


def test_unknown_topic(client: MessagingClient) -> None:
    client.admin.init_tables()
    with pytest.raises(TopicNotFound, match="ns:orders"):
        client.get_topic(T)
    with pytest.raises(TopicNotFound):
        client.update_topic(T, {})
    with pytest.raises(TopicNotFound):
        client.delete_topic(T)


def message_rows(address: str, prefix: str) -> int:
    """Rows in the message and payload tables, counted with plain happybase."""
    host, port = thrift_address(address)
    conn = happybase.Connection(host, port)
    try:
        return sum(1 for table in ("messages", "payloads") for _ in conn.table(f"{prefix}_{table}").scan())
    finally:
        conn.close()


def test_tx_mode_is_enforced_on_publish_and_store_and_refusals_write_nothing(
    client: MessagingClient, hbase_address: str, prefix: str
) -> None:
    only_tx, never_tx, either = TopicId("ns", "only-tx"), TopicId("ns", "never-tx"), TopicId("ns", "either")
    assert client.create_topic(only_tx, {"tx.mode": "transactional"}).tx_mode == "transactional"
    assert client.create_topic(never_tx, {"tx.mode": "non-transactional"}).tx_mode == "non-transactional"
    assert client.create_topic(either).tx_mode == "any"  # absent means any; nothing is stored for it
    assert "tx.mode" not in client.get_topic(either).properties
    wp = write_pointer_now()
    rows = message_rows(hbase_address, prefix)
    refused = {
        "transactional-only (tx.mode=transactional)": [
            lambda: client.publish(only_tx, [b"plain"]),
        ],
        "non-transactional-only (tx.mode=non-transactional)": [
            lambda: client.publish(never_tx, [b"tx"], tx_write_pointer=wp),
            lambda: client.publish(never_tx, [], tx_write_pointer=wp),
            lambda: client.store(never_tx, [b"stored"], tx_write_pointer=wp),
        ],
    }
    for message, calls in refused.items():
        for call in calls:
            with pytest.raises(InvalidArgument, match=re.escape(message)):
                call()
    assert message_rows(hbase_address, prefix) == rows

    client.store(only_tx, [b"stored"], tx_write_pointer=wp)
    client.publish(only_tx, [], tx_write_pointer=wp)
    client.publish(only_tx, [b"tx"], tx_write_pointer=wp)
    client.publish(never_tx, [b"plain"])
    client.publish(either, [b"plain"])
    client.publish(either, [b"tx"], tx_write_pointer=wp)
    assert [m.payload for m in client.fetch(only_tx)] == [b"stored", b"tx"]
    assert [m.payload for m in client.fetch(never_tx)] == [b"plain"]
    assert [m.payload for m in client.fetch(either)] == [b"plain", b"tx"]

    # a changed mode applies to this client's next publish (others: within their metadata cache age)
    client.update_topic(only_tx, {"tx.mode": "non-transactional"})
    with pytest.raises(InvalidArgument, match="non-transactional-only"):
        client.publish(only_tx, [b"tx again"], tx_write_pointer=wp)
    client.publish(only_tx, [b"plain now"])
    client.update_topic(only_tx, {})  # left out: back to any
    client.publish(only_tx, [b"tx again"], tx_write_pointer=wp)


def test_a_bad_tx_mode_is_refused_and_changes_nothing(client: MessagingClient) -> None:
    client.create_topic(T, {"tx.mode": "transactional"})
    for bad in ("Transactional", "", "none", "any "):
        with pytest.raises(InvalidArgument, match=r"bad tx\.mode"):
            client.create_topic(TopicId("ns", "other"), {"tx.mode": bad})
        with pytest.raises(InvalidArgument, match="expected one of any, transactional, non-transactional"):
            client.update_topic(T, {"tx.mode": bad})
    assert client.list_topics("ns") == [T]
    assert client.get_topic(T).tx_mode == "transactional"


def test_a_stored_tx_mode_that_does_not_parse_is_corrupt_data(
    client: MessagingClient, hbase_address: str, prefix: str
) -> None:
    client.create_topic(T)
    host, port = thrift_address(hbase_address)
    conn = happybase.Connection(host, port)
    try:
        conn.table(f"{prefix}_metadata").put(T.key, {COLUMN: b'{"generation":"1","ttl":"60","tx.mode":"sometimes"}'})
    finally:
        conn.close()
    with pytest.raises(CorruptData, match=r"ns:orders.*tx\.mode"):
        client.get_topic(T)
