"""The storage port on the real HBase: each operation does what the layers above rely on."""

from __future__ import annotations

from tms_hbase import MessagingClient
from tms_hbase.storage import Table


def table(client: MessagingClient) -> Table:
    client.init_tables()
    return client.installation.metadata


def test_put_if_absent_writes_once_and_compare_and_set_needs_the_exact_old_value(client: MessagingClient) -> None:
    t = table(client)
    assert t.put_if_absent(b"k", b"d:x", b"first")
    assert not t.put_if_absent(b"k", b"d:x", b"second")
    assert not t.compare_and_set(b"k", b"d:x", b"stale", b"third")
    assert t.compare_and_set(b"k", b"d:x", b"first", b"third")
    assert t.get_cell(b"k", b"d:x") == b"third"
    assert t.get(b"missing") == {} and t.get_cell(b"missing", b"d:x") is None


def test_scans_last_row_and_deletes_follow_key_order(client: MessagingClient) -> None:
    t = table(client)
    t.put_many([(b"a\x01", {b"d:x": b"1"}), (b"a\x02", {b"d:x": b"2"}), (b"a\xff", {b"d:x": b"3"}), (b"b", {})])
    t.put(b"b", {b"d:x": b"other prefix"})
    assert [k for k, _ in t.scan(prefix=b"a")] == [b"a\x01", b"a\x02", b"a\xff"]
    assert [k for k, _ in t.scan(b"a\x02", b"b")] == [b"a\x02", b"a\xff"]
    assert [k for k, _ in t.scan(b"a\xff", b"a", reverse=True, limit=2)] == [b"a\xff", b"a\x02"]
    assert t.last_row(b"a") == (b"a\xff", {b"d:x": b"3"})
    assert t.last_row(b"c") is None
    t.delete_many([b"a\xff", b"a\x01"])
    assert [k for k, _ in t.scan(prefix=b"a")] == [b"a\x02"]


def test_increment_is_atomic_and_versions_keep_their_timestamps(client: MessagingClient) -> None:
    t = table(client)
    assert t.increment(b"n", b"d:c", 5) == 5
    assert t.increment(b"n", b"d:c", 2) == 7
    t.put_many([(b"v", {b"d:x": b"old"})], timestamp=100)
    value, stamp = t.get_versions(b"v", b"d:x", 3)[0]
    assert (value, stamp) == (b"old", 100)
    assert t.scan(prefix=b"v", timestamps=True) == [(b"v", {b"d:x": (b"old", 100)})]
