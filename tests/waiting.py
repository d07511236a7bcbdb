"""Waiting in tests: on a condition, with a deadline, never a bare sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T | None],
    what: str,
    timeout: float = 30.0,
    *,
    interval: float = 0.05,
    ignore: tuple[type[Exception], ...] = (),
) -> T:
    """The first truthy value of ``condition()`` within ``timeout`` seconds, else AssertionError naming ``what``.

    An exception of a type in ``ignore`` counts as "not yet" (a server not listening yet, a page element not
    there yet); the last one is named in the error."""
    deadline = time.monotonic() + timeout
    while True:
        error: Exception | None = None
        try:
            value = condition()
        except ignore as exc:
            value, error = None, exc
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:g}s waiting for {what}" + (f" (last error: {error})" if error else "")
            )
        time.sleep(interval)
