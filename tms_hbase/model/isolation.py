"""What a subscription's consumer reads (Kafka's ``isolation.level``): ``"committed"`` (the default: committed
messages only, :mod:`tms_hbase.isolation.committed`) or ``"uncommitted"`` (every message as stored, rolled-back ones
included)."""

from __future__ import annotations

from tms_hbase.errors import InvalidArgument

COMMITTED = "committed"
UNCOMMITTED = "uncommitted"
ISOLATION_LEVELS = (COMMITTED, UNCOMMITTED)


def check_isolation(isolation: object) -> str:
    """``isolation`` if it is one of :data:`ISOLATION_LEVELS`, else InvalidArgument."""
    if not isinstance(isolation, str) or isolation not in ISOLATION_LEVELS:
        raise InvalidArgument(
            f"bad isolation {isolation!r}: 'committed' (committed messages only, the default) or "
            "'uncommitted' (every message as stored, rolled-back ones included)"
        )
    return isolation
