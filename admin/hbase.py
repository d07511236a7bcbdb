"""tms-admin hbase …: the local standalone HBase (and Thrift gateway) run from Maven jars."""

from __future__ import annotations

import contextlib

import click

from .errors import handle_errors
from .output import emit, json_option

port_option = click.option(
    "--thrift-port",
    type=click.IntRange(1, 65535),
    envvar="TMS_LOCAL_THRIFT_PORT",
    show_envvar=True,
    help="Port of the Thrift gateway on 127.0.0.1 [default: 9090].",
)


@click.group()
def hbase() -> None:
    """Run a local standalone HBase for development and tests.

    Everything lives under $TMS_HBASE_HOME (default ~/.cache/tms-hbase): the jars
    (downloaded once with mvn), configuration, data and logs. Needs java (11+) and mvn.
    """


@hbase.command()
@port_option
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds to wait for HBase to answer.")
@json_option
@handle_errors
def start(thrift_port: int | None, timeout: float, as_json: bool) -> None:
    """Start HBase and its Thrift gateway on 127.0.0.1 and wait until a Thrift call works.

    Idempotent: if it runs already, this only prints its address.
    """
    from tms_hbase.launcher import LocalHBase

    address = LocalHBase(thrift_port=thrift_port).start(timeout=timeout)
    emit(
        as_json,
        {"thrift": address},
        lambda d: f"HBase Thrift gateway: {d['thrift']}\nexport TMS_HBASE_THRIFT={d['thrift']}",
    )


@hbase.command()
@json_option
@handle_errors
def stop(as_json: bool) -> None:
    """Stop the local HBase; no process of it is left behind."""
    from tms_hbase.launcher import LocalHBase

    was_running = LocalHBase(progress=lambda _msg: None).stop()
    emit(as_json, {"stopped": was_running}, lambda d: "stopped" if d["stopped"] else "not running")


@hbase.command()
@json_option
@handle_errors
def status(as_json: bool) -> None:
    """Tell whether the local HBase runs and answers Thrift calls (exit code 1 if not)."""
    from tms_hbase.launcher import LocalHBase

    st = LocalHBase().status()

    def human(d: dict) -> str:
        if not d["running"]:
            return f"not running (home {d['home']})"
        state = "answering" if d["answering"] else "NOT answering"
        pids = ", ".join(f"{k} pid {v}" for k, v in d["pids"].items())
        return f"running, Thrift {d['thrift_address']} {state} ({pids}); logs in {d['logs']}"

    emit(as_json, st.as_dict(), human)
    if not (st.running and st.answering):
        raise SystemExit(1)


@hbase.command()
@click.argument("which", type=click.Choice(["master", "thrift"]), default="master")
@click.option("-n", "--lines", type=int, default=50, show_default=True, help="How many lines to show.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C to stop).")
@handle_errors
def logs(which: str, lines: int, follow: bool) -> None:
    """Show the log of the HBase master (with region server and ZooKeeper) or of the Thrift gateway."""
    from tms_hbase.launcher import LocalHBase, default_home

    path = LocalHBase().log_file(which)
    if not path.exists():
        raise click.ClickException(f"no log yet at {path} (home {default_home()})")
    cmd = ["tail", "-n", str(lines)] + (["-F"] if follow else []) + [str(path)]
    import subprocess

    with contextlib.suppress(KeyboardInterrupt):
        subprocess.run(cmd, check=False)
