"""The installation's tail-cache setting: how long writers trust a remembered tail, and so the smallest
grace the sweeper may use (docs/guarantees.md has the derivation).

It lives in a reserved row of the metadata table (``metadata.SETTINGS_KEY``, ``!installation``), as JSON.

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

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from tms_hbase.errors import ConcurrentModification, CorruptData, InvalidArgument
from tms_hbase.installation.metadata import COLUMN, SETTINGS_KEY
from tms_hbase.model.clock import now_ms
from tms_hbase.storage.hbase import Table

log = logging.getLogger(__name__)

DEFAULT_TAIL_CACHE_SECONDS = 30
MIN_TAIL_CACHE_SECONDS = 1
MAX_TAIL_CACHE_SECONDS = 86_400
GRACE_FACTOR = 4  # minimum grace = C (trust) + 2 x C (pauses of two writers) + C (clock skew)
WRITER_REFRESH_SECONDS = 1.0  # how old a writer's copy of the setting may be


@dataclass(frozen=True)
class TailCacheSetting:
    """The stored setting: the value, and the previous one with the time it changed (the changer's clock)."""

    tail_cache_seconds: int
    previous: int | None = None
    changed_at: int | None = None  # ms since the epoch

    def transition_ends(self) -> int | None:
        """When writers and sweepers stop honouring the previous value (ms), or None if there is none."""
        if self.previous is None or self.changed_at is None:
            return None
        return self.changed_at + GRACE_FACTOR * max(self.previous, self.tail_cache_seconds) * 1000

    def in_transition(self, now: int) -> bool:
        ends = self.transition_ends()
        return ends is not None and now < ends

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> TailCacheSetting:
        try:
            setting = cls(**json.loads(data))
            validate_tail_cache(setting.tail_cache_seconds)
            if setting.previous is not None:
                validate_tail_cache(setting.previous)
            if setting.changed_at is not None and (
                isinstance(setting.changed_at, bool) or not isinstance(setting.changed_at, int)
            ):
                raise TypeError(f"changed_at {setting.changed_at!r} is not a time in ms")
        except (ValueError, TypeError) as exc:
            raise CorruptData(
                f"corrupt installation row {SETTINGS_KEY.decode()!r} in the metadata table ({exc}); "
                "rewrite it with tms-admin init --tail-cache-seconds N"
            ) from None
        return setting


def writer_tail_cache(setting: TailCacheSetting | None, now: int) -> int:
    """Seconds a writer may trust a remembered tail: during a transition the smaller value."""
    if setting is None:
        return MIN_TAIL_CACHE_SECONDS
    if setting.in_transition(now):
        assert setting.previous is not None
        return min(setting.previous, setting.tail_cache_seconds)
    return setting.tail_cache_seconds


def sweeper_tail_cache(setting: TailCacheSetting | None, now: int) -> int:
    """The tail-cache time the sweeper must allow for: during a transition the larger value."""
    if setting is None:
        return DEFAULT_TAIL_CACHE_SECONDS
    if setting.in_transition(now):
        assert setting.previous is not None
        return max(setting.previous, setting.tail_cache_seconds)
    return setting.tail_cache_seconds


def minimum_grace(setting: TailCacheSetting | None, now: int) -> int:
    """The smallest grace (seconds) a sweeper may use now."""
    return GRACE_FACTOR * sweeper_tail_cache(setting, now)


def check_grace(grace_seconds: float, setting: TailCacheSetting | None, now: int) -> None:
    """InvalidArgument, naming the minimum, if ``grace_seconds`` is too small for this installation."""
    least = minimum_grace(setting, now)
    if grace_seconds >= least:
        return
    cache = sweeper_tail_cache(setting, now)
    why = f"{GRACE_FACTOR} x tail-cache-seconds {cache}"
    if setting is None:
        why += " (the default: the installation has no tail-cache setting; set one with tms-admin init)"
    elif setting.in_transition(now):
        why += f", the value before the change of {_iso(setting.changed_at)}, until {_iso(setting.transition_ends())}"
    raise InvalidArgument(
        f"grace {grace_seconds:g} s is too small for this installation: the minimum is {least} s ({why}); "
        "a smaller grace could let a writer reuse a freed position (docs/guarantees.md)"
    )


def _iso(ms: int | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((ms or 0) / 1000))


def validate_tail_cache(seconds: object) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise InvalidArgument(f"bad tail-cache seconds {seconds!r}: expected a whole number")
    if not MIN_TAIL_CACHE_SECONDS <= seconds <= MAX_TAIL_CACHE_SECONDS:
        raise InvalidArgument(
            f"bad tail-cache seconds {seconds}: expected {MIN_TAIL_CACHE_SECONDS} to {MAX_TAIL_CACHE_SECONDS}"
        )
    return seconds


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
                f"({old.previous} -> {old.tail_cache_seconds} s at {_iso(old.changed_at)}); "
                f"it can be changed again after {_iso(old.transition_ends())}"
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
