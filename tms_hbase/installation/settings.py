"""The installation's tail-cache setting in the metadata table (its value and rules:
:mod:`tms_hbase.model.tail_cache`): how long writers trust a remembered tail, and so the smallest
grace the sweeper may use (docs/guarantees.md has the derivation).

It lives in a reserved row of the metadata table (``SETTINGS_KEY``, ``!installation``), as JSON.

One number ``C`` (``tail_cache_seconds``) bounds three things: how long a writer publishes after a
remembered tail without re-reading it, how long a writer may pause between checking that and its put
reaching HBase, and how far two hosts' clocks may differ. The sweeper then needs a grace of at least
``C + 2 x pause + skew``, so at least ``GRACE_FACTOR x C``.

Changing ``C`` on a live installation: writers re-read the row every second, but one may still hold the
old value. For one transition (``GRACE_FACTOR x`` the larger of the two values) after a change, writers use
the smaller value and sweepers the larger, so either direction is safe; a second change is refused until
the transition is over. With no row at all (tables made by a client, or an older installation) each
side assumes its worst case: writers 1 s, the sweeper 30 s; so a first value of up to 30 s applies at
once, and a larger one is a raise from 30.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from tms_hbase.errors import ConcurrentModification, CorruptData, InvalidArgument
from tms_hbase.installation.metadata import COLUMN
from tms_hbase.model.clock import now_ms
from tms_hbase.model.tail_cache import (
    DEFAULT_TAIL_CACHE_SECONDS,
    MIN_TAIL_CACHE_SECONDS,
    SETTINGS_KEY,
    TailCacheSetting,
    iso_time,
    sweeper_tail_cache,
    validate_tail_cache,
    writer_tail_cache,
)
from tms_hbase.storage.hbase import Table

log = logging.getLogger(__name__)

WRITER_REFRESH_SECONDS = 1.0  # how old a writer's copy of the setting may be


class InstallationStore:
    """Reads and compare-and-sets the reserved settings row of one metadata table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def read(self) -> TailCacheSetting | None:
        """The stored setting, or None if the installation has none yet."""
        data = self.raw()
        return None if data is None else TailCacheSetting.decode(data)

    def set_tail_cache(self, seconds: int, now: Callable[[], int] = now_ms) -> TailCacheSetting:
        """Store a new value; the first value needs no transition, a change starts one.

        InvalidArgument if the value is out of range or a previous change is still in transition;
        ConcurrentModification if someone else changed the row at the same time.
        """
        seconds = validate_tail_cache(seconds)
        raw = self.raw()
        old = None if raw is None else _decoded_or_none(raw)
        if old is not None and old.tail_cache_seconds == seconds:
            return old
        at = now()
        if old is None:
            # writers assumed 1 s and sweepers 30 s: up to 30 s applies at once; more is a raise from 30
            new = TailCacheSetting(seconds) if seconds <= DEFAULT_TAIL_CACHE_SECONDS else _raised(seconds, at)
        elif old.in_transition(at):
            raise InvalidArgument(
                f"tail-cache-seconds is still in transition after the previous change "
                f"({old.previous} -> {old.tail_cache_seconds} s at {iso_time(old.changed_at)}); "
                f"it can be changed again after {iso_time(old.transition_ends())}"
            )
        else:
            new = TailCacheSetting(seconds, old.tail_cache_seconds, at)
        if not self.table.compare_and_set(SETTINGS_KEY, COLUMN, raw, new.encode()):
            raise ConcurrentModification("tail-cache-seconds was changed by someone else at the same time; look again")
        return new

    def raw(self) -> bytes | None:
        """The stored bytes of the row, or None."""
        return self.table.get_cell(SETTINGS_KEY, COLUMN)


def _raised(seconds: int, at: int) -> TailCacheSetting:
    return TailCacheSetting(seconds, DEFAULT_TAIL_CACHE_SECONDS, at)


def _decoded_or_none(raw: bytes) -> TailCacheSetting | None:
    """A corrupt row as if there were none: writers then trusted tails for 1 s (and sweepers refused to
    run), so replacing it is at least as safe as writing a first value."""
    try:
        return TailCacheSetting.decode(raw)
    except CorruptData as exc:
        log.warning("%s", exc)
        return None


class WriterSettings:
    """A client's copy of the setting, re-read when older than a second (thread-safe).

    Both values it answers are worked out once per copy, with the time they hold until (a second after
    the read began, or the end of a transition if that comes first; then they are worked out again by
    this host's clock): every publish asks for them, and then reads one tuple."""

    def __init__(self, store: InstallationStore) -> None:
        self.store = store
        # (time.monotonic() the values hold until, the writers' tail-cache time, the readers' skew bound)
        self._copy: tuple[float, int, int] = (-math.inf, MIN_TAIL_CACHE_SECONDS, DEFAULT_TAIL_CACHE_SECONDS)

    def tail_cache_seconds(self) -> int:
        """How long a remembered tail may be trusted now (what writers use: during a change the smaller
        value, and 1 s while the installation has no setting)."""
        until, trust, _ = self._copy
        return trust if time.monotonic() < until else self._read()[1]

    def skew_bound_seconds(self) -> int:
        """The clock-skew bound readers must allow for now: the sweeper's value (during a change the
        larger one, and 30 s while the installation has no setting), so that it covers every writer's."""
        until, _, bound = self._copy
        return bound if time.monotonic() < until else self._read()[2]

    def _read(self) -> tuple[float, int, int]:
        """Read the setting again and work out both values (one tuple, replaced at once: no lock)."""
        read_at = time.monotonic()
        raw = self.store.raw()
        setting = None if raw is None else _decoded_or_none(raw)
        now = now_ms()
        until = read_at + WRITER_REFRESH_SECONDS
        ends = None if setting is None else setting.transition_ends()
        if ends is not None and now < ends:  # the values change when the transition ends
            until = min(until, time.monotonic() + (ends - now) / 1000)
        copy = (until, writer_tail_cache(setting, now), sweeper_tail_cache(setting, now))
        self._copy = copy
        return copy
