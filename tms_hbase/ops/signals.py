"""Stopping a daemon or a long command on SIGTERM/SIGINT without the deadlock a plain handler risks.

Python runs a signal handler in the main thread between two bytecodes, wherever that thread is. A daemon's
main thread spends its life in ``Event.wait`` on the event the handler sets, and ``Event.wait`` holds the
event's lock for a few bytecodes on the way in and out: a handler that calls ``Event.set`` there waits for a
lock its own thread holds, for ever (the daemon then ignores every later SIGTERM; seen as a transaction server
that did not stop under load). So the handler only starts a thread, which does the stopping.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def on_stop_signals(stop: Callable[[], None]) -> None:
    """Call ``stop()`` on SIGTERM or SIGINT, from a thread of its own (see the module)."""

    def handler(_signum: int, _frame: object) -> None:
        threading.Thread(target=stop, name="stop-signal", daemon=True).start()

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)


def stop_event() -> threading.Event:
    """An event set on SIGTERM or SIGINT (safely: see the module)."""
    stop = threading.Event()
    on_stop_signals(stop.set)
    return stop
