"""Times on the command line: milliseconds since the epoch, ISO 8601 or a duration ago (``-5m``), shown
back as UTC ISO 8601; and durations (``90``, ``15m``, ``1h30m``, ``7d``) as whole seconds."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from tms_hbase.errors import InvalidArgument

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DURATION = re.compile(r"(?:[0-9]+[smhdw])+")
_PART = re.compile(r"([0-9]+)([smhdw])")
DURATION_HELP = "seconds, or a duration such as 90s, 15m, 1h30m, 7d or 2w"
TIME_HELP = "ms since the epoch, ISO 8601 such as 2024-05-01T12:00:00Z, or a duration ago such as -5m or -1h"


def parse_duration(text: str, what: str = "duration") -> int:
    """``3600`` (seconds) or ``1h`` (units s, m, h, d, w, combined as in ``1h30m``) → whole seconds."""
    if text.isascii() and text.isdigit():
        return int(text)
    if text.isascii() and _DURATION.fullmatch(text):
        return sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(text))
    raise InvalidArgument(f"bad {what} {text!r}: expected {DURATION_HELP}")


def parse_time(text: str) -> int:
    """``1700000000000`` (ms since the epoch), ``2024-05-01T12:00:00Z`` (ISO 8601; UTC if no zone) or
    ``-5m`` (that long before now) → ms."""
    if text.isascii() and text.isdigit():
        return int(text)
    if text.startswith("-") and text.isascii() and _DURATION.fullmatch(text[1:]):
        return int(time.time() * 1000) - parse_duration(text[1:]) * 1000
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"bad time {text!r}: expected {TIME_HELP}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def iso(ms: int | None) -> str | None:
    """A time in ms as UTC ISO 8601 with milliseconds (None stays None; one outside years 1-9999, as an
    older version could store, is shown as its number of ms)."""
    if ms is None:
        return None
    try:
        when = datetime.fromtimestamp(ms / 1000, UTC)
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms (out of range)"
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
