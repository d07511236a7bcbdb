"""Wall-clock milliseconds, the time unit of publish times and TTLs."""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000
