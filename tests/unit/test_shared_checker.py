"""The shared-consumption checker (tests/verify/key_order.py) finds a scheduled message delivered early."""

from __future__ import annotations

from tests.verify.key_order import check


def test_a_delivery_noted_before_its_time_is_an_anomaly() -> None:
    notes = [
        (0, ["got", "a", "1", "99999", "1500", "10"]),
        (0, ["acking", "a", "11"]),
        (0, ["acked", "a", "12"]),
        (1, ["got", "b", "1", "99999", "900", "13"]),
        (1, ["acking", "b", "14"]),
        (1, ["acked", "b", "15"]),
    ]
    assert check(notes, {}, ["a", "b"], [], {"a": 1000, "b": 1000}) == {"early": ["b: 100 ms before its time"]}
    assert check(notes, {}, ["a", "b", "c"], []) == {"lost": ["c"]}
