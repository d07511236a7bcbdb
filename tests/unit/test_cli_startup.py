"""The command-line tools start fast: --help and --version import neither the HBase client (happybase,
thriftpy2) nor the Prometheus client; a command loads them only when it runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("happybase", "thriftpy2", "prometheus_client", "tms_hbase.client", "tms_hbase.storage.hbase")

# Runs a tool's main() as its console script does, then prints which heavy modules were loaded.
PROBE = """
import atexit, sys
atexit.register(lambda: print(",".join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr))
from tms_hbase_admin.cli import main
main({args!r}, prog_name="tms-admin")
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["topic", "--help"],
        ["topic", "list", "--help"],
        ["tx", "serve", "--help"],
        ["bench", "--help"],
    ],
    ids=" ".join,
)
def test_help_and_version_import_no_hbase_client(args: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY, args=args)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1:] in ([], [""]), f"loaded: {result.stderr}"


ADMIN_COMMAND_MODULES = tuple(
    f"tms_hbase_admin.{m}" for m in ("bench", "hbase", "inspect", "metrics", "subscriptions", "sweeper", "topics", "tx")
)


@pytest.mark.parametrize("args", [["--help"], ["--version"]], ids=" ".join)
def test_help_and_version_import_no_command_module(args: list[str]) -> None:
    """The top-level help lists every command from its summary, without importing the commands' modules
    (nor asyncio and sockets, which only the asyncio client and a connection need)."""
    probe = PROBE.format(heavy=(*ADMIN_COMMAND_MODULES, "fastavro", "click.testing", "asyncio", "socket"), args=args)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1:] in ([], [""]), f"loaded: {result.stderr}"


def test_every_command_named_in_a_lazy_group_is_there_under_its_name() -> None:
    """Each lazy entry imports to a command of that name whose summary is its line in the group's help."""
    import click

    from tms_hbase.ops.cli_options import LazyGroup
    from tms_hbase_admin.cli import main

    groups = [main, main.get_command(click.Context(main), "topic")]
    for group in groups:
        assert isinstance(group, LazyGroup) and group.lazy
        ctx = click.Context(group)
        for name, (_, summary) in group.lazy.items():
            command = group.get_command(ctx, name)
            assert isinstance(command, click.Command) and command.name == name
            assert command.get_short_help_str() == summary
    assert set(main.list_commands(click.Context(main))) >= {"topic", "sub", "init", "drop", "tx", "hbase"}


# What no simple command needs: Spark, the transaction server's machinery, the gateway, the sweeper, the
# launcher. Each would add tens of milliseconds to every call of a command that only lists topics.
NOT_FOR_A_SIMPLE_COMMAND = (
    "fastavro",
    "tms_hbase_admin.inspect",
    "tms_hbase_admin.subscriptions",
    "pyspark",
    "pyarrow",
    "tms_hbase.spark",
    "tms_hbase.txserver.server",
    "tms_hbase.txserver.manager",
    "tms_hbase.tx.snapshot",
    "starlette",
    "uvicorn",
    "httpx",
    "tms_hbase.gateway_client",
    "tms_hbase_gateway",
    "tms_hbase_sweeper",
    "tms_hbase_launcher",
    "tms_hbase.sweep",
    # the client's parts that administering topics does not use: each is made (and imported) on first use
    "asyncio",
    "tms_hbase.publish",
    "tms_hbase.fetch",
    "tms_hbase.consume.consumer",
    "tms_hbase.consume.subscription_admin",
    "tms_hbase.consume.subscriptions",
    "tms_hbase.shared",
    "tms_hbase.isolation.fate",
)


def test_a_simple_command_imports_only_what_it_needs() -> None:
    """``tms-admin topic list`` (here against a port where nothing listens: the imports are the same)."""
    args = ["--thrift", "127.0.0.1:1", "--timeout", "2", "topic", "list"]
    probe = PROBE.format(heavy=NOT_FOR_A_SIMPLE_COMMAND, args=args)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "cannot reach HBase" in result.stderr, result.stderr  # it ran: the client was made and called
    loaded = result.stderr.strip().splitlines()[-1]  # the probe's line, after the command's error
    assert "cannot reach HBase" in loaded, f"loaded: {loaded}"  # (it printed nothing: none was loaded)


# Makes a client (nothing listens on port 1: making one connects to nothing), then each of its parts, and
# closes it: every lazily imported module is there and every part is made and closed, with no HBase.
PARTS_PROBE = """
import json, sys
from tms_hbase import MessagingClient
client = MessagingClient("127.0.0.1:1", prefix="lazyparts")
before = [m for m in {modules!r} if m in sys.modules]
parts = [name.removeprefix("_make") for name in dir(MessagingClient) if name.startswith("_make_")]
made = sorted(type(getattr(client, part)).__name__ for part in parts)
client.close()
print(json.dumps([before, made, [m for m in {modules!r} if m not in sys.modules]]))
"""
PART_MODULES = (
    "tms_hbase.publish.writer",
    "tms_hbase.fetch.reader",
    "tms_hbase.fetch.stats",
    "tms_hbase.consume.subscription_admin",
    "tms_hbase.consume.subscriptions",
    "tms_hbase.shared.admin",
    "tms_hbase.shared.store",
    "tms_hbase.isolation.committed",
)
PARTS = ["CommittedReads", "Doorbells", "MessageReader", "MessageWriter", "SharedAdmin", "SharedStore"]
PARTS += ["SubscriptionAdmin", "SubscriptionStore", "TopicStatistics"]


def test_a_clients_parts_are_made_on_first_use_and_each_can_be() -> None:
    """A new client has imported none of its publish, fetch, subscription and shared-queue code; asking for
    each part imports its module and makes it (so a lazy import that broke fails here, not at a user's first
    publish), and close() closes what was made."""
    probe = PARTS_PROBE.format(modules=PART_MODULES)
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded_before, made, missing_after = json.loads(result.stdout)
    assert loaded_before == []
    assert made == sorted(PARTS)
    assert missing_after == []


def test_durations_and_times_on_the_command_line() -> None:
    import time

    from tms_hbase.errors import InvalidArgument
    from tms_hbase_admin.times import parse_duration, parse_time

    assert [parse_duration(t) for t in ("90", "90s", "15m", "1h30m", "7d", "2w")] == [
        90,
        90,
        900,
        5400,
        604_800,
        1_209_600,
    ]
    for bad in ("", "1x", "h", "1.5h", "-5m", "١٢"):
        with pytest.raises(InvalidArgument, match="expected seconds, or a duration"):
            parse_duration(bad)
    now = time.time() * 1000
    assert abs(parse_time("-5m") - (now - 300_000)) < 5_000
    assert parse_time("1700000000000") == 1_700_000_000_000
    assert parse_time("2024-05-01T12:00:00Z") == 1_714_564_800_000
    with pytest.raises(InvalidArgument, match="a duration ago such as -5m"):
        parse_time("-5x")
