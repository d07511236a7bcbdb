"""tms-sweeper: run the sweeper once or as a daemon against one tms-hbase installation."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading

import click

from tms_hbase import MessagingClient
from tms_hbase.config import PREFIX_ENV, THRIFT_ENV
from tms_hbase.errors import TmsError

from .sweep import DEFAULT_GRACE_SECONDS, Sweeper, SweepReport

common = [
    click.option(
        "--thrift",
        metavar="HOST:PORT",
        envvar=THRIFT_ENV,
        show_envvar=True,
        help="HBase Thrift gateway [default: 127.0.0.1:9090].",
    ),
    click.option("--prefix", envvar=PREFIX_ENV, show_envvar=True, help="Table-name prefix [default: tms]."),
    click.option(
        "--grace",
        type=click.FloatRange(min=0),
        default=DEFAULT_GRACE_SECONDS,
        show_default=True,
        help="Seconds past a message's TTL before it is deleted (keeps positions from being reused; "
        "only lower it when no writer can be slower than that).",
    ),
    click.option("--dry-run", is_flag=True, help="Report what would change; change nothing."),
    click.option("--json", "as_json", is_flag=True, help="Print reports as JSON lines."),
]


def _options(func):
    for option in reversed(common):
        func = option(func)
    return func


def _print(report: SweepReport, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report.as_dict(), sort_keys=True))
        return
    verb = "would drop" if report.dry_run else "dropped"
    click.echo(
        f"messages: {report.messages_scanned} scanned, {verb} {report.messages_dropped}, "
        f"stripped {report.messages_stripped}, marked {report.messages_invalidated} invalid "
        f"(of {report.invalid_transactions} invalid transactions); payloads: {report.payloads_scanned} scanned, "
        f"{verb} {report.payloads_dropped}"
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """The tms-hbase sweeper: deletes what HBase coprocessors would drop at compaction in CDAP.

    Rows of deleted or re-created topics' old generations, and messages and stored payloads past
    their topic's TTL (or their own shorter TTL), plus a grace period. Exit codes: 0 ok, 1 error.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@main.command()
@_options
def once(thrift: str | None, prefix: str | None, grace: float, dry_run: bool, as_json: bool) -> None:
    """Sweep every row once and print what was done."""
    try:
        with MessagingClient(thrift, prefix, create_tables=False) as client:
            _print(Sweeper(client.hbase, client.tables, grace_seconds=grace, dry_run=dry_run).sweep_once(), as_json)
    except TmsError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(1)


@main.command()
@_options
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=300.0,
    show_default=True,
    help="Seconds between the starts of two sweeps.",
)
def run(thrift: str | None, prefix: str | None, grace: float, dry_run: bool, as_json: bool, interval: float) -> None:
    """Sweep every INTERVAL seconds until SIGTERM or SIGINT (a sweep in progress is finished first)."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log = logging.getLogger("compactor")
    with MessagingClient(thrift, prefix, create_tables=False) as client:
        sweeper = Sweeper(client.hbase, client.tables, grace_seconds=grace, dry_run=dry_run)
        while not stop.is_set():
            try:
                _print(sweeper.sweep_once(), as_json)
            except TmsError as error:
                log.error("sweep failed, will try again: %s", error)
            stop.wait(interval)
    log.info("sweeper stopped")
