"""tms-sweeper: run the sweeper once or as a daemon against one tms-hbase installation."""

from __future__ import annotations

import json
import logging
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

import click

from tms_hbase import MessagingClient, __version__
from tms_hbase.errors import InstallationNotFound, InvalidArgument, TmsError
from tms_hbase.model.exit_codes import EXIT_HELP
from tms_hbase.ops.cli_options import (
    CONNECTION_OPTIONS,
    ToolGroup,
    config_from_options,
    connection_params,
    connection_values,
    fail,
    given_on_command_line,
    with_options,
)
from tms_hbase.ops.log_options import configure_logging, log_options
from tms_hbase.ops.signals import on_stop_signals
from tms_hbase.sweep.status import describe, sweeper_state
from tms_hbase.txserver.snapshot_source import DEFAULT_MAX_AGE_SECONDS, ServerSnapshots

from .metrics import Health, SweeperMetrics
from .sweep import DEFAULT_GRACE_SECONDS, Sweeper, SweepReport

log = logging.getLogger(__name__)

connection = [
    *CONNECTION_OPTIONS,
    click.option("--json", "as_json", is_flag=True, help="Print reports as JSON lines (stdout; logs go to stderr)."),
]
sweeping = [
    click.option(
        "--grace",
        type=click.FloatRange(min=0),
        default=DEFAULT_GRACE_SECONDS,
        show_default=True,
        envvar="TMS_SWEEPER_GRACE",
        help="Seconds past a message's TTL before it is deleted (keeps positions from being reused). "
        "At least 4 x the installation's tail-cache seconds (see tms-admin settings); a smaller "
        "value is refused with exit code 2.",
    ),
    click.option("--dry-run", is_flag=True, help="Report what would change; change nothing."),
    click.option("--owner", help="Name of this sweeper in region leases [default: random]."),
    click.option(
        "--lease-seconds",
        type=click.FloatRange(min=1),
        default=60.0,
        show_default=True,
        help="How long a region stays leased without a renewal (renewed after every chunk).",
    ),
    click.option(
        "--max-rows-per-second",
        type=click.FloatRange(min=1),
        envvar="TMS_SWEEPER_MAX_ROWS",
        help="Throttle: read at most this many rows per second and region [default: unlimited].",
    ),
    click.option(
        "--compact-after",
        type=click.IntRange(min=1),
        default=10_000,
        show_default=True,
        help="Request a major compaction of a region after this many deletes in it.",
    ),
    click.option(
        "--metadata-refresh",
        type=click.FloatRange(min=0),
        default=30.0,
        show_default=True,
        help="Seconds after which topic metadata is re-read, also in the middle of a sweep.",
    ),
    click.option(
        "--snapshot-refresh",
        type=click.FloatRange(min=0),
        default=30.0,
        show_default=True,
        help="Seconds after which the transaction state is re-read (from --tx-server, else the latest "
        "snapshot + edit log in HBase).",
    ),
    click.option(
        "--tx-server",
        metavar="HOST:PORT",
        envvar="TMS_SWEEPER_TX_SERVER",
        show_envvar=True,
        help="Take the transaction state from this Tephra-compatible transaction server (Apache Tephra, "
        "CDAP's, or tms-admin tx serve) with getSnapshot [default: rebuild it from the installation's "
        "_txstate table, which only tms-admin tx serve writes].",
    ),
    click.option(
        "--max-snapshot-age",
        type=click.FloatRange(min=1),
        default=DEFAULT_MAX_AGE_SECONDS,
        show_default=True,
        envvar="TMS_SWEEPER_MAX_SNAPSHOT_AGE",
        help="While the transaction state cannot be re-read, the last good one is used up to this many "
        "seconds; past that, no rows are marked invalid and no prune bounds are recorded (the report "
        "says invalid_list_skipped) until a fresh one is read. At least --snapshot-refresh.",
    ),
    click.option(
        "--chunk-rows",
        type=click.IntRange(min=1),
        default=4000,
        show_default=True,
        help="Rows read per scan; the checkpoint and the lease are renewed after each chunk.",
    ),
]


def _load_config(ctx: click.Context, _param: click.Parameter, path: str | None) -> None:
    """Defaults for every command from a TOML file (keys as the long options, '-' or '_')."""
    if path is None:
        return
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}") from None
    values = {key.replace("-", "_"): value for key, value in data.items()}
    ctx.default_map = {name: values for name in ("once", "run", "status")}


def _print(report: SweepReport, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report.as_dict(), sort_keys=True))
        return
    verb = "would drop" if report.dry_run else "dropped"
    swept = "scanned (dry run: nothing changed)" if report.dry_run else "swept"
    click.echo(
        f"{report.regions_swept} regions {swept} ({report.regions_skipped} leased elsewhere, "
        f"{report.regions_resumed} resumed) in {report.seconds:.1f}s; messages: {report.messages_scanned} scanned, "
        f"{verb} {report.messages_dropped}, stripped {report.messages_stripped}, marked {report.messages_invalidated} "
        f"invalid (of {report.invalid_transactions} invalid transactions); payloads: {report.payloads_scanned} "
        f"scanned, {verb} {report.payloads_dropped}"
        + (f"; {report.messages_future_dated} rows dated in the future" if report.messages_future_dated else "")
        + (
            f"; {report.skip_markers_indexed} skip markers {'would be ' if report.dry_run else ''}indexed"
            if report.skip_markers_indexed
            else ""
        )
        + (f"; {report.corrupt_rows} corrupt rows left in place (see the log)" if report.corrupt_rows else "")
        + (
            f"; NO invalid-list work: the transaction state from {report.tx_snapshot_source} was missing or too old"
            if report.invalid_list_skipped
            else ""
        )
        + ("; stopped early" if report.stopped else "")
    )


def _sweeper(
    client: MessagingClient, options: dict[str, Any], timeout: float, metrics: SweeperMetrics | None = None
) -> Sweeper:
    return Sweeper(
        client.installation,
        clock=client.hbase_clock.now_ms,
        grace_seconds=options["grace"],
        dry_run=options["dry_run"],
        owner=options["owner"],
        lease_seconds=options["lease_seconds"],
        max_rows_per_second=options["max_rows_per_second"],
        compact_after=options["compact_after"],
        chunk_rows=options["chunk_rows"],
        metadata_refresh_seconds=options["metadata_refresh"],
        snapshot_refresh_seconds=options["snapshot_refresh"],
        max_snapshot_age=options["max_snapshot_age"],
        tx_source=ServerSnapshots(options["tx_server"], timeout_seconds=timeout) if options["tx_server"] else None,
        metrics=metrics,
    )


def _client(connection: dict[str, Any]) -> MessagingClient:
    """A client on an installation that must exist already (the sweeper never creates tables), as the
    connection options say."""
    client = MessagingClient(config=config_from_options(**connection), create_tables=False)
    try:
        client.admin.require_installation()
    except TmsError:
        client.close()
        raise
    return client


@click.group(cls=ToolGroup, epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    callback=_load_config,
    expose_value=False,
    is_eager=True,
    help="TOML file with defaults for the options below (flags and env win).",
)
@with_options(CONNECTION_OPTIONS)
@click.version_option(__version__, prog_name="tms-sweeper")
@click.pass_context
def main(ctx: click.Context, **_connection: Any) -> None:
    """The tms-hbase sweeper: what HBase coprocessors do at compaction in CDAP, from a process.

    Deletes rows of old generations (deleted or re-created topics) and messages and stored payloads
    past their TTL plus a grace period (never a generation's newest row), and marks messages of
    invalid transactions rolled back. Works region by region under leases, so several sweepers can
    share the work; a stopped sweep resumes from its checkpoint. A grace below the installation's
    minimum is refused as bad input (docs/guarantees.md).

    The connection options (--thrift, --prefix, --timeout, --thrift-framed...) go before the command's name
    or after it (after it wins); a --config file may set them too (e.g. thrift_framed = true).
    """
    ctx.obj = given_on_command_line(ctx)


@main.command()
@with_options(connection + sweeping + log_options())
@click.pass_context
def once(ctx: click.Context, as_json: bool, log_format: str, log_level: str, **options: Any) -> None:
    """Sweep every region once and print what was done."""
    connection = connection_values(ctx, ctx.obj, **connection_params(options))
    configure_logging(log_format, log_level)
    try:
        with _client(connection) as client:
            sweeper = _sweeper(client, options, connection["timeout"])
            try:
                _print(sweeper.sweep_once(), as_json)
            finally:
                sweeper.close()
    except TmsError as error:
        fail(error)


@main.command()
@with_options(connection + sweeping + log_options())
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=300.0,
    show_default=True,
    help="Seconds between the starts of two sweeps.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    envvar="TMS_SWEEPER_METRICS_PORT",
    help="Serve Prometheus metrics on http://HOST:PORT/metrics and the health check on /health.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    envvar="TMS_SWEEPER_METRICS_HOST",
    show_envvar=True,
    help="Address the metrics and health server listens on (0.0.0.0 or :: so a container can be scraped).",
)
@click.option(
    "--health-max-age",
    type=click.FloatRange(min=1),
    envvar="TMS_SWEEPER_HEALTH_MAX_AGE",
    show_envvar=True,
    help="/health answers 503 once the last complete sweep ended longer ago than this many seconds "
    "(a failed sweep does not count), or the loop has stopped [default: 3 x --interval, at least 600].",
)
@click.pass_context
def run(
    ctx: click.Context,
    as_json: bool,
    log_format: str,
    log_level: str,
    interval: float,
    metrics_port: int | None,
    metrics_host: str,
    health_max_age: float | None,
    **options: Any,
) -> None:
    """Sweep every INTERVAL seconds until SIGTERM or SIGINT (the current chunk is finished and its
    checkpoint saved first). A failed sweep is logged, counted in tms_sweeper_errors_total and tried
    again (HBase may be down for a while); an installation that does not exist (a mistyped --prefix)
    ends it with exit code 7. With --metrics-port, /health says whether sweeps still complete."""
    connection = connection_values(ctx, ctx.obj, **connection_params(options))
    timeout = connection["timeout"]
    configure_logging(log_format, log_level)
    stop = threading.Event()
    metrics = SweeperMetrics(dry_run=options["dry_run"])
    health = Health(health_max_age or max(3 * interval, 600.0))
    try:
        client = MessagingClient(config=config_from_options(**connection), create_tables=False)
        if metrics_port:
            _serve_metrics(metrics, health, metrics_host, metrics_port)
    except TmsError as error:
        fail(error)
    with client:
        try:
            client.admin.require_installation()
            sweeper = _sweeper(client, options, timeout, metrics)  # refuses a grace below the installation's minimum
        except TmsError as error:
            fail(error)

        def shutdown(*_: object) -> None:
            stop.set()
            sweeper.stop()

        on_stop_signals(shutdown)
        health.loop_started()
        try:
            while not stop.is_set():
                began = time.monotonic()
                try:
                    client.admin.require_installation()
                    report = sweeper.sweep_once()
                except InstallationNotFound as error:
                    fail(error)
                except TmsError as error:
                    metrics.errors.labels(type(error).__name__).inc()
                    log.error("sweep failed, will try again: %s", error)
                else:
                    if not report.stopped:
                        metrics.sweep_duration.observe(report.seconds)
                        health.sweep_ended()
                    _print(report, as_json)
                stop.wait(max(0.0, interval - (time.monotonic() - began)))
        finally:
            health.loop_ended()
            sweeper.close()
    log.info("sweeper stopped")


def _serve_metrics(metrics: SweeperMetrics, health: Health, host: str, port: int) -> None:
    """Start the metrics and health server; an address that cannot be bound is bad input (exit code 2)."""
    try:
        metrics.serve(host, port, health)
    except OSError as exc:  # socket.gaierror included: an unknown host name
        raise InvalidArgument(f"cannot serve metrics on {host}:{port}: {exc}") from None
    shown = f"[{host}]" if ":" in host else host
    log.info("metrics on http://%s:%d/metrics, health on /health", shown, port)


@main.command()
@with_options(connection)
@click.pass_context
def status(ctx: click.Context, as_json: bool, **connection: Any) -> None:
    """Per-region sweep records, the regions blocking invalid-list pruning, and the global bound."""
    try:
        with _client(connection_values(ctx, ctx.obj, **connection)) as client:
            state = sweeper_state(client.installation)
    except TmsError as error:
        fail(error)
    click.echo(json.dumps(state, indent=2, sort_keys=True) if as_json else describe(state))
