"""Where a time seek probes next (``tms_hbase.ordering.pivots.Pivots``): where the dates read put the time,
leaning past it below and then on the side not moved last (further while probes land on one side), within
the offsets left; the middle when the dates say nothing, or once they misled the search twice."""

from __future__ import annotations

from tms_hbase.ordering.pivots import GUESS_MISSES, Pivots

LOW, HIGH = (1, 1_000), (1001, 2_000)  # (offset, date): one offset per millisecond


def test_it_probes_where_the_dates_put_the_time_leaning_below_it_first() -> None:
    assert Pivots().next(2, 999, LOW, HIGH, 1_250) == 251
    assert Pivots(lean_offsets=8).next(2, 999, LOW, HIGH, 1_250) == 243
    assert Pivots(lean_ms=20).next(2, 999, LOW, HIGH, 1_250) == 231


def test_it_leans_to_the_side_not_moved_last_and_further_while_probes_land_on_one_side() -> None:
    pivots = Pivots(lean_offsets=8)
    assert pivots.next(2, 999, LOW, HIGH, 1_250) == 243
    pivots.narrowed(244, 999, raised_low=True)  # it landed below (near the target: no miss): aim above
    assert pivots.next(244, 999, (243, 1_242), HIGH, 1_250) == 259
    pivots.narrowed(260, 998, raised_low=True)  # below again (rows came slower there): twice the lean
    assert pivots.misses == 1
    assert pivots.next(260, 998, (259, 1_249), HIGH, 1_250) == 275
    pivots.narrowed(260, 274, raised_low=False)  # above: the next one aims below, by the lean again
    assert pivots.next(260, 274, (259, 1_249), (275, 1_251), 1_250) == 260  # (267 - 8, within the offsets left)


def test_a_guess_stays_within_the_offsets_left() -> None:
    assert Pivots().next(300, 700, LOW, HIGH, 1_100) == 300
    assert Pivots().next(300, 700, LOW, HIGH, 1_990) == 700


def test_without_two_dated_rows_it_probes_the_middle() -> None:
    assert Pivots().next(1, 99, None, (100, 5_000), 1_000) == 50
    assert Pivots().next(1, 99, (1, 1_000), None, 1_000) == 50
    assert Pivots().next(1, 99, (1, 5_000), (100, 5_000), 5_000) == 50  # (dated alike: they say nothing)


def test_after_two_guesses_that_did_not_halve_the_offsets_it_probes_the_middle() -> None:
    pivots = Pivots()
    for _ in range(1 + GUESS_MISSES):  # (the first probe is no miss: it lands near one end when it is right)
        assert pivots.next(1, 1000, (0, 0), (1001, 1001), 10) == 10
        pivots.narrowed(11, 1000, raised_low=True)  # the probe moved the low end only a little: a miss
    assert pivots.next(11, 1000, (10, 10), (1001, 1001), 20) == 505


def test_a_guess_that_halved_the_offsets_is_no_miss() -> None:
    pivots = Pivots()
    for _ in range(2 * GUESS_MISSES):
        start = pivots.next(1, 1000, (0, 0), (1001, 1001), 700)
        pivots.narrowed(start, 1000, raised_low=True)
    assert pivots.misses == 0
