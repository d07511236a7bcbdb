"""tms-admin hbase …: the local standalone HBase with its Thrift gateway, and a local HBase cluster."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tms_hbase.errors import LauncherError
from tms_hbase.ops.cli_options import fail

from .errors import handle_errors
from .output import emit, json_option

if TYPE_CHECKING:
    from tms_hbase_launcher.cluster import ClusterHBase

port_option = click.option(
    "--thrift-port",
    type=click.IntRange(1, 65535),
    envvar="TMS_LOCAL_THRIFT_PORT",
    show_envvar=True,
    help="Port of the Thrift gateway on 127.0.0.1 [default: 9090].",
)


def _cluster(**options: Any) -> ClusterHBase:
    """The local cluster's launcher (imported here: --help must not load the launcher and happybase)."""
    from tms_hbase_launcher.cluster import ClusterHBase

    return ClusterHBase(**options)


NOT_INSTALLED = (
    "the local HBase launcher is not installed: it is the tms-hbase-launcher distribution of a tms-hbase "
    "checkout, not part of the library (from the checkout: pip install -e ./launcher)"
)


class LauncherGroup(click.Group):
    """A group whose commands run the launcher (``tms_hbase_launcher``, a distribution of its own): where it
    is not installed, a command ends with one line saying how to install it and exit code 6 (--help works)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as exc:
            if exc.name != "tms_hbase_launcher":
                raise
            fail(LauncherError(NOT_INSTALLED))


@click.group(cls=LauncherGroup)
def hbase() -> None:
    """Run a local standalone HBase for development and tests.

    One JVM runs HBase's master, its region server, ZooKeeper and the Thrift gateway, which reaches the
    region server without an RPC. Everything lives under $TMS_HBASE_HOME (default ~/.cache/tms-hbase): the jars
    (downloaded once with mvn), configuration, data and logs. Needs java (11+), mvn and the launcher, which
    is not part of the library: `pip install -e ./launcher` from a checkout of tms-hbase (without it every
    command here ends with exit code 6).
    """


@hbase.command()
@port_option
@click.option(
    "--hbase-version",
    metavar="2.X.Y",
    envvar="TMS_HBASE_VERSION",
    show_envvar=True,
    help="The HBase release to run (its -hadoop3 build from Maven Central: 2.5.2 or later) [default: 2.6.1].",
)
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds to wait for HBase to answer.")
@json_option
@handle_errors
def start(thrift_port: int | None, hbase_version: str | None, timeout: float, as_json: bool) -> None:
    """Start HBase and its Thrift gateway on 127.0.0.1 and wait until a Thrift call works.

    Idempotent: if it runs already, this only prints its address. One release per $TMS_HBASE_HOME: give another
    its own home.
    """
    from tms_hbase_launcher import LocalHBase

    address = LocalHBase(thrift_port=thrift_port, version=hbase_version).start(timeout=timeout)
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
    from tms_hbase_launcher import LocalHBase

    was_running = LocalHBase(progress=lambda _msg: None).stop()
    emit(as_json, {"stopped": was_running}, lambda d: "stopped" if d["stopped"] else "not running")


@hbase.command()
@json_option
@handle_errors
def status(as_json: bool) -> None:
    """Tell whether the local HBase runs and serves data through Thrift (exit code 1 if not).

    The state (``state`` in --json) is one of: stopped; serving; thrift-down (the JVM lives but the
    Thrift port takes no connection: its region server is not online yet); region-server-gone (the JVM
    lives but its region server aborted, e.g. out of memory, and the gateway with it: ``detail`` is what it
    logged; restart with `tms-admin hbase stop` and `start`); not-serving (Thrift takes connections but
    HBase answers no call: starting, or hung). ``web_address`` is the region server's web UI, with its
    metrics at /jmx and /prometheus.
    """
    from tms_hbase_launcher import LocalHBase

    st = LocalHBase().status()

    def human(d: dict) -> str:
        if not d["running"]:
            return f"not running (home {d['home']})"
        pids = ", ".join(f"{k} pid {v}" for k, v in d["pids"].items())
        where = f"Thrift {d['thrift_address']} ({pids}); web UI http://{d['web_address']}; logs in {d['logs']}"
        said = {
            "serving": "running and serving",
            "thrift-down": "running, but the Thrift gateway takes no connection",
            "region-server-gone": "REGION SERVER GONE: the JVM runs but its region server aborted, nothing is "
            "served (restart: tms-admin hbase stop, then start)",
            "not-serving": "running, but HBase answers no call through Thrift (still starting, or hung)",
        }[d["state"]]
        return f"{said}; {where}" + (f"\n  {d['detail']}" if d["detail"] else "")

    emit(as_json, st.as_dict(), human)
    if st.state != "serving":
        raise SystemExit(1)


@hbase.command()
@click.option("-n", "--lines", type=int, default=50, show_default=True, help="How many lines to show.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C to stop).")
@handle_errors
def logs(lines: int, follow: bool) -> None:
    """Show the log of the local HBase's JVM (master, region server, ZooKeeper and Thrift gateway)."""
    from tms_hbase_launcher import LocalHBase, default_home

    path = LocalHBase().log_file()
    if not path.exists():
        raise click.ClickException(f"no log yet at {path} (home {default_home()})")
    _tail(path, lines, follow)


@hbase.group()
def cluster() -> None:
    """Run a local HBase cluster: HDFS, ZooKeeper, a master, region servers and Thrift gateways.

    Every process is a JVM of its own on 127.0.0.1 with its own ports (a base port, 19000 by default,
    plus fixed offsets), configuration, data and log, under $TMS_HBASE_CLUSTER_HOME (default
    ~/.cache/tms-hbase-cluster). The jars are the standalone's; nothing else is shared with it, so both
    can run at once. launcher/README.md tells the ports and heaps.
    """


@cluster.command("start")
@click.option(
    "--base-port",
    type=click.IntRange(1024, 65135),
    envvar="TMS_HBASE_CLUSTER_BASE_PORT",
    show_envvar=True,
    help="Every port is this plus a fixed offset (Thrift gateways at +90, +91...) [default: 19000].",
)
@click.option("--regionservers", type=click.IntRange(1, 20), default=3, show_default=True)
@click.option("--datanodes", type=click.IntRange(1, 10), default=2, show_default=True)
@click.option("--thrift-gateways", type=click.IntRange(1, 9), default=2, show_default=True)
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds to wait for it all.")
@json_option
@handle_errors
def cluster_start(
    base_port: int | None, regionservers: int, datanodes: int, thrift_gateways: int, timeout: float, as_json: bool
) -> None:
    """Start every process of the cluster that is not running and wait until each answers.

    Idempotent: on a running cluster it starts only what is missing (e.g. a killed region server)
    and keeps the running cluster's layout.
    """
    from tms_hbase_launcher.cluster_conf import DEFAULT_BASE_PORT, ClusterLayout

    layout = ClusterLayout(base_port or DEFAULT_BASE_PORT, datanodes, regionservers, thrift_gateways)
    addresses = _cluster(layout=layout).start(timeout=timeout)
    emit(
        as_json,
        {"thrift": addresses},
        lambda d: f"HBase Thrift gateways: {' '.join(d['thrift'])}\nexport TMS_HBASE_THRIFT={','.join(d['thrift'])}",
    )


@cluster.command("stop")
@json_option
@handle_errors
def cluster_stop(as_json: bool) -> None:
    """Stop every process of the cluster; none is left behind. Its data stays for the next start."""
    was_running = _cluster(progress=lambda _msg: None).stop()
    emit(as_json, {"stopped": was_running}, lambda d: "stopped" if d["stopped"] else "not running")


@cluster.command("status")
@json_option
@handle_errors
def cluster_status(as_json: bool) -> None:
    """Each process: pid, ports, heap, resident memory; what HDFS and the master see; which gateways
    answer (exit code 1 unless all of it is up)."""
    st = _cluster().status()

    def human(d: dict) -> str:
        if not d["running"]:
            return f"not running (home {d['home']})"
        rows = [
            f"  {p['name']:<10} "
            + (
                f"pid {p['pid']:<7} {'listening' if p['listening'] else 'NOT listening':<13}"
                if p["pid"]
                else "DOWN" + " " * 21
            )
            + f" ports {','.join(map(str, p['ports'])):<18} heap {p['heap']:<5}"
            + (f" rss {p['rss_mib']:.0f} MiB" if p["rss_mib"] else "")
            for p in d["processes"]
        ]
        gateways = ", ".join(f"{a} {'answering' if up else 'NOT answering'}" for a, up in d["thrift_answering"].items())
        return "\n".join(
            [
                f"{'healthy' if d['healthy'] else 'NOT healthy'}: {len(d['live_regionservers'])} live region servers, "
                f"{d['live_datanodes']} live DataNodes, total rss {d['rss_mib']:.0f} MiB",
                *rows,
                f"Thrift: {gateways}",
                f"logs in {d['logs']}",
            ]
        )

    emit(as_json, st.as_dict(), human)
    if not st.healthy:
        raise SystemExit(1)


@cluster.command("logs")
@click.argument("which", default="master")
@click.option("-n", "--lines", type=int, default=50, show_default=True, help="How many lines to show.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C to stop).")
@handle_errors
def cluster_logs(which: str, lines: int, follow: bool) -> None:
    """Show the log of one process: namenode, datanode1, zookeeper, master, rs1, thrift2..."""
    try:
        path = _cluster().log_file(which)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    if not path.exists():
        raise click.ClickException(f"no log yet at {path}")
    _tail(path, lines, follow)


def _tail(path: Path, lines: int, follow: bool) -> None:
    """Print the last ``lines`` of a log, and with ``follow`` what is added to it until Ctrl-C."""
    cmd = ["tail", "-n", str(lines)] + (["-F"] if follow else []) + [str(path)]
    with contextlib.suppress(KeyboardInterrupt):
        subprocess.run(cmd, check=False)


@cluster.command("kill")
@click.argument("which")
@click.option("--restart", is_flag=True, help="Start it again on its own ports once it is gone.")
@json_option
@handle_errors
def cluster_kill(which: str, restart: bool, as_json: bool) -> None:
    """SIGKILL one process (e.g. rs2, thrift1): no shutdown, as a crash. `cluster start` brings it back."""
    launcher = _cluster()
    killed = launcher.kill(which)
    result: dict = {"killed": which, "pid": killed}
    if restart:
        result["new_pid"] = launcher.start_process(which)
    emit(
        as_json,
        result,
        lambda d: f"killed {which} (pid {killed})" + (f", restarted as pid {d['new_pid']}" if restart else ""),
    )


@cluster.command("regions")
@click.argument("table")
@json_option
@handle_errors
def cluster_regions(table: str, as_json: bool) -> None:
    """The regions of an HBase table (e.g. tms_messages) and the server of each."""
    regions = _cluster().regions(table)
    rows = [{"name": r.name, "start": r.start.hex(), "end": r.end.hex(), "server": r.server} for r in regions]
    emit(as_json, rows, lambda d: "\n".join(f"{r['name']} [{r['start']}, {r['end']}) on {r['server']}" for r in d))


@cluster.command("move")
@click.argument("region")
@click.argument("server", required=False)
@handle_errors
def cluster_move(region: str, server: str | None) -> None:
    """Move a region (its encoded name) to SERVER (host,port,startcode; default another live one)."""
    click.echo(_cluster().move_region(region, server))


@cluster.command("split")
@click.argument("table")
@click.option("--key", help="Split row in hex (default: flush, then the largest region's midpoint).")
@handle_errors
def cluster_split(table: str, key: str | None) -> None:
    """Split a table's region and wait until the daughters are open."""
    regions = _cluster().split_region(table, bytes.fromhex(key) if key else None)
    click.echo(f"{table} has {len(regions)} regions")
