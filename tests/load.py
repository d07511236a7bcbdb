"""Run a command on a loaded machine: CPU-burning processes beside it keep the load average at or above a
floor for its whole run, the way a developer's laptop or a shared CI runner is loaded.

    python -m tests.load [--burners N] [--floor LOAD] [--settle SECONDS] -- COMMAND [ARG...]

``--burners`` busy-looping processes (default: 3 per core and one more, 7 on 2 cores) start first; the command
starts once the 1-minute load average has reached ``--floor`` (default 6, below what the burners alone hold it
at, so it stays there for the whole run; waited for up to ``--settle`` seconds: the load average is a one-minute
mean, which 7 burners on a quiet machine lift to 6 in about two minutes).
The burners are stopped when the command ends, whatever its outcome; the exit code is the command's. The
lowest and highest load average seen during the run are printed at the end, with the run's duration
(`make test-loaded`, which CI runs).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time


def burn() -> None:
    """One process's worth of runnable CPU work, until killed."""
    while True:
        pass


def load_average() -> float:
    return os.getloadavg()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.load", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--burners", type=int, default=3 * (os.cpu_count() or 2) + 1, help="busy processes (3 a core and one more)"
    )
    parser.add_argument("--floor", type=float, default=6.0, help="load average to reach before the command")
    parser.add_argument("--settle", type=float, default=180.0, help="longest wait for the floor, in seconds")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # killed: still stop the burners (finally below)
    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(args.burners)]
    for burner in burners:
        burner.start()
    seen: list[float] = []
    done = threading.Event()
    try:
        give_up = time.monotonic() + args.settle
        while load_average() < args.floor and time.monotonic() < give_up:
            time.sleep(2)
        print(
            f"load: {args.burners} burners, load average {load_average():.1f}; running {' '.join(command)}",
            file=sys.stderr,
            flush=True,
        )

        def watch() -> None:
            while not done.wait(5):
                seen.append(load_average())

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        started = time.monotonic()
        status = subprocess.call(command)
        done.set()
        watcher.join()
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.join()
    low, high = (min(seen), max(seen)) if seen else (float("nan"), float("nan"))
    print(
        f"load: the command took {time.monotonic() - started:.0f} s with the load average between {low:.1f} and"
        f" {high:.1f} (floor {args.floor:g}); exit code {status}",
        file=sys.stderr,
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
