"""Times on the command line: milliseconds since the epoch or ISO 8601, shown back as UTC ISO 8601."""

from __future__ import annotations

from datetime import UTC, datetime

from tms_hbase.errors import InvalidArgument


def parse_time(text: str) -> int:
    """``1700000000000`` (ms since the epoch) or ``2024-05-01T12:00:00Z`` (ISO 8601; UTC if no zone) → ms."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidArgument(
            f"bad time {text!r}: expected milliseconds since the epoch or ISO 8601 such as 2024-05-01T12:00:00Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def iso(ms: int | None) -> str | None:
    """A time in ms as UTC ISO 8601 with milliseconds (None stays None)."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
