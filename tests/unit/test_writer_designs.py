"""The density checker of the many-writer design benchmark (bench/writer_designs.py): it is what says a
prototype kept every acknowledged batch exactly once in one dense order, so it must catch each fault."""

from __future__ import annotations

from bench.writer_designs import check_density, skip_marker
from tms_hbase.model.rows import BatchRow

A, B = b"a" * 16, b"b" * 16


def cell(writer: bytes, batch_no: int, publish_time: int = 100) -> bytes:
    return BatchRow(publish_time, writer, batch_no, (b"x",)).encode()


def test_dense_rows_with_a_skip_marker_are_exactly_once() -> None:
    rows = [(1, cell(A, 1)), (2, skip_marker(100)), (3, cell(B, 1, 101)), (4, cell(A, 2, 101))]
    found = check_density(rows, [(A, 1), (A, 2), (B, 1)])
    assert found.ok
    assert (found.rows, found.batches, found.skips, found.unacknowledged) == (4, 3, 1, 0)


def test_a_missing_position_a_duplicate_and_a_lost_batch_are_each_caught() -> None:
    assert check_density([(1, cell(A, 1)), (3, cell(A, 2))], [(A, 1), (A, 2)]).gaps == [2]
    twice = check_density([(1, cell(A, 1)), (2, cell(A, 1))], [(A, 1)])
    assert twice.duplicates == [(A, 1)] and not twice.ok
    lost = check_density([(1, cell(A, 1))], [(A, 1), (B, 7)])
    assert lost.missing == [(B, 7)] and not lost.ok


def test_a_batch_nobody_acknowledged_is_counted_not_failed() -> None:
    found = check_density([(1, cell(A, 1)), (2, cell(B, 1))], [(A, 1)])  # B was killed before its answer
    assert found.ok and found.unacknowledged == 1


def test_publish_time_stepping_back_is_measured() -> None:
    found = check_density([(1, cell(A, 1, 100)), (2, cell(B, 1, 160)), (3, cell(A, 2, 130)), (4, cell(B, 2, 150))])
    assert (found.decreasing, found.backstep_ms) == (2, 30)
