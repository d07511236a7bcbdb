"""tms-admin tx …: run the transaction server and administer transactions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from tms_hbase.config import DEFAULT_TX_SERVER, TX_ENV
from tms_hbase.errors import InvalidArgument
from tms_hbase.ops.cli_options import with_options
from tms_hbase.ops.log_options import configure_logging, log_options
from tms_hbase.ops.signals import on_stop_signals
from tms_hbase.tx.pointers import MAX_LIFETIME_SECONDS, PRUNE_GRACE_SECONDS

if TYPE_CHECKING:  # the Thrift clients and servers are imported by the commands that use them
    from tms_hbase.tx.snapshot import TransactionSnapshot

from .context import Settings, pass_settings
from .errors import handle_errors
from .output import emit, json_option

server_option = click.option(
    "--tx-server",
    metavar="HOST:PORT",
    envvar=TX_ENV,
    show_envvar=True,
    help=f"The transaction server [default: {DEFAULT_TX_SERVER}].",
)
from_hbase_option = click.option(
    "--from-hbase", is_flag=True, help="Rebuild the state from HBase (snapshot + edit log), without the server."
)


def _snapshot_dict(s: TransactionSnapshot) -> dict:
    return {
        "timestamp": s.timestamp,
        "read_pointer": s.read_pointer,
        "write_pointer": s.write_pointer,
        "invalid": list(s.invalid),
        "in_progress": {
            str(wp): {
                "type": tx.type.name,
                "expiration": tx.expiration,
                "visibility_upper_bound": tx.visibility_upper_bound,
                "checkpoints": list(tx.checkpoint_write_pointers),
            }
            for wp, tx in sorted(s.in_progress.items())
        },
        "committing": len(s.committing_change_sets),
        "committed": len(s.committed_change_sets),
    }


def _state(settings: Settings, tx_server: str | None, from_hbase: bool) -> TransactionSnapshot:
    from tms_hbase.tx.client import TransactionClient
    from tms_hbase.txserver.state_store import StateStore

    if from_hbase:
        with settings.client() as client:
            client.admin.require_installation()
            return StateStore(client.installation.txstate).recover().snapshot(0)
    with TransactionClient(tx_server, timeout_seconds=settings.timeout) as tx:
        return tx.snapshot()


@click.group()
def tx() -> None:
    """The Tephra-compatible transaction server and its state."""


@tx.command()
@click.option("--bind", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=15165, show_default=True, help="Port (Tephra's).")
@click.option(
    "--short-timeout",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Seconds before a short transaction that did not finish becomes invalid.",
)
@click.option(
    "--snapshot-interval",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    help="Seconds between snapshots written to HBase (the edit log covers the time between).",
)
@click.option(
    "--cleanup-interval",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds between checks for timed-out transactions.",
)
@with_options(log_options())
@pass_settings
@handle_errors
def serve(
    settings: Settings,
    bind: str,
    port: int,
    short_timeout: int,
    snapshot_interval: float,
    cleanup_interval: float,
    log_format: str,
    log_level: str,
) -> None:
    """Run the transaction server until SIGTERM/SIGINT; its state is durable in HBase.

    Speaks Tephra's Thrift protocol (framed transport, binary protocol), so Tephra clients work too.
    Binds the port before touching HBase: if it cannot (the port is taken, even by another
    transaction server), it exits with code 1 and claims nothing, so a running server keeps serving.
    A server that starts on another port takes over the state, and the old one stops.
    """
    from tms_hbase.txserver.listener import listen
    from tms_hbase.txserver.server import DurableManager, TransactionServer
    from tms_hbase.txserver.state_store import StateStore

    configure_logging(log_format, log_level)
    # Listen first: recovering the state claims the edit log (fencing a running server), which only
    # a server that can serve may do.
    listener = listen(bind, port)
    with settings.client() as client:  # exit code 7 on a prefix without an installation: nothing is created
        durable = DurableManager(StateStore(client.installation.txstate), short_timeout=short_timeout)
        server = TransactionServer(
            durable, listener, cleanup_interval=cleanup_interval, snapshot_interval=snapshot_interval
        )
        on_stop_signals(server.stop)
        server.serve()


@tx.command()
@server_option
@json_option
@pass_settings
@handle_errors
def status(settings: Settings, tx_server: str | None, as_json: bool) -> None:
    """The server's status, pointers and the sizes of its lists."""
    from tms_hbase.tx.client import TransactionClient

    with TransactionClient(tx_server, timeout_seconds=settings.timeout) as tx_client:
        state = {"status": tx_client.status(), "server": tx_client.address, **_snapshot_dict(tx_client.snapshot())}
    emit(
        as_json,
        state,
        lambda d: (
            f"{d['status']} at {d['server']}: read pointer {d['read_pointer']}, write pointer {d['write_pointer']}, "
            f"{len(d['in_progress'])} in progress, {len(d['invalid'])} invalid"
        ),
    )


@tx.command()
@server_option
@from_hbase_option
@json_option
@pass_settings
@handle_errors
def invalid(settings: Settings, tx_server: str | None, from_hbase: bool, as_json: bool) -> None:
    """List the invalid transactions (their writes are never visible to transactions)."""
    ids = list(_state(settings, tx_server, from_hbase).invalid)
    emit(as_json, ids, lambda d: "\n".join(str(i) for i in d) if d else "no invalid transactions")


@tx.command()
@server_option
@from_hbase_option
@json_option
@pass_settings
@handle_errors
def snapshot(settings: Settings, tx_server: str | None, from_hbase: bool, as_json: bool) -> None:
    """Show the transaction state (the server's, or rebuilt from HBase with --from-hbase)."""
    data = _snapshot_dict(_state(settings, tx_server, from_hbase))

    def human(d: dict) -> str:
        lines = [
            f"read pointer   {d['read_pointer']}",
            f"write pointer  {d['write_pointer']}",
            f"invalid        {len(d['invalid'])}: {d['invalid'][:20]}",
        ]
        lines += [f"in progress    {wp} {t['type']} expires {t['expiration']}" for wp, t in d["in_progress"].items()]
        return "\n".join(lines)

    emit(as_json, data, human)


@tx.command()
@server_option
@click.option("--ids", metavar="ID,ID,...", help="Invalid transaction ids to remove from the invalid list.")
@click.option("--before", type=int, metavar="MS", help="Remove invalid transactions started before this time (ms).")
@json_option
@pass_settings
@handle_errors
def truncate(settings: Settings, tx_server: str | None, ids: str | None, before: int | None, as_json: bool) -> None:
    """Remove transactions from the invalid list, by id or by start time.

    Only safe once the sweeper has rewritten their messages (see `tms-admin tx prune`).
    """
    if (ids is None) == (before is None):
        raise InvalidArgument("give exactly one of --ids or --before")
    from tms_hbase.tx.client import TransactionClient

    with TransactionClient(tx_server, timeout_seconds=settings.timeout) as tx_client:
        if ids is not None:
            try:
                wanted = {int(i) for i in ids.split(",") if i.strip()}
            except ValueError:
                raise InvalidArgument(f"bad --ids {ids!r}: expected numbers separated by commas") from None
            done = tx_client.truncate_invalid(wanted)
        elif before is not None:  # exactly one of them is given
            done = tx_client.truncate_invalid_before(before)
        remaining = tx_client.invalid_size()
    emit(
        as_json,
        {"truncated": done, "invalid_size": remaining},
        lambda d: f"{'truncated' if d['truncated'] else 'nothing truncated'}; {d['invalid_size']} invalid left",
    )


@tx.command()
@server_option
@click.option(
    "--max-lifetime",
    type=click.FloatRange(min=0),
    default=MAX_LIFETIME_SECONDS + PRUNE_GRACE_SECONDS,
    show_default=True,
    help="Seconds after which no transaction can still be writing (Tephra's max lifetime + grace).",
)
@click.option("--dry-run", is_flag=True, help="Show what would be pruned; prune nothing.")
@json_option
@pass_settings
@handle_errors
def prune(settings: Settings, tx_server: str | None, max_lifetime: float, dry_run: bool, as_json: bool) -> None:
    """Remove from the invalid list the transactions whose messages every region has marked.

    Safe by construction: only ids at or below the global bound (the minimum over the message
    table's regions of what their last complete sweep applied, and older than --max-lifetime).
    """
    from tms_hbase.model.clock import now_ms
    from tms_hbase.sweep.pruning import plan
    from tms_hbase.tx.client import TransactionClient

    with settings.client() as client, TransactionClient(tx_server, timeout_seconds=settings.timeout) as tx_client:
        client.admin.require_installation()
        invalid = tx_client.snapshot().invalid  # the server's own list: ours or any Tephra-compatible one
        result = plan(client.installation, now_ms(), max_lifetime, invalid).as_dict()
        result["pruned"] = []
        if result["prunable"] and not dry_run:
            tx_client.truncate_invalid(result["prunable"])
            result["pruned"] = result["prunable"]

    def human(d: dict) -> str:
        if d["blocking"]:
            return f"nothing pruned: regions not completely swept yet: {', '.join(d['blocking'])}"
        verb = "would prune" if dry_run else "pruned"
        return f"global bound {d['global_bound']}; {verb} {len(d['prunable'])} of {len(d['invalid'])} invalid"

    emit(as_json, result, human)
