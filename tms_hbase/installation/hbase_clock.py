"""HBase's clock as this process sees it: the one clock that every writer, reader and consumer of an
installation can agree on, whatever their hosts' clocks say (docs/guarantees.md, "Clocks").

A probe writes one cell into the installation row of the metadata table and reads back the timestamp
HBase gave it (the region server's clock when the put was applied). From then on HBase's time is that
timestamp plus the monotonic time elapsed since the put returned, so a host clock that is wrong, or
is stepped, changes nothing; the probe is repeated every ``REFRESH_SECONDS``. The value is a lower
bound of HBase's clock, off by at most the probe's round trip (recorded as ``uncertainty_ms``).

What uses it:

* writers (:class:`PublishClock`) date a publish by the host's clock while it lies within half the
  tail-cache time of HBase's, and otherwise by the nearest time inside that band, with a warning that
  names the writer and a metric, so two writers' dates never differ by more than the clock-skew bound
  the time seek assumes;
* readers decide from it when a hole below a row is due to be filled (H after HBase stored that row),
  which a reader in a new process can do as well as one that has been watching the hole.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from tms_hbase.model.clock import now_ms
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.runtime import green
from tms_hbase.storage.hbase import Table

log = logging.getLogger(__name__)

REFRESH_SECONDS = 30.0  # how long a probe is trusted (monotonic clocks drift by parts per million)
SKEW_WARNING_SECONDS = 60.0  # a host clock clamped again warns at most this often
PROBES = 2  # probes per reading of HBase's clock at most, the faster kept
GOOD_UNCERTAINTY_MS = 100  # a probe this fast is kept at once


@dataclass(frozen=True)
class _Anchor:
    hbase_ms: int  # the probe cell's timestamp
    monotonic: float  # time.monotonic() when the probe's put returned
    uncertainty_ms: int  # the put's round trip: HBase's clock was at most this far ahead of the estimate
    offset_ms: int  # HBase's clock minus this host's wall clock at the probe


class HBaseClock:
    """HBase's clock (ms since the epoch) from periodic probes; thread-safe, probes lazily."""

    def __init__(self, table: Table, key: bytes, column: bytes) -> None:
        self.table = table
        self.key = key
        self.column = column
        self._anchor: _Anchor | None = None
        self._lock = green.lock()

    def now_ms(self) -> int:
        """A lower bound of HBase's clock now, at most the probe's round trip behind it."""
        return self.reading()[0]

    def reading(self) -> tuple[int, int]:
        """:meth:`now_ms` and how far HBase's clock may be ahead of it (the probe's round trip), from one
        probe."""
        anchor, now = self._anchor, time.monotonic()
        if anchor is None or now - anchor.monotonic >= REFRESH_SECONDS:
            anchor, now = self._current(), time.monotonic()
        return anchor.hbase_ms + int((now - anchor.monotonic) * 1000), anchor.uncertainty_ms

    def _current(self) -> _Anchor:
        anchor = self._anchor
        if anchor is not None and time.monotonic() - anchor.monotonic < REFRESH_SECONDS:
            return anchor
        with self._lock:
            anchor = self._anchor
            if anchor is not None and time.monotonic() - anchor.monotonic < REFRESH_SECONDS:
                return anchor
            try:
                anchor = self._best_probe()
            except Exception:
                if self._anchor is None:
                    raise
                # keep extrapolating the old probe (the monotonic clock keeps counting); try again next time
                log.info(
                    "could not read HBase's clock; extrapolating the probe of %.0f s ago",
                    time.monotonic() - self._anchor.monotonic,
                )
                return self._anchor
            self._anchor = anchor
            CLIENT_METRICS.clock_offset.set(anchor.offset_ms / 1000)
            return anchor

    def _best_probe(self) -> _Anchor:
        """The probe with the smallest round trip of up to ``PROBES`` (a loaded link or server makes a
        slow one; the uncertainty is what every date band must allow for)."""
        best = self._probe()
        for _ in range(PROBES - 1):
            if best.uncertainty_ms <= GOOD_UNCERTAINTY_MS:
                break
            best = min(best, self._probe(), key=lambda anchor: anchor.uncertainty_ms)
        return best

    def _probe(self) -> _Anchor:
        sent = time.monotonic()
        self.table.put(self.key, {self.column: b""})
        returned = time.monotonic()
        local = now_ms()
        found = self.table.get_versions(self.key, self.column, 1)
        if not found:  # (deleted between the put and the read: the installation is being dropped)
            raise LookupError("the clock probe's cell vanished")
        stamp = found[0][1]
        return _Anchor(stamp, returned, int((returned - sent) * 1000) + 1, stamp - local)


class PublishClock:
    """The time a writer dates a publish with: its host's clock, kept within half the installation's
    clock-skew bound of HBase's (the band allows for the probe's uncertainty, so two writers' dates
    differ by at most that bound plus their real difference in time). A host clock outside
    the band is reported: a warning naming the writer and the skew (at most once a minute), and the
    ``tms_client_clock_clamped_total`` counter."""

    def __init__(self, hbase: HBaseClock, skew_bound_ms: Callable[[], int], writer: str) -> None:
        self.hbase = hbase
        self.skew_bound_ms = skew_bound_ms
        self.writer = writer
        self.clamped = 0
        self._warned_at = -SKEW_WARNING_SECONDS

    def now_ms(self) -> int:
        local = now_ms()
        (hbase, uncertainty), half = self.hbase.reading(), self.skew_bound_ms() // 2
        # HBase's clock is in [hbase, hbase + uncertainty]: a date in [hbase + uncertainty - half, hbase + half]
        # is within half the bound of it whatever the uncertainty, so two writers' dates are within the bound
        low, high = min(hbase + uncertainty - half, hbase + half // 2), hbase + half
        bound = (high - low) // 2
        if low <= local <= high:
            return local
        dated = min(max(local, low), high)
        self.clamped += 1
        CLIENT_METRICS.clock_clamped.inc()
        if time.monotonic() - self._warned_at >= SKEW_WARNING_SECONDS:
            self._warned_at = time.monotonic()
            log.warning(
                "writer %s: this host's clock is %+.3f s off HBase's, more than the %.3f s allowed "
                "(half the clock-skew bound, the tail-cache time); dating publishes %+.3f s from the host clock. "
                "Fix the host's clock (NTP)",
                self.writer,
                (local - hbase) / 1000,
                bound / 1000,
                (dated - local) / 1000,
            )
        return dated
