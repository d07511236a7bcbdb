"""``python -m tests.verify``: one verification run (see ``tests/verify/runner.py`` for its phases)."""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable

from tms_hbase.config import THRIFT_ENV

from .nemesis import FAULTS

EPILOG = f"""\
faults (comma-separated, or 'none' for a calibration run without faults):
  kill    SIGKILL of writers, readers, consumers, probes, the sweeper, the transaction server
  stop    SIGSTOP, then SIGCONT 0.5-6 s later
  clock   per-process wall-clock offsets (a few seconds, or up to +-60 s) and jumps, with libfaketime
  proxy   the Thrift connection stalled, reset or cut through a TCP proxy, then restored
  hbase   SIGKILL and restart of HBase itself: needs --own-hbase (a private standalone HBase; the shared
          one is never restarted). Run it alone once, as a calibration of what standalone HBase's local
          file-system WAL can lose.

examples:
  python -m tests.verify --duration 60 --faults none                # calibration
  python -m tests.verify --duration 150 --seed 7 --faults kill,stop,clock,proxy --orderings chain,sequencer
  python -m tests.verify --duration 600 --faults hbase --own-hbase  # HBase crashes alone

The run folder (default .verify/<time>-seed<N>/) keeps config.json, history/*.jsonl (one JSON line per
event), logs/ and summary.json. The exit code is 1 if the checker found any anomaly. HBase: ${THRIFT_ENV}
or --thrift, else the local launcher's (`tms-admin hbase start`), started for the run if needed, as `make test` does.
"""


def _list(allowed: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        items = [] if text in ("", "none") else [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if x not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {bad}: choose from {', '.join(allowed)}")
        return items

    return parse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tests.verify",
        description="Fault-injection verification of tms-hbase: a workload of real processes under "
        "faults, every operation recorded, a checker over the history.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--duration", type=float, default=60.0, help="seconds of workload under faults [60]")
    p.add_argument("--seed", type=int, default=None, help="seed of every random choice [random; printed]")
    p.add_argument(
        "--faults",
        type=_list(FAULTS),
        default=["kill", "stop", "clock", "proxy"],
        help="faults to inject [kill,stop,clock,proxy]",
    )
    p.add_argument(
        "--orderings",
        type=_list(("chain", "sequencer")),
        default=["chain", "sequencer"],
        help="topic orderings [chain,sequencer]",
    )
    p.add_argument(
        "--writers", type=int, default=2, help="long-lived writer processes [2] (short-lived ones come and go besides)"
    )
    p.add_argument("--consumers", type=int, default=1, help="consumer processes [1]")
    p.add_argument(
        "--tx",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="transactional topics, writer, reader and the transaction server [on]",
    )
    p.add_argument(
        "--bound",
        type=float,
        default=30.0,
        help="seconds after the faults heal within which every reader must see every acknowledged message [30]",
    )
    p.add_argument("--seeks", type=int, default=15, help="time seeks per topic in the quiet final phase [15]")
    p.add_argument("--fault-min", type=float, default=1.0, help="least seconds between two faults [1]")
    p.add_argument("--fault-max", type=float, default=4.0, help="most seconds between two faults [4]")
    p.add_argument(
        "--hbase-gap",
        type=float,
        default=0.0,
        help="least seconds HBase serves between two hbase faults [0]; a restart on a busy machine takes minutes, "
        "so without a gap HBase is down for most of a run and the other faults meet little work",
    )
    p.add_argument(
        "--max-skew",
        type=float,
        default=60.0,
        help="largest clock offset of a process, seconds, either way [60]; half of the processes get at most 3",
    )
    p.add_argument(
        "--tail-cache-seconds",
        type=int,
        help="store this tail-cache setting C in the new installation (the sweeper's smallest grace is 4 C) [none "
        "stored: the quickstart's path, where writers and readers take 1 s and the sweeper 30 s (grace 120 s)]",
    )
    p.add_argument("--timeout", type=float, default=5.0, help="each process's MessagingClient timeout, seconds [5]")
    p.add_argument(
        "--thrift",
        help=f"HBase Thrift address [${THRIFT_ENV}, else the local launcher's HBase, started for the run if it is not "
        "running (and stopped after)]",
    )
    p.add_argument(
        "--own-hbase",
        action="store_true",
        help="run on a private standalone HBase started for this run (needed by --faults hbase)",
    )
    p.add_argument("--skip", type=_list(("sweeper",)), default=[], help="leave out a part of the workload (sweeper)")
    p.add_argument("--run-dir", help="where to keep the run [.verify/<time>-seed<N>]")
    p.add_argument("--keep-tables", action="store_true", help="keep the run's tables (default: dropped at the end)")
    p.add_argument("--check", metavar="RUN_DIR", help="only check the history of an earlier run again")
    return p


def main(argv: list[str] | None = None) -> int:
    opts = parser().parse_args(argv)
    if opts.check:
        import json
        from pathlib import Path

        from .checker import check
        from .history import read_history
        from .runner import print_summary

        run = Path(opts.check)
        config = json.loads((run / "config.json").read_text())
        summary = check(read_history(run), {t["name"]: t for t in config["topics"]})
        summary.update({"seed": config["seed"], "command": " ".join(config["argv"]), "run_dir": str(run), "seconds": 0})
        print_summary(summary)
        return 0 if summary["valid"] else 1
    if opts.seed is None:
        opts.seed = random.SystemRandom().randrange(1, 10**6)
    from .runner import main as run_main

    return run_main(opts)


if __name__ == "__main__":
    sys.exit(main())
