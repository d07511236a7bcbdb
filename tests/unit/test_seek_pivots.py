"""Where a time seek probes next (``tms_hbase.fetch.reader._Pivots``): where the dates read put the time,
within the offsets left; the middle when the dates say nothing, or once they misled the search twice."""

from __future__ import annotations

from tms_hbase.fetch.reader import GUESS_MISSES, _Pivots


def test_it_probes_where_the_dates_put_the_time_moved_by_the_lean() -> None:
    pivots = _Pivots()
    assert pivots.next(2, 999, (1, 1_000), (1001, 2_000), 1_250) == 251
    assert pivots.next(2, 999, (1, 1_000), (1001, 2_000), 1_250, lean=8) == 259
    assert pivots.next(2, 999, (1, 1_000), (1001, 2_000), 1_250, lean=-8) == 243


def test_a_guess_stays_within_the_offsets_left() -> None:
    pivots = _Pivots()
    assert pivots.next(300, 700, (1, 1_000), (1001, 2_000), 1_100) == 300
    assert pivots.next(300, 700, (1, 1_000), (1001, 2_000), 1_990) == 700


def test_without_two_dated_rows_it_probes_the_middle() -> None:
    pivots = _Pivots()
    assert pivots.next(1, 99, None, (100, 5_000), 1_000) == 50
    assert pivots.next(1, 99, (1, 1_000), None, 1_000) == 50
    assert pivots.next(1, 99, (1, 5_000), (100, 5_000), 5_000) == 50  # (dated alike: they say nothing)


def test_after_two_guesses_that_did_not_halve_the_offsets_it_probes_the_middle() -> None:
    pivots = _Pivots()
    for _ in range(GUESS_MISSES):
        assert pivots.next(1, 1000, (0, 0), (1001, 1001), 10) == 10
        pivots.narrowed(11, 1000)  # the probe moved the low end only a little: a miss
    assert pivots.next(11, 1000, (10, 10), (1001, 1001), 20) == 505


def test_a_guess_that_halved_the_offsets_is_no_miss() -> None:
    pivots = _Pivots()
    for _ in range(2 * GUESS_MISSES):
        start = pivots.next(1, 1000, (0, 0), (1001, 1001), 700)
        pivots.narrowed(start, 1000)
    assert pivots.misses == 0
