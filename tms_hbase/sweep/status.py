"""The sweeper's state as people read it: per-region records, blocking regions, the global prune bound.

Shown by ``tms-sweeper status`` and ``tms-admin sweeper state`` alike, so it lives in the library.
"""

from __future__ import annotations

from tms_hbase.model.clock import now_ms
from tms_hbase.storage.hbase import Installation
from tms_hbase.sweep.pruning import GRACE_S, MAX_LIFETIME_S, plan
from tms_hbase.sweep.state import SweepState


def sweeper_state(installation: Installation, max_lifetime_s: float = MAX_LIFETIME_S + GRACE_S) -> dict:
    """Everything the status commands show, as plain data."""
    state = SweepState(installation.txstate)
    now = now_ms()
    regions = []
    for table in (installation.messages, installation.payloads):
        records = state.records(table.name)
        for region in table.regions():
            record = records.get(region.start)
            regions.append(
                {
                    "region": region.label(),
                    "completed": None if record is None else record.completed,
                    "lag_seconds": None
                    if record is None or record.completed is None
                    else (now - record.completed) / 1000,
                    "checkpoint": None if record is None else record.checkpoint,
                    "prune_bound": None if record is None else record.prune_bound,
                    "rows": 0 if record is None else record.rows,
                }
            )
    return {"regions": regions, "pruning": plan(installation, now, max_lifetime_s).as_dict()}


def describe(state: dict) -> str:
    """:func:`sweeper_state` as text for people."""
    lines = [f"{'REGION':<48} {'LAST COMPLETE':>14} {'PRUNE BOUND':>20}  CHECKPOINT"]
    for r in state["regions"]:
        lag = "never" if r["lag_seconds"] is None else f"{r['lag_seconds']:.0f}s ago"
        lines.append(f"{r['region'][:48]:<48} {lag:>14} {r['prune_bound'] or '-':>20}  {r['checkpoint'] or '-'}")
    p = state["pruning"]
    lines.append(f"global prune bound: {p['global_bound'] if p['global_bound'] is not None else 'none'}")
    if p["blocking"]:
        lines.append(f"blocking (not completely swept yet): {', '.join(p['blocking'])}")
    lines.append(f"invalid transactions: {len(p['invalid'])}, prunable now: {len(p['prunable'])}")
    return "\n".join(lines)
