"""Run the same workloads on tms-hbase, Kafka, NATS JetStream and Redis Streams and print a markdown report.

    python -m bench.peers [--only SYSTEM,...] [--workloads NAME,...] [--quick] [--rounds N] [--json OUT]

Systems: tms (tms-hbase on the running HBase), kafka, nats, redis. Workloads: publish, consume, latency,
tx, seek, queue, keyed. Every peer server is started here on loopback in a temp dir and stopped at the end, also on
failure or Ctrl-C. Progress goes to stderr, the report to stdout. The exit code is 0 when everything
ran, 1 when a system or workload failed (the report of the others is still printed and names what
failed), 2 for bad arguments, 130 when interrupted (with the report of what finished).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import time
from contextlib import ExitStack

from ..common import Settings, check_loopback, progress
from ..report import busy_pytest
from . import system
from .report import Report
from .workloads import WORKLOADS, Run, warm_up


def _names(parser: argparse.ArgumentParser, text: str | None, known: list[str], what: str) -> list[str]:
    if not text:
        return known
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        parser.error(f"unknown {what} {', '.join(unknown) or repr(text)}; choose from {', '.join(known)}")
    return [n for n in known if n in names]  # the canonical order


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n")[0])
    parser.add_argument("--only", metavar="SYSTEM", help=f"comma-separated subset of: {', '.join(system.SYSTEMS)}")
    parser.add_argument("--workloads", metavar="NAME", help=f"comma-separated subset of: {', '.join(WORKLOADS)}")
    parser.add_argument("--quick", action="store_true", help="small counts and 1 round: checks that it all works")
    parser.add_argument("--rounds", type=int, help="rounds per case (default 3, 1 with --quick)")
    parser.add_argument("--json", metavar="OUT", help="also write every sample to this JSON file")
    parser.add_argument(
        "--address",
        default=os.environ.get("TMS_HBASE_THRIFT", "127.0.0.1:9090"),
        help="tms-hbase's HBase Thrift gateway on loopback (default $TMS_HBASE_THRIFT or 127.0.0.1:9090)",
    )
    args = parser.parse_args(argv)
    args.systems = _names(parser, args.only, list(system.SYSTEMS), "system")
    args.workload_names = _names(parser, args.workloads, list(WORKLOADS), "workload")
    if args.rounds is not None and not 1 <= args.rounds <= 20:
        parser.error("--rounds must be between 1 and 20")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_loopback(args.address)
    settings = Settings(address=args.address, quick=args.quick, rounds=args.rounds or (1 if args.quick else 3))
    command = "python -m bench.peers " + shlex.join(sys.argv[1:] if argv is None else argv)
    report = Report(command.strip(), args.systems, settings.rounds)
    report.load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the servers on `kill` too
    if busy_pytest():
        progress("warning: pytest runs on this machine will disturb the numbers")
    progress(f"run {settings.run_id}: {', '.join(args.systems)} × {', '.join(args.workload_names)}")
    code = 0
    try:
        with ExitStack() as servers:
            for name in args.systems:
                progress(f"starting {system.label(name)}")
                try:
                    report.servers[name] = servers.enter_context(system.server(name, settings, args.workload_names))
                except (Exception, SystemExit) as exc:  # the tx server starter exits rather than raises
                    report.failures.append(f"{system.label(name)} did not start: {exc}")
                    progress(report.failures[-1])
            endpoints = {n: info.endpoint for n, info in report.servers.items()}
            with Run(settings, endpoints, report.workloads) as run:
                report.failures += warm_up(run) if endpoints else []
                report.measured = list(run.systems)
                for name in args.workload_names if run.systems else []:
                    progress(f"--- {name}")
                    started = time.perf_counter()
                    try:
                        WORKLOADS[name](run)
                    finally:
                        if report.workloads:
                            report.workloads[-1].seconds = time.perf_counter() - started
            progress("stopping the servers")
    except KeyboardInterrupt:
        report.failures.append("interrupted: what is missing above did not run")
        code = 130
    for w in report.workloads:
        report.failures += [f"{system.label(s)} failed {w.name}: {why}" for s, why in w.failed.items()]
    report.wall = time.time() - report.started
    if busy_pytest():
        progress("warning: a pytest run was going when the run ended")
    print(report.markdown())
    if args.json:
        report.write_json(args.json)
        progress(f"wrote {args.json}")
    if report.failures and not code:
        progress("failed: " + "; ".join(report.failures))
        code = 1
    return code


if __name__ == "__main__":
    sys.exit(main())
