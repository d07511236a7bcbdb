"""Clearing the ranges the floor passed: their settled claims counted into the totals exactly once, then
deleted with the range cells, in steps that any consumer finishes when one was cut short by a crash.

A raise of the floor (a compare-and-set of the floor cell) passes ranges whose claims are all settled or
parked with a schedule row (:mod:`.schedule`). Clearing them takes two steps, each ending in a
compare-and-set of the floor row's clearing mark (:class:`~.state.Cleared`) from the exact bytes read:

1. **count**: the settled claims of the ranges from the mark's ``counted`` up to the floor, but those with a
   schedule row (the schedule counts and deletes its own), are added to the mark's totals as ``counted``
   moves up to the floor. The counts and the mark are one cell: a crash before the compare-and-set counts
   nothing, and two consumers (or one trying again) cannot count a claim twice;
2. **delete**: the cells of the ranges from ``deleted`` up to ``counted`` and the same claims (every other
   claim there has a schedule row) are deleted, which is harmless to do twice, then ``deleted`` moves up.

The consumer that raised the floor clears at once; a reap that finds the mark behind the floor (its raiser
died or hung between the steps) finishes the clearing. The totals add the mark's counts
(:meth:`~.store.SharedStore.totals`), and the numbers of a subscription count the settled claims from
``counted`` on.
"""

from __future__ import annotations

from collections.abc import Callable

from tms_hbase.shared.schedule import PARK_MS, Schedule
from tms_hbase.shared.state import ClaimState, Keys
from tms_hbase.shared.store import Floor, SharedStore, StoredClaim


def clear(
    store: SharedStore, keys: Keys, floor: Floor, first_id: Callable[[int], bytes], clock: Callable[[], int]
) -> None:
    """Bring the clearing mark up to ``floor`` (the floor row as read, or as this consumer raised it;
    ``first_id(k)``: the first message id of range ``k``; ``clock``: HBase's, in ms). Stops, leaving the
    rest to the next reap, once another consumer moved the mark first (it goes on) or a step could not be
    judged."""
    mark, data = floor.cleared, floor.mark
    counted: list[StoredClaim] | None = None  # the claims this call counted, to delete
    while data is not None and mark.deleted < floor.value:  # (no mark: no raise since before it existed)
        if mark.deleted < mark.counted:
            claims = counted or _owned(store, keys, mark.deleted, mark.counted, first_id, clock)
            if claims is None:
                return
            store.delete_cleared(keys, range(mark.deleted, mark.counted), [c.message_id for c in claims])
            new = mark.deleting()
        else:
            counted = _owned(store, keys, mark.counted, floor.value, first_id, clock)
            if counted is None:
                return
            acked = sum(c.claim.state is ClaimState.ACKED for c in counted)
            new = mark.counting(floor.value, acked, len(counted) - acked)
        if not store.swap_mark(keys, data, new):
            return
        mark, data = new, new.encode()


def _owned(
    store: SharedStore, keys: Keys, first: int, stop: int, first_id: Callable[[int], bytes], clock: Callable[[], int]
) -> list[StoredClaim] | None:
    """The settled claims of ranges ``first`` up to ``stop`` that have no schedule row: a clearing's to
    count and delete. None if the reads took longer than PARK_MS. A claim with a schedule row was settled
    after its due time (the row written when it was parked, before the floor passed it), so the rows due
    by then, read before the claims, name every such claim the claims' read finds settled."""
    until = clock() + PARK_MS
    scheduled = Schedule(store).ids(keys, until)
    claims = store.settled(keys, first_id(first), first_id(stop))
    if clock() > until:
        return None
    return [c for c in claims if c.message_id not in scheduled]
