"""The orders the benchmarks run their sides in, so that no side is always first (bench/common.py)."""

from __future__ import annotations

import statistics
from itertools import combinations

from bench.common import abba, mirrored, rotated

SIDES = ("fetch", "consumer", "uncommitted", "committing")


def test_rotation_starts_each_round_with_another_side() -> None:
    assert sorted(rotated(SIDES, r)[0] for r in range(len(SIDES))) == sorted(SIDES)
    assert all(sorted(rotated(SIDES, r)) == sorted(SIDES) for r in range(7))


def test_mirroring_puts_each_of_two_sides_first_every_other_turn() -> None:
    assert [mirrored(("a", "b"), t) for t in range(3)] == [["a", "b"], ["b", "a"], ["a", "b"]]


def test_an_abba_round_gives_every_side_the_same_mean_place_and_each_pair_both_orders_over_two_rounds() -> None:
    for r in range(4):
        order = abba(SIDES, r)
        assert sorted(order) == sorted(SIDES * 2)
        assert len({statistics.mean(i for i, side in enumerate(order) if side == s) for s in SIDES}) == 1
    for a, b in combinations(SIDES, 2):
        firsts = [abba(SIDES, r).index(a) < abba(SIDES, r).index(b) for r in range(2)]
        assert sorted(firsts) == [False, True]
