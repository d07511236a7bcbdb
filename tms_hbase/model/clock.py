"""Wall-clock milliseconds, the time unit of publish times and TTLs."""

from __future__ import annotations

import time

from tms_hbase.errors import InvalidArgument

MAX_TIME_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: later is no date, and would overflow HBase's longs
_SECONDS_LOOKALIKE = range(10**9, 10**11)  # 2001 to 5138 in seconds; as ms, days to years after 1970


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def check_time_ms(name: str, value: object) -> int:
    """``value`` as a time in ms since the epoch, else InvalidArgument: not a whole number, negative, past
    the year 9999, or one that looks like seconds (``time.time()`` where ms were meant: read as ms it is
    a date in January 1970, and a time seek there would silently read everything)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TIME_MS:
        raise InvalidArgument(f"bad {name} {value!r}: expected milliseconds since the epoch, 0 to {MAX_TIME_MS}")
    if value in _SECONDS_LOOKALIKE:
        raise InvalidArgument(
            f"bad {name} {value}: that is {value} ms after 1970-01-01, which looks like seconds since the epoch; "
            f"give milliseconds (e.g. {value * 1000})"
        )
    return value
