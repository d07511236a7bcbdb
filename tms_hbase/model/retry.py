"""One retry policy for every place that retries: the connection pool, compare-and-set loops, a writer
whose answer was lost, the background publisher, region listing and the transaction client.

A :class:`Retry` says how many attempts a call gets, how long to wait between them (exponential
backoff with full jitter, so clients that failed together do not come back together) and which errors
qualify: by default those whose class says ``retriable`` (see :mod:`tms_hbase.errors`), so a refusal
that can never succeed is not repeated. Loops that must do more than call again (a writer re-checking
the position it aimed at) use :meth:`Retry.pause` between their own attempts.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from tms_hbase.errors import InvalidArgument
from tms_hbase.runtime import green

log = logging.getLogger(__name__)
T = TypeVar("T")


def is_retriable(error: BaseException) -> bool:
    """What errors say about themselves: ``retriable`` on tms-hbase errors, False for anything else."""
    return bool(getattr(error, "retriable", False))


@dataclass(frozen=True)
class Retry:
    """How to retry: ``attempts`` tries in all (1 = never retry), waiting ``backoff_seconds`` × 2^(n-1)
    (at most ``max_backoff_seconds``) after the n-th failure, a random part of it if ``jitter``;
    ``retry_if`` decides which errors qualify (default :func:`is_retriable`)."""

    attempts: int = 3
    backoff_seconds: float = 0.05
    max_backoff_seconds: float = 2.0
    jitter: bool = True
    retry_if: Callable[[BaseException], bool] = is_retriable

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise InvalidArgument(f"bad retry attempts {self.attempts!r}: expected an integer >= 1")
        for name in ("backoff_seconds", "max_backoff_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise InvalidArgument(f"bad retry {name} {value!r}: expected seconds >= 0")

    @classmethod
    def never(cls) -> Retry:
        """One attempt, no retry."""
        return cls(attempts=1)

    def with_(self, **changes: Any) -> Retry:
        """A copy with some fields changed, e.g. ``policy.with_(attempts=5)``."""
        return replace(self, **changes)

    def delay(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failed attempt."""
        ceiling = min(self.max_backoff_seconds, self.backoff_seconds * 2 ** max(0, failures - 1))
        return random.uniform(0, ceiling) if self.jitter else ceiling

    def pause(
        self,
        error: BaseException,
        failures: int,
        *,
        what: str = "call",
        deadline: float | None = None,
        sleep: Callable[[float], None] = green.sleep,
    ) -> bool:
        """After the ``failures``-th failure (with ``error``): False to give up (the error does not
        qualify, the attempts are used up, or waiting would pass ``deadline``, a ``time.monotonic()``
        value); otherwise wait the backoff and return True."""
        if failures >= self.attempts or not self.retry_if(error):
            return False
        wait = self.delay(failures)
        if deadline is not None and time.monotonic() + wait >= deadline:
            return False
        log.info("%s failed (%s); attempt %d of %d in %.3fs", what, error, failures + 1, self.attempts, wait)
        sleep(wait)
        return True

    def call(
        self,
        fn: Callable[[], T],
        *,
        what: str = "call",
        deadline: float | None = None,
        sleep: Callable[[float], None] = green.sleep,
    ) -> T:
        """``fn()``, tried again after each qualifying failure until it succeeds or the policy gives up
        (then the last error is raised)."""
        failures = 0
        while True:
            try:
                return fn()
            except Exception as error:
                failures += 1
                if not self.pause(error, failures, what=what, deadline=deadline, sleep=sleep):
                    raise
