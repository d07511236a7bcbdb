"""A claim cell's bytes: they decode to the same claim, and the reap's region-server filter, which looks
at the raw bytes, passes exactly the claims not settled."""

from __future__ import annotations

import json
import re

import pytest

from tms_hbase.shared.state import Claim, ClaimState, key_of, new_delivery
from tms_hbase.shared.store import UNSETTLED

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
    pattern = re.search(r"regexstring:(.*)'\)$", UNSETTLED)
    assert pattern is not None
    assert bool(re.search(pattern.group(1).encode(), data)) is not state.settled


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
