"""Write pointers as time: Tephra makes them ``ms since the epoch x 10^6 (+ a counter)``, so a pointer
says when its transaction started, and a transaction older than the max lifetime can no longer write."""

from __future__ import annotations

from tms_hbase.errors import InvalidArgument
from tms_hbase.model.clock import now_ms
from tms_hbase.runtime import green

MAX_TX_PER_MS = 1_000_000
"""Write pointers are ``max(last + 1, now_ms * MAX_TX_PER_MS)``; ``pointer // MAX_TX_PER_MS`` is its time."""

MAX_LIFETIME_SECONDS = 25 * 3600
"""Tephra's ``data.tx.max.lifetime`` default (TxConstants.Manager.DEFAULT_TX_MAX_LIFETIME): no transaction
writes later than this after it started. Publish and store refuse older pointers; pruning relies on it."""

PRUNE_GRACE_SECONDS = 3600
"""What invalid-list pruning adds to the max lifetime before it counts a transaction as done writing."""

_lock = green.no_wait_lock()
_last = 0


def write_pointer_now() -> int:
    """A write pointer in Tephra's format for the current time, larger than any this process made before.

    For trying the API (examples, tests) without a transaction service. Real transactions take their
    pointer from the transaction service: its pointers are unique across processes, these are not.
    """
    global _last
    with _lock:
        _last = max(_last + 1, now_ms() * MAX_TX_PER_MS)
        return _last


def check_tx_lifetime(pointer: int, max_lifetime_s: float, now: int) -> None:
    """InvalidArgument if the transaction of ``pointer`` started more than ``max_lifetime_s`` before
    ``now`` (ms), as CDAP's messaging service refuses it: Tephra may already have pruned such a
    transaction from its invalid list, so what it writes could become visible although it never committed."""
    age_ms = now - pointer // MAX_TX_PER_MS
    if age_ms > max_lifetime_s * 1000:
        raise InvalidArgument(
            f"transaction write pointer {pointer} is too old: its transaction started {age_ms / 1000:.0f} s ago, "
            f"more than the transaction max lifetime of {max_lifetime_s:g} s (write pointers are "
            "ms since the epoch x 10^6, as Tephra makes them)"
        )


def validate_max_lifetime(value: object) -> float:
    """A client's transaction max lifetime: seconds in (0, MAX_LIFETIME_SECONDS]. A longer one is refused:
    invalid-list pruning assumes no transaction writes after MAX_LIFETIME_SECONDS (plus its grace)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_LIFETIME_SECONDS:
        raise InvalidArgument(
            f"bad tx_max_lifetime_seconds {value!r}: expected seconds > 0 and at most {MAX_LIFETIME_SECONDS} "
            "(Tephra's default max lifetime, which invalid-list pruning relies on)"
        )
    return float(value)
