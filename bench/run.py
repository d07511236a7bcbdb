"""Run the tms-hbase benchmarks side by side with raw happybase on one HBase and print a markdown report.

    python -m bench.run [--quick] [--only NAME[,NAME]] [--rounds N] [--json OUT] [--address HOST:PORT]

Benchmarks (docs/benchmarks.md): publish, writers, designs (the many-writer designs), fetch, keys (what a key
and headers cost to publish and fetch), latency, seek, txlatency, sweeper, spark, gateway, gateway-aio, consumer,
shared, shared-keyed (key-ordered shared subscriptions), scheduled (how late scheduled messages go out), aio (the
asyncio client), console (the web console's screen times), transports (framed, compact and TLS against the plain
Thrift transport), transports-sasl (SASL auth-int and auth-conf against auth, on a KDC and a secured HBase of its
own; not in ``--quick`` unless named with ``--only``).
Progress goes to stderr, the report to stdout. Every table a run creates has a ``bench…`` prefix and is
dropped afterwards. The exit code is 1 if any benchmark failed (its own checks included), 2 without HBase.

``--quick`` checks that every benchmark runs and its checks hold, not figures: smaller sizes and one round
(``make bench-quick``, which CI runs); ``--quick --rounds 3`` gives medians at the smaller sizes.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
import traceback
from collections.abc import Callable

from . import (
    aio,
    console,
    consumer,
    fetch,
    gateway,
    gateway_aio,
    latency,
    publish,
    records,
    scale,
    scheduled,
    seek,
    shared,
    shared_keyed,
    spark,
    sweeper,
    transports,
    transports_sasl,
    txlatency,
    writer_designs,
    writers,
)
from .common import GoalFamily, Result, Settings, check_loopback, progress, raw_connection
from .report import busy_pytest, markdown, write_json

# Goals recorded per item that docs/benchmarks.md's table shows as one row each (bench/report.py).
GOAL_FAMILIES: tuple[GoalFamily, ...] = (*console.GOAL_FAMILIES, *transports.GOAL_FAMILIES)
BENCHMARKS: dict[str, Callable[[Settings], Result]] = {
    "publish": publish.run,
    "writers": writers.run,
    "designs": writer_designs.run,
    "fetch": fetch.run,
    "keys": records.run,
    "latency": latency.run,
    "seek": seek.run,
    "txlatency": txlatency.run,
    "sweeper": sweeper.run,
    "spark": spark.run,
    "gateway": gateway.run,
    "gateway-aio": gateway_aio.run,
    "consumer": consumer.run,
    "shared": shared.run,
    "shared-keyed": shared_keyed.run,
    "scheduled": scheduled.run,
    "aio": aio.run,
    "console": console.run,
    "transports": transports.run,
    "transports-sasl": transports_sasl.run,
    "scale": scale.run,
}
NOT_QUICK = {"transports-sasl"}
"""Left out of ``--quick`` unless named with ``--only`` (they start servers of their own for minutes)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="smaller sizes and 1 round: checks that everything runs (about 5 minutes)"
    )
    parser.add_argument("--only", metavar="NAME", help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--rounds", type=int, help="rounds per benchmark (default 5, 1 with --quick)")
    parser.add_argument("--json", metavar="OUT", help="also write every sample and median to this JSON file")
    parser.add_argument(
        "--address",
        default=os.environ.get("TMS_HBASE_THRIFT", "127.0.0.1:9090"),
        help="HBase Thrift gateway on loopback (default $TMS_HBASE_THRIFT or 127.0.0.1:9090)",
    )
    args = parser.parse_args(argv)
    if args.only:
        names = [n.strip() for n in args.only.split(",")]
    else:
        names = [n for n in BENCHMARKS if not (args.quick and n in NOT_QUICK)]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    args.names = names
    if args.rounds is not None and not 1 <= args.rounds <= 50:
        parser.error("--rounds must be between 1 and 50")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_loopback(args.address)
    rounds = args.rounds or (1 if args.quick else 5)
    settings = Settings(address=args.address, quick=args.quick, rounds=rounds)
    command = "python -m bench.run " + shlex.join(sys.argv[1:] if argv is None else argv)
    try:
        conn = raw_connection(settings)
        conn.tables()
        conn.close()
    except Exception as exc:
        print(
            f"error: HBase Thrift at {settings.address} does not answer ({exc}); run `tms-admin hbase start`",
            file=sys.stderr,
        )
        return 2
    others = busy_pytest()
    if others:
        progress(f"warning: other pytest runs on this machine will disturb the numbers: {others}")
    progress(f"run {settings.run_id}: {', '.join(args.names)} ({'quick' if args.quick else 'full'}, {rounds} rounds)")
    started = time.perf_counter()
    results = [run_one(name, settings) for name in args.names]
    wall = time.perf_counter() - started
    if busy_pytest():
        progress("warning: a pytest run was going when the benchmarks ended")
    print(markdown(results, settings, command.strip(), wall))
    if args.json:
        write_json(args.json, results, settings, command.strip(), wall)
        progress(f"wrote {args.json}")
    failed = [r.name for r in results if r.error]
    if failed:
        progress(f"failed: {', '.join(failed)} (the report above has every benchmark that finished)")
        return 1
    return 0


def run_one(name: str, settings: Settings) -> Result:
    """Run one benchmark; a failure becomes a Result with ``error`` set, so the others still report."""
    progress(f"--- {name}")
    started = time.perf_counter()
    try:
        result = BENCHMARKS[name](settings)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        result = Result(name, "failed", error=f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
    result.seconds = time.perf_counter() - started
    progress(f"{name} {'FAILED' if result.error else 'done'} in {result.seconds:.0f} s")
    return result


if __name__ == "__main__":
    sys.exit(main())
