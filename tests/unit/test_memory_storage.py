"""The memory storage port the unit tests use answers as the real one (the same checks run on HBase in
tests/integration/test_storage.py), and its injected faults do what the unit tests rely on."""

from __future__ import annotations

import pytest

from tms_hbase.errors import HBaseUnavailable

from ..memory_storage import LOSE_ANSWER, MemoryTable
from ..storage_contract import CHECKS


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_memory_port_keeps_the_port_contract(check) -> None:
    check(MemoryTable("t"))


def test_a_lost_answer_still_writes_and_a_failure_does_not() -> None:
    t = MemoryTable("t")
    t.inject("compare_and_set", lambda *_: LOSE_ANSWER)
    with pytest.raises(HBaseUnavailable):
        t.put_if_absent(b"k", b"d:x", b"v")
    assert t.get_cell(b"k", b"d:x") == b"v"

    def down(*_: object) -> None:
        raise HBaseUnavailable("down")

    t.inject("compare_and_set", down)
    with pytest.raises(HBaseUnavailable):
        t.put_if_absent(b"j", b"d:x", b"v")
    assert t.get_cell(b"j", b"d:x") is None
    assert t.put_if_absent(b"j", b"d:x", b"v")  # one fault, then normal again


def test_hidden_rows_are_missing_from_the_next_scan_only() -> None:
    t = MemoryTable("t")
    t.put_many([(b"1", {b"d:x": b"a"}), (b"2", {b"d:x": b"b"}), (b"3", {b"d:x": b"c"})])
    t.hide_once(b"2")
    assert [k for k, _ in t.scan(b"1")] == [b"1", b"3"]
    assert [k for k, _ in t.scan(b"1")] == [b"1", b"2", b"3"]


def test_regions_follow_the_split_keys() -> None:
    t = MemoryTable("t")
    t.split_keys = [b"m"]
    assert [(r.start, r.end) for r in t.regions()] == [(b"", b"m"), (b"m", b"")]
