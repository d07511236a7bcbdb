"""What the storage port promises, as checks run against any implementation of it: the real HBase
(tests/integration/test_storage.py) and the memory one the unit tests use (tests/unit/test_memory_storage.py),
so the unit tests' stand-in answers as HBase does."""

from __future__ import annotations

from typing import Any

from tms_hbase.storage.hbase import KEYS_ONLY


def check_conditional_writes(t: Any) -> None:
    """put_if_absent writes once; compare_and_set needs the exact old value."""
    assert t.put_if_absent(b"k", b"d:x", b"first")
    assert not t.put_if_absent(b"k", b"d:x", b"second")
    assert not t.compare_and_set(b"k", b"d:x", b"stale", b"third")
    assert t.compare_and_set(b"k", b"d:x", b"first", b"third")
    assert t.get_cell(b"k", b"d:x") == b"third"
    assert t.get(b"missing") == {} and t.get_cell(b"missing", b"d:x") is None


def check_conditional_writes_at_once(t: Any) -> None:
    """compare_and_set_many: each swap on its own cell, the answers in order (more than one pipeline
    window of them: 150)."""
    assert t.put_if_absent(b"p001", b"d:x", b"there")
    won = t.compare_and_set_many([(b"p%03d" % i, b"d:x", None, b"v%d" % i) for i in range(150)])
    assert won == [i != 1 for i in range(150)]
    swaps = [(b"p002", b"d:x", b"v2", b"new"), (b"p003", b"d:x", b"stale", b"new"), (b"p149", b"d:x", b"v149", b"new")]
    assert t.compare_and_set_many(swaps) == [True, False, True]
    assert [t.get_cell(b"p%03d" % i, b"d:x") for i in (1, 2, 3, 149)] == [b"there", b"new", b"v3", b"new"]
    assert t.compare_and_set_many([]) == []


def check_scans_and_deletes(t: Any) -> None:
    """Scans (of whole rows and of one column), the last row under a prefix and deletes follow key order."""
    t.put_many([(b"a\x01", {b"d:x": b"1"}), (b"a\x02", {b"d:x": b"2"}), (b"a\xff", {b"d:x": b"3"}), (b"b", {})])
    t.put(b"b", {b"d:x": b"other prefix"})
    assert [k for k, _ in t.scan(prefix=b"a")] == [b"a\x01", b"a\x02", b"a\xff"]
    assert [k for k, _ in t.scan(b"a\x02", b"b")] == [b"a\x02", b"a\xff"]
    assert [k for k, _ in t.scan(b"a\x02")] == [b"a\x02", b"a\xff", b"b"]
    assert [k for k, _ in t.scan(b"a\xff", b"a", reverse=True, limit=2)] == [b"a\xff", b"a\x02"]
    assert [k for k, _ in t.scan(b"a", limit=2)] == [b"a\x01", b"a\x02"]
    assert t.last_row(b"a") == (b"a\xff", {b"d:x": b"3"})
    assert t.last_row(b"c") is None
    t.put(b"a\x03", {b"d:y": b"no d:x"})
    assert t.scan_columns(b"a\x02", b"b", [b"d:x"], 2) == ([b"a\x02", b"a\x03"], [[b"2", None]])  # None if absent
    assert t.scan_columns(b"a\x03", b"b", [b"d:x", b"d:y"], 5) == (
        [b"a\x03", b"a\xff"],
        [[None, b"3"], [b"no d:x", None]],
    )
    assert t.scan_columns(b"a\x01", b"a\x03", [b"d:x"], 5) == ([b"a\x01", b"a\x02"], [[b"1", b"2"]])
    assert t.scan_columns(b"a\x02", b"a\x02", [b"d:x"], 5) == ([], [[]])  # not a get of that row, as in HBase
    t.delete_many([b"a\x03"])
    t.delete_many([b"a\xff", b"a\x01"])
    assert [k for k, _ in t.scan(prefix=b"a")] == [b"a\x02"]
    assert t.last_row(b"a") == (b"a\x02", {b"d:x": b"2"})
    assert t.scan(prefix=b"a", filter=KEYS_ONLY) == [(b"a\x02", {b"d:x": b""})]  # keys only


def check_counters_and_versions(t: Any) -> None:
    """Increments are atomic counters; cells written at a timestamp keep it."""
    assert t.increment(b"n", b"d:c", 5) == 5
    assert t.increment(b"n", b"d:c", 2) == 7
    assert t.get_cell(b"n", b"d:c") == (7).to_bytes(8, "big")
    t.put_many([(b"v", {b"d:x": b"old"})], timestamp=100)
    t.put_many([(b"v", {b"d:x": b"new"})], timestamp=200)
    assert t.get_versions(b"v", b"d:x", 3)[0] == (b"new", 200)  # newest first
    assert t.scan(prefix=b"v", timestamps=True) == [(b"v", {b"d:x": (b"new", 200)})]


def check_column_ranges_and_cell_deletes(t: Any) -> None:
    """A ColumnRangeFilter keeps the cells of a row whose qualifiers lie in the range (the skip index's
    count); a counter written back by compare-and-set keeps counting (a give-back); cells are deleted
    one by one."""
    t.put(b"r", {b"d:s": b"x", b"d:k01": b"1", b"d:k02": b"2", b"d:k10": b"3"})
    found = t.scan(b"r", b"r\x00", filter="ColumnRangeFilter('k01', true, 'k10', false)")
    assert found == [(b"r", {b"d:k01": b"1", b"d:k02": b"2"})]
    t.delete_cells(b"r", [b"d:k01", b"d:k10"])
    assert t.get(b"r") == {b"d:s": b"x", b"d:k02": b"2"}
    assert t.increment(b"n", b"d:c", 10) == 10
    assert t.compare_and_set(b"n", b"d:c", (10).to_bytes(8, "big"), (4).to_bytes(8, "big"))
    assert t.increment(b"n", b"d:c", 1) == 5


CHECKS = [
    check_conditional_writes,
    check_conditional_writes_at_once,
    check_scans_and_deletes,
    check_counters_and_versions,
    check_column_ranges_and_cell_deletes,
]
