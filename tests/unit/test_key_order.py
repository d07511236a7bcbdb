"""The rules of key order (tms_hbase/shared/key_order.py) on claims and ranges as a reap reads them: a key's
first claim not settled is its head, delivered only when available and up to the frontier; the others wait;
a settled claim's successor is the next of its key; a range read since the view is not vouched for."""

from __future__ import annotations

import os

from tms_hbase.model.message_id import MessageId
from tms_hbase.shared.key_order import frontier, heads, view_of
from tms_hbase.shared.state import Claim, ClaimState, RangeCell, Settings, key_of
from tms_hbase.shared.store import StoredClaim, StoredRange

S = Settings(os.urandom(8), 1, 30_000, 5, None, 4, "key")  # ranges of 4 positions from 1
NOW = 1_000_000


def claim(position: int, key: bytes | None, state: ClaimState = ClaimState.FREE, deadline: int = 0) -> StoredClaim:
    c = Claim(state, None if state is ClaimState.FREE else "x", deadline, 0, 0, key=key_of(key))
    return StoredClaim(bytes(MessageId(1, position, 0)), c.encode(), c)


def read(k: int, done: bool = True) -> StoredRange:
    cell = RangeCell(None, 0, bytes(MessageId(1, S.last_position(k), 0)), done)
    return StoredRange(k, cell.encode(), cell)


def test_the_frontier_is_the_first_range_not_read_to_its_end() -> None:
    assert frontier(1, []) == 1
    assert frontier(1, [read(1), read(2), read(4)]) == 3
    assert frontier(3, [read(3, done=False)]) == 3


def test_each_key_goes_out_by_its_head_only_and_only_up_to_the_frontier() -> None:
    held = claim(1, b"a", ClaimState.HELD, NOW + 5000)
    a_next, b_head, plain, b_next, c_late = (
        claim(2, b"a"),
        claim(3, b"b"),
        claim(4, None),
        claim(5, b"b"),
        claim(9, b"c"),
    )
    claims = [held, a_next, b_head, plain, b_next, c_late]
    reading = StoredRange(2, RangeCell("x", NOW, b_next.message_id).encode(), RangeCell("x", NOW, b_next.message_id))
    view = view_of(S, 1, [read(1), reading], claims, complete=True)  # ranges: 1 = 1-4, 2 = 5-8 (read to 5), 3 = 9-12
    assert view.frontier == 2
    assert heads(S, view, claims, NOW) == [b_head, plain]  # a waits for its held head; c is past the frontier
    assert view.settled(held.message_id, key_of(b"a")) == a_next
    assert view.settled(b_head.message_id, key_of(b"b")) == b_next
    assert view.blocked == {key_of(b"a"), key_of(b"b"), key_of(b"c")}
    expired = claim(1, b"a", ClaimState.HELD, NOW - 1)  # its holder's deadline passed: the head goes again
    assert heads(S, view, [expired, a_next], NOW) == [expired]
    nacked = claim(1, b"a", ClaimState.FREE, NOW + 3000)  # a nack with a delay: the key waits for it
    assert heads(S, view, [nacked, a_next], NOW) == []


def test_a_claim_of_the_frontier_past_its_progress_waits() -> None:
    """A read writes its claims over several connections at once and moves its range's progress once they all
    are: a reap may see one of them but not an earlier claim of its key, so it is nobody's head or successor."""
    seen, unseen_before_it = claim(6, b"a"), claim(5, b"a")
    reading = StoredRange(2, RangeCell("x", NOW, None).encode(), RangeCell("x", NOW, None))  # progress: none yet
    view = view_of(S, 1, [read(1), reading], [claim(1, b"a", ClaimState.HELD, NOW + 5000), seen], complete=True)
    assert heads(S, view, [seen], NOW) == [], f"{unseen_before_it} may be there"
    assert view.settled(claim(1, b"a").message_id, key_of(b"a")) is None
    moved = RangeCell("x", NOW, seen.message_id)  # the read recorded: every claim up to it is written
    view = view_of(S, 1, [read(1), StoredRange(2, moved.encode(), moved)], [seen], complete=True)
    assert heads(S, view, [seen], NOW) == [seen]


def test_a_view_cut_short_knows_the_heads_it_read_and_vouches_for_no_range() -> None:
    """The first claims from the floor hold every earlier claim of their keys: their heads and successors go
    out; a key whose claims were not read may be blocked, so no range's messages go out at once."""
    head, following = claim(1, b"a", ClaimState.HELD, NOW - 1), claim(2, b"a")
    claims, reading = [head, following, claim(3, b"b")], read(2, done=False)
    view = view_of(S, 1, [read(1), reading], claims, complete=False)
    assert view.frontier == 2
    assert heads(S, view, claims, NOW) == [head, claims[2]]
    assert view.settled(head.message_id, key_of(b"a")) == following
    assert not view.direct(reading) and view_of(S, 1, [read(1), reading], claims, complete=True).direct(reading)


def test_a_range_is_vouched_for_only_as_the_view_saw_it() -> None:
    seen = StoredRange(
        2, RangeCell("x", 0, bytes(MessageId(1, 5, 0))).encode(), RangeCell("x", 0, bytes(MessageId(1, 5, 0)))
    )
    view = view_of(S, 1, [read(1), seen], [], complete=True)
    assert view.direct(seen)
    moved = RangeCell(None, 0, bytes(MessageId(1, 6, 0)))
    assert not view.direct(StoredRange(2, moved.encode(), moved)), "someone registered claims in it since"
    assert not view.direct(read(3, done=False)), "past the frontier"


def test_a_key_is_free_again_once_its_last_claim_known_is_settled() -> None:
    view = view_of(S, 1, [read(1), read(2)], [], complete=True)
    mine, later = claim(1, b"a", ClaimState.HELD, NOW + 5000), claim(6, b"a")
    view.registered(read(1, done=False), None, True, [(key_of(b"a"), mine)])
    assert key_of(b"a") in view.blocked
    view.registered(read(2, done=False), None, True, [(key_of(b"a"), later)])
    assert view.settled(mine.message_id, key_of(b"a")) == later
    assert key_of(b"a") in view.blocked, "its next claim is in play"
    assert view.settled(later.message_id, key_of(b"a")) is None
    assert key_of(b"a") not in view.blocked, "nothing of it in play any more: its next message may go at once"
    view.registered(read(3, done=False), None, False, [(key_of(b"b"), None)])  # someone else's claim of b
    assert view.settled(bytes(MessageId(1, 9, 0)), key_of(b"b")) is None
    assert key_of(b"b") in view.blocked, "a claim of it the view does not know may be in play"


def test_a_claim_registered_before_the_last_one_known_does_not_free_its_key() -> None:
    later = claim(10, b"a")  # seen by the reap, in a range past the frontier
    view = view_of(S, 1, [read(1)], [later], complete=True)
    earlier = claim(5, b"a", ClaimState.HELD, NOW + 5000)  # registered here afterwards, in range 2
    view.registered(read(2, done=False), None, True, [(key_of(b"a"), earlier)])
    assert view.settled(earlier.message_id, key_of(b"a")) is None
    assert key_of(b"a") in view.blocked, "a later claim of it is in play"
