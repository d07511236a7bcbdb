"""The tms-admin command: a click group assembling the topic, table and local-HBase commands."""

from __future__ import annotations

import click

from tms_hbase import __version__

from .context import Settings, connection_options, pass_settings
from .errors import EXIT_HELP, handle_errors
from .hbase import hbase
from .inspect import publish, stats, tail
from .metrics import metrics
from .output import emit, json_option
from .subscriptions import sub
from .sweeper import sweeper
from .topics import topic
from .tx import tx


def _with_connection_options(func):
    for option in reversed(connection_options):
        func = option(func)
    return func


@click.group(epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@_with_connection_options
@click.version_option(__version__, prog_name="tms-admin")
@click.pass_context
def main(ctx: click.Context, thrift: str | None, prefix: str | None, timeout: float) -> None:
    """Administer tms-hbase: topics, subscriptions, tables and a local HBase.

    Where HBase is comes from --thrift/--prefix or TMS_HBASE_THRIFT/TMS_TABLE_PREFIX.
    Every command takes --json for output that scripts can read.
    """
    ctx.obj = Settings(thrift, prefix, timeout)


@main.command()
@json_option
@pass_settings
@handle_errors
def init(settings: Settings, as_json: bool) -> None:
    """Create the messages, payloads, metadata, transaction-state and subscriptions tables (missing ones only)."""
    with settings.client() as client:
        created = client.init_tables()
        data = {"prefix": client.tables.prefix, "tables": client.tables.all(), "created": created}

    def human(d: dict) -> str:
        made = ", ".join(d["created"]) if d["created"] else "none (all existed)"
        return f"tables of prefix {d['prefix']!r} ready; created: {made}"

    emit(as_json, data, human)


for command in (tail, publish, stats):
    topic.add_command(command)
main.add_command(topic)
main.add_command(sub)
main.add_command(metrics)
main.add_command(hbase)
main.add_command(tx)
main.add_command(sweeper)
