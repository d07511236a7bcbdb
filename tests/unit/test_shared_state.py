"""A claim cell's bytes: they decode to the same claim, and the reap's region-server filter, which looks
at the raw bytes, passes exactly the claims not settled."""

from __future__ import annotations

import json
import re

import pytest

from tms_hbase.shared.state import Claim, ClaimState, key_of
from tms_hbase.shared.store import UNSETTLED

OWNERS = [None, "host:123:abcdef12", 'quote" backslash\\ unicode é ☃']


@pytest.mark.parametrize("state", list(ClaimState))
@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("tx", [None, 0, 123_456_789_012])
@pytest.mark.parametrize("key", [None, key_of(b"order-7")])
def test_a_claim_cell_is_sorted_compact_json_that_decodes_to_the_same_claim(
    state: ClaimState, owner: str | None, tx: int | None, key: str | None
) -> None:
    claim = Claim(state, owner, 1_795_686_840_186, 3, 1_795_686_840_000, tx, key)
    data = claim.encode()
    assert Claim.decode(data) == claim
    assert data == json.dumps(json.loads(data), sort_keys=True, separators=(",", ":")).encode()
    pattern = re.search(r"regexstring:(.*)'\)$", UNSETTLED)
    assert pattern is not None
    assert bool(re.search(pattern.group(1).encode(), data)) is not state.settled
