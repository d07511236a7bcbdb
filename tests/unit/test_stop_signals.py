"""A daemon stops on SIGTERM even when the signal lands while its main thread holds the lock of the event it
waits on (inside ``Event.wait``), where a handler that sets the event itself would wait for ever."""

from __future__ import annotations

import subprocess
import sys

# The signal is raised while the main thread holds the event's lock, as Event.wait does on its way in and out;
# the handler runs at the next bytecode, still under that lock.
IN_THE_WINDOW = """
import os, signal, sys, threading
from tms_hbase.ops.signals import stop_event
{make}
with stop._cond:  # (Event's private condition: the lock Event.wait holds for a few bytecodes)
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(1000):
        pass
print(stop.wait(60))
"""


def _run(make: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", IN_THE_WINDOW.format(make=make)], capture_output=True, text=True, timeout=120
    )


def test_a_stop_signal_landing_under_the_events_lock_still_stops() -> None:
    done = _run("stop = stop_event()")
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr
