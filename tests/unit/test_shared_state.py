"""A claim cell's bytes: they decode to the same claim, and the reap's region-server filter, which looks
at the raw bytes, passes exactly the claims not settled."""

from __future__ import annotations

import json
import re

import pytest

from tms_hbase.errors import CorruptData
from tms_hbase.shared.state import (
    CLEARED_COLUMN,
    FLOOR_COLUMN,
    Claim,
    ClaimState,
    Cleared,
    encode_u64,
    key_of,
    new_delivery,
)
from tms_hbase.shared.store import SETTLED, UNSETTLED, Floor

OWNERS = [None, "host:123:abcdef12", 'quote" backslash\\ unicode é ☃']


@pytest.mark.parametrize("state", list(ClaimState))
@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("tx", [None, 0, 123_456_789_012])
@pytest.mark.parametrize("incarnation", [0, 1, 2**52 - 1])
@pytest.mark.parametrize("key", [None, key_of(b"order-7")])
def test_a_claim_cell_is_sorted_compact_json_that_decodes_to_the_same_claim(
    state: ClaimState, owner: str | None, tx: int | None, incarnation: int, key: str | None
) -> None:
    claim = Claim(state, owner, 1_795_686_840_186, 3, 1_795_686_840_000, tx, incarnation, key)
    data = claim.encode()
    assert Claim.decode(data) == claim
    assert data == json.dumps(json.loads(data), sort_keys=True, separators=(",", ":")).encode()
    for region_filter, passes in ((UNSETTLED, not state.settled), (SETTLED, state.settled)):
        pattern = re.search(r"regexstring:(.*)'\)$", region_filter)
        assert pattern is not None
        assert bool(re.search(pattern.group(1).encode(), data)) is passes


def test_a_claim_is_held_only_by_the_delivery_it_names() -> None:
    """The fence of a settlement: owner, deadline and (when the caller names one) the delivery's incarnation;
    a cell written before deliveries were named (no "i") reads as incarnation 0."""
    claim = Claim(ClaimState.HELD, "a", 2_000, 2, 1_000, incarnation=new_delivery())
    assert claim.held_by("a", 1_999) and claim.held_by("a", 1_999, claim.incarnation)
    assert not claim.held_by("a", 1_999, claim.incarnation ^ 1)  # another delivery of the same message
    assert not claim.held_by("b", 1_999, claim.incarnation) and not claim.held_by("a", 2_000, claim.incarnation)
    assert claim.acked().incarnation == claim.incarnation
    legacy = Claim.decode(b'{"d":2000,"n":1,"o":"a","s":"h","t":1000}')
    assert legacy.incarnation == 0 and legacy.held_by("a", 1_999, 0)
    assert all(0 < new_delivery() < 2**52 for _ in range(1000))


def test_the_clearing_mark_counts_once_then_deletes_and_reads_back_as_written() -> None:
    """The mark a clearing moves by compare-and-set: counting ranges adds their claims to its totals and moves
    ``counted`` (one cell: the count lands with the mark or not at all), deleting them moves ``deleted`` up;
    each step's cell decodes to the same mark."""
    start = Cleared.at(3)
    assert (start.deleted, start.counted, start.acked, start.dead) == (3, 3, 0, 0)
    counted = start.counting(7, 40, 2)
    assert counted == Cleared(3, 7, 40, 2)
    done = counted.deleting()
    assert done == Cleared(7, 7, 40, 2)
    assert done.counting(9, 5, 0) == Cleared(7, 9, 45, 2)
    for mark in (start, counted, done):
        assert Cleared.decode(mark.encode()) == mark
    with pytest.raises(ValueError):
        done.counting(7, 1, 0)  # ranges counted already are never counted again


def test_the_clearing_mark_counts_schedule_rows_with_their_names_until_they_are_deleted() -> None:
    """Settled scheduled messages are counted into the mark by the same compare-and-set that names their rows
    (due time, message id), so that a crash before their deletion is finished, never counted again; a second
    count waits for the first to be let go; a clearing of ranges keeps the names."""
    rows = ((1_700_000_000_000, b"\x01" * 20), (1_700_000_000_005, b"\x02" * 20))
    counted = Cleared(3, 7, 40, 2).counting_scheduled(rows, 1, 1)
    assert counted == Cleared(3, 7, 41, 3, rows)
    assert Cleared.decode(counted.encode()) == counted
    assert counted.counting(9, 5, 0) == Cleared(3, 9, 46, 3, rows)
    with pytest.raises(ValueError):
        counted.counting_scheduled(rows, 2, 0)
    assert counted.deleting_scheduled() == Cleared(3, 7, 41, 3)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00" * 31, Cleared(4, 4).encode() + b"\x00", b"".join(map(encode_u64, (5, 4, 0, 0)))],
    ids=["empty", "short", "long", "deleted past counted"],
)
def test_a_corrupt_clearing_mark_is_refused(data: bytes) -> None:
    with pytest.raises(CorruptData):
        Cleared.decode(data)


def test_a_floor_row_without_a_mark_reads_as_cleared_up_to_its_floor() -> None:
    """A subscription whose floor was last raised before the mark existed: its raises cleared what they passed."""
    assert Floor.of({}) == Floor(None, 1, None, Cleared(1, 1))
    assert Floor.of({FLOOR_COLUMN: encode_u64(12)}).cleared == Cleared(12, 12)
    mark = Cleared(9, 12, 100, 1).encode()
    found = Floor.of({FLOOR_COLUMN: encode_u64(12), CLEARED_COLUMN: mark})
    assert (found.value, found.mark, found.cleared) == (12, mark, Cleared(9, 12, 100, 1))
