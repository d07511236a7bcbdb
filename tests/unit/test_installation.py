"""The tail-cache setting's rules (what writers and sweepers use, before, during and after a change) and
the row-time bounds, as pure functions."""

from __future__ import annotations

import pytest

from tms_hbase import CorruptData, InvalidArgument, TopicId, TopicMetadata
from tms_hbase.model.row_time import bounded_publish_time, check_row_time
from tms_hbase.model.rows import BatchRow, peek
from tms_hbase.model.tail_cache import (
    TailCacheSetting,
    check_grace,
    minimum_grace,
    sweeper_tail_cache,
    validate_tail_cache,
    writer_tail_cache,
)
from tms_hbase_sweeper.rules import Verdict, message_verdict

CHANGED = 1_000_000


def test_without_a_setting_each_side_assumes_its_worst_case() -> None:
    assert (writer_tail_cache(None, 0), sweeper_tail_cache(None, 0), minimum_grace(None, 0)) == (1, 30, 120)


def test_a_first_value_applies_at_once() -> None:
    setting = TailCacheSetting(5)
    assert (writer_tail_cache(setting, 0), minimum_grace(setting, 0), setting.transition_ends()) == (5, 20, None)


@pytest.mark.parametrize("old, new", [(30, 1), (1, 30)])
def test_during_a_transition_writers_use_the_smaller_and_sweepers_the_larger_value(old: int, new: int) -> None:
    setting = TailCacheSetting(new, old, CHANGED)
    ends = CHANGED + 4 * max(old, new) * 1000
    assert setting.transition_ends() == ends
    for now in (CHANGED, ends - 1):
        assert writer_tail_cache(setting, now) == min(old, new)
        assert minimum_grace(setting, now) == 4 * max(old, new)
    assert (writer_tail_cache(setting, ends), minimum_grace(setting, ends)) == (new, 4 * new)


def test_an_unsafe_grace_is_refused_naming_the_minimum() -> None:
    check_grace(4, TailCacheSetting(1), 0)
    with pytest.raises(InvalidArgument, match=r"grace 3.9 s is too small .* the minimum is 4 s"):
        check_grace(3.9, TailCacheSetting(1), 0)
    with pytest.raises(InvalidArgument, match=r"minimum is 120 s .* no tail-cache setting"):
        check_grace(0, None, 0)
    with pytest.raises(
        InvalidArgument, match=r"minimum is 120 s \(4 x tail-cache-seconds 30, the value before .* until"
    ):
        check_grace(4, TailCacheSetting(1, 30, CHANGED), CHANGED + 1)


@pytest.mark.parametrize("value", [0, -1, 86_401, 1.5, "3", True, None])
def test_out_of_range_values_are_bad_input(value: object) -> None:
    with pytest.raises(InvalidArgument):
        validate_tail_cache(value)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        b'{"tail_cache_seconds": 0}',
        b'{"tail_cache_seconds": "30"}',
        b'{"x": 1}',
        b'{"tail_cache_seconds": 5, "previous": 1, "changed_at": "soon"}',
    ],
)
def test_a_corrupt_row_is_reported_as_such(data: bytes) -> None:
    with pytest.raises(CorruptData, match="installation row"):
        TailCacheSetting.decode(data)


def test_the_row_round_trips() -> None:
    setting = TailCacheSetting(5, 30, CHANGED)
    assert TailCacheSetting.decode(setting.encode()) == setting


@pytest.mark.parametrize(
    "now, predecessor, expected",
    [
        (1000, 500, (1000, False)),  # the clock is ahead: now
        (1000, 1500, (1500, False)),  # a predecessor a little ahead (skew): followed
        (1000, 2000, (2000, False)),  # exactly at the bound
        (1000, 2001, (2000, True)),  # beyond it: not followed, now + bound
        (1000, 10**15, (2000, True)),
    ],
)
def test_bounded_publish_time(now: int, predecessor: int, expected: tuple[int, bool]) -> None:
    assert bounded_publish_time(now, predecessor, 1000) == expected


def test_check_row_time_flags_rows_dated_beyond_twice_the_skew_after_they_were_stored() -> None:
    def header(publish_time: int):
        return peek(BatchRow(publish_time, bytes(16), 1, (b"p",)).encode())

    ok = check_row_time(header(12_000), stored_ms=10_000, skew_ms=1000)
    assert (ok.future_dated, ok.ahead_ms, ok.effective_time) == (False, 2000, 12_000)
    bad = check_row_time(header(99_000), stored_ms=10_000, skew_ms=1000)
    assert (bad.future_dated, bad.ahead_ms, bad.effective_time) == (True, 89_000, 12_000)


def test_the_ttl_counts_from_the_time_the_sweeper_gives() -> None:
    meta = TopicMetadata(TopicId("ns", "t"), {"generation": "1", "ttl": "10"})
    far = peek(BatchRow(10**15, bytes(16), 1, (b"p",)).encode())
    assert message_verdict(1, meta, far, False, 20_000, 0) is Verdict.KEEP  # by its own date: never
    assert message_verdict(1, meta, far, False, 20_000, 0, time_ms=9_000) is Verdict.DROP
