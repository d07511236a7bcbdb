"""How far a row's publish time may run ahead of the clocks, and what to make of a row dated further.

A publish time is ``max(now, predecessor's)``: a single row dated far in the future (a host whose clock
jumped, a row written around the library) would otherwise pin every later publish time, and none of
those rows would ever expire. Two bounds, both in terms of the installation's clock-skew budget ``C``
(its tail-cache seconds, docs/guarantees.md):

* a writer never follows a predecessor dated more than ``C`` ahead of its own clock; it writes
  ``now + C`` instead (:func:`bounded_publish_time`). Along the order, times are then non-decreasing
  except right after such a row, so a time seek may start earlier than asked, never later;
* a correct row is therefore at most ``2 C`` ahead of its HBase cell timestamp (the region server's clock
  when it was stored). A row dated further is *future-dated* (:func:`check_row_time`), and the sweeper
  counts its TTL from ``cell timestamp + 2 C`` instead of from its publish time.
"""

from __future__ import annotations

from dataclasses import dataclass

from tms_hbase.model.rows import RowHeader


def bounded_publish_time(now: int, predecessor: int, skew_ms: int) -> tuple[int, bool]:
    """The publish time of a new row after a predecessor's (ms), and whether the predecessor was ignored
    for being more than ``skew_ms`` ahead of ``now``."""
    if predecessor > now + skew_ms:
        return now + skew_ms, True
    return max(now, predecessor), False


@dataclass(frozen=True)
class RowTime:
    """What a row's publish time says, checked against the time HBase stored it."""

    future_dated: bool  # dated more than 2 x skew after it was stored: not a correct writer's row
    ahead_ms: int  # how far the publish time is past the cell timestamp (may be negative)
    effective_time: int  # the time its TTL counts from: min(publish time, stored + 2 x skew)


def check_row_time(header: RowHeader, stored_ms: int, skew_ms: int) -> RowTime:
    """Classify a message row by its header and its cell timestamp ``stored_ms`` (what the sweeper and
    ``tms-admin`` inspection report)."""
    limit = stored_ms + 2 * skew_ms
    return RowTime(header.publish_time > limit, header.publish_time - stored_ms, min(header.publish_time, limit))
