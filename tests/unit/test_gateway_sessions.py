"""The gateway's parked consumer sessions (gateway/sessions.py): the policy alone, with stand-in consumers
(the lease behaviour itself is tested against the real HBase in tests/integration/test_gateway_consumer_limits.py):
bounded, dropped when idle, taken up only for the same session at the same message and only if the
consumer can vouch for its lease."""

from __future__ import annotations

import time
from typing import Any, cast

from tms_hbase import TopicId
from tms_hbase_gateway.sessions import Key, Sessions

T = TopicId("ns", "t")


class StandIn:
    def __init__(self, delivered: bytes | None, lease_known: bool = True) -> None:
        self.delivered, self.lease_known = delivered, lease_known
        self.parked = self.detached = False

    def park(self) -> None:
        self.parked = True

    def unpark(self, needed: float, *, confirm: bool) -> bool:
        return self.lease_known

    def detach(self) -> None:
        self.detached = True


def key(owner: str) -> Key:
    return (T, "svc", owner)


def park(sessions: Sessions, owner: str, consumer: StandIn) -> None:
    sessions.park(key(owner), cast(Any, consumer))


def test_taken_up_only_at_the_same_message_and_with_a_lease_it_can_vouch_for() -> None:
    counts: list[int] = []
    sessions = Sessions(8, 60.0, counts.append)
    same, moved, unsure = StandIn(b"m1"), StandIn(b"m1"), StandIn(b"m1", lease_known=False)
    park(sessions, "a", same)
    park(sessions, "b", moved)
    park(sessions, "c", unsure)
    assert same.parked and counts[-1] == 3
    assert sessions.take(key("a"), b"m1", confirm=True) is same and not same.detached
    assert sessions.take(key("b"), b"m0", confirm=True) is None and moved.detached  # the session went on elsewhere
    assert sessions.take(key("c"), b"m1", confirm=True) is None and unsure.detached  # the lease may have run out
    assert sessions.take(key("a"), b"m1", confirm=True) is None  # taken already
    assert len(sessions) == 0 and counts[-1] == 0


def test_bounded_and_idle_ones_dropped() -> None:
    sessions = Sessions(2, 0.2)
    first, second, third = StandIn(b"1"), StandIn(b"2"), StandIn(b"3")
    park(sessions, "a", first)
    park(sessions, "b", second)
    park(sessions, "c", third)
    assert first.detached and not second.detached and len(sessions) == 2  # the least recently parked
    time.sleep(0.3)
    fourth = StandIn(b"4")
    park(sessions, "d", fourth)
    assert second.detached and third.detached and len(sessions) == 1  # idle longer than the lease
    sessions.close()
    assert fourth.detached and len(sessions) == 0
