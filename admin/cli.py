"""The tms-admin command: a click group assembling the topic, table and local-HBase commands."""

from __future__ import annotations

import sys
from typing import Any

import click

from tms_hbase import __version__
from tms_hbase.model.tail_cache import DEFAULT_TAIL_CACHE_SECONDS
from tms_hbase.ops.cli_options import ToolGroup, given_on_command_line

from .context import Settings, connection_options, pass_settings
from .errors import EXIT_HELP, handle_errors
from .output import emit, json_option
from .settings import describe, describe_text, parse_seconds, tail_cache_option

# Each command group is imported when it runs (or its --help is asked for): --help, --version and a single
# command start without loading the others, nor the client, Thrift and Prometheus libraries they need.
COMMANDS = {
    "bench": ("tms_hbase_admin.bench:bench", "Measure publish and consume rates and latencies."),
    "grants": ("tms_hbase_admin.grants:grants", "The HBase grants a role needs (HBase's AccessController)."),
    "hbase": ("tms_hbase_admin.hbase:hbase", "Run a local standalone HBase for development and tests."),
    "metrics": ("tms_hbase_admin.metrics:metrics", "Prometheus metrics of topics and subscriptions."),
    "settings": ("tms_hbase_admin.settings:settings", "Show the tail-cache setting and the sweeper's least grace."),
    "sub": ("tms_hbase_admin.subscriptions:sub", "Subscriptions: durable consume marks of a topic."),
    "sweeper": ("tms_hbase_admin.sweeper:sweeper", "What the sweeper has done, region by region."),
    "topic": ("tms_hbase_admin.topics:topic", "Create, inspect and delete topics."),
    "tx": ("tms_hbase_admin.tx:tx", "The Tephra-compatible transaction server and its state."),
}


@click.group(cls=ToolGroup, lazy=COMMANDS, epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@connection_options
@click.version_option(__version__, prog_name="tms-admin")
@click.pass_context
def main(ctx: click.Context, **connection: Any) -> None:
    """Administer tms-hbase: topics, subscriptions, tables and a local HBase.

    Where HBase is comes from --thrift/--prefix or TMS_HBASE_THRIFT/TMS_TABLE_PREFIX.
    Every command takes --json for output that scripts can read.
    """
    ctx.obj = Settings.of(connection, given_on_command_line(ctx))


@main.command()
@tail_cache_option
@json_option
@pass_settings
@handle_errors
def init(settings: Settings, tail_cache_seconds: str | None, as_json: bool) -> None:
    """Create the messages, payloads, metadata, transaction-state and subscriptions tables (missing ones
    only) and store the installation's tail-cache setting (see tms-admin settings)."""
    seconds = None if tail_cache_seconds is None else parse_seconds(tail_cache_seconds)
    with settings.client(existing=False) as client:
        created = client.admin.init_tables()
        setting = client.admin.tail_cache_setting()
        if seconds is not None or setting is None:
            setting = client.admin.set_tail_cache_seconds(DEFAULT_TAIL_CACHE_SECONDS if seconds is None else seconds)
        data = {"prefix": client.installation.prefix, "tables": client.installation.names.all(), "created": created}
        data.update(describe(setting))

    def human(d: dict) -> str:
        made = ", ".join(d["created"]) if d["created"] else "none (all existed)"
        return f"tables of prefix {d['prefix']!r} ready; created: {made}\n" + describe_text(d)

    emit(as_json, data, human)


@main.command()
@click.option("--yes", is_flag=True, help="Drop without asking (needed when stdin is not a terminal).")
@json_option
@pass_settings
@handle_errors
def drop(settings: Settings, yes: bool, as_json: bool) -> None:
    """Delete the installation: every table of this prefix, with all its topics, messages, subscriptions
    and transaction state. Asks first on a terminal; without one, refused (exit code 2) unless --yes.
    Exit code 7 if the prefix has no tables."""
    from tms_hbase.errors import InstallationNotFound, InvalidArgument
    from tms_hbase.model.tables import FAMILIES

    with settings.client(existing=False) as client:
        prefix, address = client.installation.prefix, client.installation.address
        missing = client.installation.missing(FAMILIES)
        tables = [name for name in client.installation.names.all() if name not in missing]
        if not tables:
            raise InstallationNotFound(prefix, address, missing)
        if not yes:
            if not sys.stdin.isatty():
                raise InvalidArgument(
                    f"refusing to drop the installation {prefix!r} without --yes (stdin is not a terminal)"
                )
            question = f"Drop {', '.join(tables)} at {address}, with everything in them?"
            if not click.confirm(question, err=True):
                raise click.Abort()
        dropped = client.admin.drop_tables()
    emit(
        as_json,
        {"prefix": prefix, "dropped": dropped},
        lambda d: f"dropped the installation {d['prefix']!r}: {', '.join(d['dropped'])}",
    )
