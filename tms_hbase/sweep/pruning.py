"""Invalid-list pruning (Tephra's scheme): an invalid transaction may leave the invalid list only once
every region of the message table has been swept with it on the list (so its rows carry -p), and it
is older than any transaction that could still be writing (the inactive bound).

The sweeper computes the bound each region's sweep vouches for (:func:`prune_upper_bound`) and records
it; the admin CLI reads the records to decide what may be pruned (:func:`plan`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tms_hbase.storage.hbase import Installation
from tms_hbase.sweep.state import SweepState
from tms_hbase.tx.pointers import MAX_LIFETIME_SECONDS, MAX_TX_PER_MS, PRUNE_GRACE_SECONDS
from tms_hbase.tx.snapshot import TransactionSnapshot
from tms_hbase.txserver.manager import TransactionManager
from tms_hbase.txserver.state_store import StateStore

MAX_LIFETIME_S = MAX_LIFETIME_SECONDS  # Tephra: no transaction writes longer than this (publish refuses it)
GRACE_S = PRUNE_GRACE_SECONDS


def prune_upper_bound(state: TransactionManager | TransactionSnapshot) -> int:
    """The largest id a sweep with this state can vouch for: every invalid id up to it was applied,
    and no transaction up to it was still in progress (its rows may appear later)."""
    invalid = state.invalid
    in_progress = sorted(state.in_progress)
    if not invalid and not in_progress:
        return state.read_pointer - 1
    bounds = []
    if invalid:
        bounds.append(max(invalid))
    if in_progress:
        bounds.append(in_progress[0] - 1)
    return min(bounds)


def inactive_bound(now_ms: int, max_lifetime_s: float = MAX_LIFETIME_S + GRACE_S) -> int:
    """Write pointers below this belong to transactions that can no longer be writing."""
    return int((now_ms - max_lifetime_s * 1000) * MAX_TX_PER_MS) - 1


@dataclass
class PrunePlan:
    """What pruning may remove now, and why not more."""

    global_bound: int | None
    inactive_bound: int
    regions: dict[str, int | None] = field(default_factory=dict)  # region label → its recorded bound
    blocking: list[str] = field(default_factory=list)  # regions with no complete sweep recorded
    invalid: list[int] = field(default_factory=list)
    prunable: list[int] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "global_bound": self.global_bound,
            "inactive_bound": self.inactive_bound,
            "regions": self.regions,
            "blocking": self.blocking,
            "invalid": self.invalid,
            "prunable": self.prunable,
        }


def plan(
    installation: Installation,
    now_ms: int,
    max_lifetime_s: float = MAX_LIFETIME_S + GRACE_S,
    invalid: Iterable[int] | None = None,
) -> PrunePlan:
    """The global bound over the message table's current regions, and the invalid ids below it.

    ``invalid`` is the transaction server's invalid list (any Tephra-compatible server's ``getSnapshot``);
    by default it is read from our server's state in the ``_txstate`` table.
    """
    records = SweepState(installation.txstate).records(installation.messages.name)
    if invalid is None:
        invalid = StateStore(installation.txstate).recover().invalid
    result = PrunePlan(None, inactive_bound(now_ms, max_lifetime_s), invalid=sorted(invalid))
    bounds = []
    for region in installation.messages.regions():
        record = records.get(region.start)
        bound = None if record is None or record.completed is None else record.prune_bound
        result.regions[region.label()] = bound
        if bound is None:
            result.blocking.append(region.label())
        else:
            bounds.append(bound)
    if not result.blocking and bounds:
        result.global_bound = min(min(bounds), result.inactive_bound)
        result.prunable = [i for i in result.invalid if i <= result.global_bound]
    return result
