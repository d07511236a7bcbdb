"""The installation's tail-cache setting as a value: how long writers trust a remembered tail, the sweeper's
smallest grace that follows from it, and the rules of a change in transition (docs/guarantees.md has the
derivation; :mod:`tms_hbase.installation.settings` reads and writes it). No I/O.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

from tms_hbase.errors import CorruptData, InvalidArgument

# The installation's settings row of the metadata table: ``!`` is no topic-name character and the key has
# no ``:``, so no topic key (``namespace:topic:``) can ever be equal to it.
SETTINGS_KEY = b"!installation"
DEFAULT_TAIL_CACHE_SECONDS = 30
MIN_TAIL_CACHE_SECONDS = 1
MAX_TAIL_CACHE_SECONDS = 86_400
GRACE_FACTOR = 4  # minimum grace = C (trust) + 2 x C (pauses of two writers) + C (clock skew)


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
        changed, ends = iso_time(setting.changed_at), iso_time(setting.transition_ends())
        why += f", the value before the change of {changed}, until {ends}"
    raise InvalidArgument(
        f"grace {grace_seconds:g} s is too small for this installation: the minimum is {least} s ({why}); "
        "a smaller grace could let a writer reuse a freed position (docs/guarantees.md)"
    )


def iso_time(ms: int | None) -> str:
    """A time in ms since the epoch as an ISO 8601 UTC second, for messages."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((ms or 0) / 1000))


def validate_tail_cache(seconds: object) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise InvalidArgument(f"bad tail-cache seconds {seconds!r}: expected a whole number")
    if not MIN_TAIL_CACHE_SECONDS <= seconds <= MAX_TAIL_CACHE_SECONDS:
        raise InvalidArgument(
            f"bad tail-cache seconds {seconds}: expected {MIN_TAIL_CACHE_SECONDS} to {MAX_TAIL_CACHE_SECONDS}"
        )
    return seconds
