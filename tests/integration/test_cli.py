"""tms-admin as users run it: a real process, human and --json output, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ..tx_server import TxServer, free_port

ROOT = Path(__file__).resolve().parents[2]

# The console script installed next to this interpreter (a virtualenv's bin/ need not be on PATH).
TMS_ADMIN = str(Path(sys.executable).with_name("tms-admin"))


def tms_admin(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TMS_ADMIN, *args], env=env, capture_output=True, text=True, timeout=120)


def ok(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    result = tms_admin(env, *args)
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.usefixtures("installed_env")  # made through the library: `tms-admin init` is test_human_output's
def test_topic_lifecycle_json(tms_env: dict[str, str]) -> None:
    created = json.loads(ok(tms_env, "topic", "create", "ns:orders", "--ttl", "60", "-p", "owner=ops", "--json").stdout)
    assert (created["generation"], created["ttl"], created["properties"]["owner"]) == (1, 60, "ops")
    got = json.loads(ok(tms_env, "topic", "get", "ns:orders", "--json").stdout)
    assert got == {k: v for k, v in created.items() if k != "created"} and created["created"]
    ok(tms_env, "topic", "create", "ns:other")
    listed = json.loads(ok(tms_env, "topic", "list", "ns", "--json").stdout)
    assert [t["topic"] for t in listed] == ["ns:orders", "ns:other"]
    updated = json.loads(ok(tms_env, "topic", "update", "ns:orders", "--ttl", "120", "--json").stdout)
    assert (updated["ttl"], updated["generation"], updated["properties"]["owner"]) == (120, 1, "ops")
    assert updated["changes"] == {"ttl": {"old": "60", "new": "120"}}
    assert json.loads(ok(tms_env, "topic", "delete", "ns:orders", "--json").stdout) == {"deleted": "ns:orders"}
    assert [t["topic"] for t in json.loads(ok(tms_env, "topic", "list", "--json").stdout)] == ["ns:other"]
    again = json.loads(ok(tms_env, "topic", "create", "ns:orders", "--json").stdout)
    assert again["generation"] == 2


def test_human_output(tms_env: dict[str, str]) -> None:
    assert "created" in ok(tms_env, "init").stdout
    assert "none (all existed)" in ok(tms_env, "init").stdout
    assert (
        ok(tms_env, "topic", "create", "ns:t", "--ttl", "30").stdout.strip() == "created ns:t (generation 1, ttl 30 s)"
    )
    shown = ok(tms_env, "topic", "get", "ns:t").stdout
    assert "generation  1" in shown and "ttl         30 s" in shown
    table = ok(tms_env, "topic", "list", "ns").stdout.splitlines()
    assert table[0].split() == ["TOPIC", "GENERATION", "TTL(s)"] and table[1].split() == ["ns:t", "1", "30"]
    assert ok(tms_env, "topic", "list", "empty").stdout.strip() == "no topics"


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["topic", "get", "ns:missing"], 3, "error: topic ns:missing does not exist"),
        (["topic", "delete", "ns:missing"], 3, "error: topic ns:missing does not exist"),
        (["topic", "update", "ns:missing", "--ttl", "5"], 3, "does not exist"),
        (["topic", "create", "ns:t", "--ttl", "xyz"], 2, "error: bad ttl 'xyz'"),
        (["topic", "create", "ns:t", "--ttl", "0"], 2, "error: bad ttl '0'"),
        (["topic", "create", "ns:t", "--ttl", "-4"], 2, "bad ttl"),
        (["topic", "create", "ns:t", "-p", "novalue"], 2, "expected KEY=VALUE"),
        (["topic", "create", "ns:bad name"], 2, "bad topic name"),
        (["topic", "create", "nocolon"], 2, "expected namespace:topic"),
        (["topic", "list", "bad ns"], 2, "bad namespace name"),
    ],
)
@pytest.mark.usefixtures("installed_env")  # made through the library: `tms-admin init` is test_human_output's
def test_bad_input_exit_codes_and_nothing_changed(
    tms_env: dict[str, str], args: list[str], code: int, message: str
) -> None:
    result = tms_admin(tms_env, *args)
    assert result.returncode == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert json.loads(ok(tms_env, "topic", "list", "--json").stdout) == []


@pytest.mark.usefixtures("installed_env")  # made through the library: `tms-admin init` is test_human_output's
def test_tx_mode_is_set_shown_and_validated(tms_env: dict[str, str]) -> None:
    created = json.loads(ok(tms_env, "topic", "create", "ns:t", "-p", "tx.mode=transactional", "--json").stdout)
    assert (created["tx_mode"], created["properties"]["tx.mode"]) == ("transactional", "transactional")
    assert "tx.mode     transactional" in ok(tms_env, "topic", "get", "ns:t").stdout.splitlines()
    updated = json.loads(ok(tms_env, "topic", "update", "ns:t", "--tx-mode", "non-transactional", "--json").stdout)
    assert updated["tx_mode"] == "non-transactional"
    assert json.loads(ok(tms_env, "topic", "get", "ns:t", "--json").stdout)["tx_mode"] == "non-transactional"
    ok(tms_env, "topic", "create", "ns:plain")
    assert "tx.mode     any" in ok(tms_env, "topic", "get", "ns:plain").stdout.splitlines()
    for args in (["-p", "tx.mode=sometimes"], ["--tx-mode", "sometimes"]):
        result = tms_admin(tms_env, "topic", "update", "ns:t", *args)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert "sometimes" in result.stderr and "transactional" in result.stderr
    assert json.loads(ok(tms_env, "topic", "get", "ns:t", "--json").stdout)["tx_mode"] == "non-transactional"


@pytest.mark.usefixtures("installed_env")  # made through the library: `tms-admin init` is test_human_output's
def test_update_changes_only_what_it_names_and_says_what_changed(tms_env: dict[str, str]) -> None:
    ok(tms_env, "topic", "create", "ns:t", "--ttl", "3600", "--tx-mode", "transactional", "-p", "owner=ops")
    assert ok(tms_env, "topic", "update", "ns:t", "-p", "owner=x").stdout.splitlines() == [
        "updated ns:t:",
        "  owner: ops -> x",
    ]
    got = json.loads(ok(tms_env, "topic", "get", "ns:t", "--json").stdout)
    assert (got["ttl"], got["tx_mode"], got["properties"]["owner"]) == (3600, "transactional", "x")
    assert ok(tms_env, "topic", "update", "ns:t", "-p", "owner=x").stdout.strip() == "ns:t unchanged"
    removed = json.loads(ok(tms_env, "topic", "update", "ns:t", "-d", "owner", "-d", "ttl", "--json").stdout)
    assert removed["changes"] == {"owner": {"old": "x", "new": None}, "ttl": {"old": "3600", "new": "604800"}}
    assert removed["tx_mode"] == "transactional"
    replaced = json.loads(ok(tms_env, "topic", "update", "ns:t", "--replace", "-p", "k=v", "--json").stdout)
    assert replaced["changes"] == {"k": {"old": None, "new": "v"}, "tx.mode": {"old": "transactional", "new": None}}
    assert (replaced["tx_mode"], replaced["ordering"], replaced["generation"]) == ("any", "sequencer", 1)
    for args, message in (
        ([], "nothing to change"),
        (["-p", "a=1", "-d", "a"], "both set and deleted: a"),
        (["--replace", "-d", "k"], "--replace or --delete-property"),
    ):
        result = tms_admin(tms_env, "topic", "update", "ns:t", *args)
        assert result.returncode == 2 and message in result.stderr, result.stderr


@pytest.mark.usefixtures("installed_env")  # made through the library: `tms-admin init` is test_human_output's
def test_duplicate_create_exit_code_keeps_properties(tms_env: dict[str, str]) -> None:
    ok(tms_env, "topic", "create", "ns:t", "--ttl", "10")
    result = tms_admin(tms_env, "topic", "create", "ns:t", "--ttl", "20")
    assert (result.returncode, result.stderr.strip()) == (4, "error: topic ns:t already exists")
    assert json.loads(ok(tms_env, "topic", "get", "ns:t", "--json").stdout)["ttl"] == 10


def test_unreachable_hbase_exit_code(tms_env: dict[str, str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = tms_admin(tms_env, "--thrift", f"127.0.0.1:{port}", "--timeout", "2", "topic", "list")
    assert result.returncode == 5
    assert len(result.stderr.strip().splitlines()) == 1
    assert f"127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr
    bad = tms_admin(tms_env, "--thrift", "nonsense", "topic", "list")
    assert bad.returncode == 2 and "bad HBase Thrift address" in bad.stderr


COMMANDS = [
    [],
    ["init"],
    ["topic"],
    ["topic", "create"],
    ["topic", "update"],
    ["topic", "get"],
    ["topic", "list"],
    ["topic", "delete"],
    ["hbase"],
    ["hbase", "start"],
    ["hbase", "stop"],
    ["hbase", "status"],
    ["hbase", "logs"],
    ["tx"],
    ["tx", "serve"],
    ["tx", "status"],
    ["tx", "invalid"],
    ["tx", "snapshot"],
    ["tx", "truncate"],
    ["tx", "prune"],
    ["sweeper"],
    ["sweeper", "state"],
    ["settings"],
]
SWEEPER_COMMANDS = [[], ["once"], ["run"], ["status"]]


@pytest.mark.parametrize(
    "program, command",
    [("tms-admin", c) for c in COMMANDS] + [("tms-sweeper", c) for c in SWEEPER_COMMANDS],
    ids=lambda c: " ".join(c) if isinstance(c, list) else c,
)
def test_every_command_has_help(program: str, command: list[str]) -> None:
    script = str(Path(sys.executable).with_name(program))
    result = subprocess.run([script, *command, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout.startswith(f"Usage: {program}")
    description = result.stdout.split("\n\n")[1].strip()
    assert len(description) > 20, result.stdout


@pytest.mark.parametrize("placement", ["before", "after"])
@pytest.mark.parametrize("tool", ["tms-admin", "tms-sweeper"])
@pytest.mark.usefixtures("installed_env")  # made through the library: `tms-admin init` is test_human_output's
def test_both_tools_take_the_same_connection_options_and_exit_codes(
    tms_env: dict[str, str], hbase_address: str, tool: str, placement: str
) -> None:
    """The connection options go before the command's name or after it, in both tools."""
    command = ["topic", "list"] if tool == "tms-admin" else ["status"]

    def run(thrift: str) -> subprocess.CompletedProcess:
        where = ["--thrift", thrift, "--timeout", "5"]
        args = [*where, *command] if placement == "before" else [*command, *where]
        program = str(Path(sys.executable).with_name(tool))
        return subprocess.run([program, *args], env=tms_env, capture_output=True, text=True, timeout=120)

    bad = run("nonsense")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: bad HBase Thrift address")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    down = run(dead)
    assert down.returncode == 5 and dead in down.stderr and "Traceback" not in down.stderr
    failover = run(f"{dead},{hbase_address}")  # the first gateway is down: the second serves
    assert failover.returncode == 0, failover.stderr
    program = str(Path(sys.executable).with_name(tool))
    both = subprocess.run(  # given in both places, the one after the command's name wins
        [program, "--thrift", dead, *command, "--thrift", hbase_address, "--timeout", "5"],
        env=tms_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert both.returncode == 0, both.stderr
    other = subprocess.run(
        [program, "--prefix", "nosuchprefix", *command, "--json"], env=tms_env, capture_output=True, text=True
    )
    assert other.returncode == 7 and "'nosuchprefix'" in other.stderr  # before the name, over the environment


@pytest.mark.parametrize("program", ["tms-admin", "tms-sweeper", "tms-gateway"])
def test_every_program_reports_the_package_version(program: str) -> None:
    """`--version` on every console script prints the one version the package metadata also carries."""
    from importlib.metadata import version

    import tms_hbase

    script = str(Path(sys.executable).with_name(program))
    result = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{program}, version {tms_hbase.__version__}"
    assert version("tms-hbase") == tms_hbase.__version__


def test_the_readme_tms_admin_block_runs_in_order(tms_env: dict[str, str]) -> None:
    """README.md's tms-admin block, as a user would paste it, with a transaction server running."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- tested: tms-admin -->\s*```bash\n(.*?)```", readme, re.S)
    assert block, "README.md lost its tested tms-admin block"
    server = TxServer(tms_env, free_port()).start()
    try:
        env = {**tms_env, "TMS_TX_SERVER": server.address}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.group(1)], env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "updated billing:invoices:\n  owner: ops -> (not set)\n  ttl: 3600 -> 7200" in out
    assert "published 100 messages to billing:ledger" in out
    assert "published 3 messages to billing:invoices in 1 batches in one transaction" in out
    assert out.count(" committed ") == 3  # the transactional tail: the three lines, committed
    assert "publish  500 msgs" in out and "consume  500 msgs" in out  # tms-admin bench, every message consumed
    assert "dropped the installation" in out


@pytest.mark.usefixtures("installed_env")  # made through the library: `tms-admin init` is test_human_output's
def test_small_things_a_new_user_meets(tms_env: dict[str, str]) -> None:
    # human durations
    created = json.loads(ok(tms_env, "topic", "create", "ns:t", "--ttl", "1h30m", "--json").stdout)
    assert created["ttl"] == 5400 and created["created"]
    # --if-not-exists: exit 0, nothing changed
    again = json.loads(ok(tms_env, "topic", "create", "ns:t", "--ttl", "5", "--if-not-exists", "--json").stdout)
    assert (again["ttl"], again["created"]) == (5400, False)
    assert ok(tms_env, "topic", "create", "ns:t", "--if-not-exists").stdout.startswith("exists already: ns:t")
    ok(tms_env, "sub", "create", "ns:t", "s", "--start", "-5m")
    assert "exists already" in ok(tms_env, "sub", "create", "ns:t", "s", "--if-not-exists").stdout
    assert tms_admin(tms_env, "sub", "create", "ns:t", "s").returncode == 4
    # two starting points at once are refused
    both = tms_admin(tms_env, "sub", "reset", "ns:t", "s", "--earliest", "--latest")
    assert both.returncode == 2 and "exactly one of" in both.stderr
    # usage errors: one line, with where to look
    for args, message in (
        (["topic", "create"], "error: Missing argument 'NAMESPACE:TOPIC'. (see 'tms-admin topic create --help')"),
        (["topic", "crate"], "error: No such command 'crate'."),
        (["--nope"], "error: No such option '--nope'."),
    ):
        result = tms_admin(tms_env, *args)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith(message), result.stderr
    sweeper = subprocess.run(
        [str(Path(sys.executable).with_name("tms-sweeper")), "once", "--grace", "x"],
        env=tms_env,
        capture_output=True,
        text=True,
    )
    assert sweeper.returncode == 2 and len(sweeper.stderr.splitlines()) == 1, sweeper.stderr
    # a reader that goes away (`| head -1`) ends the command quietly, with exit code 0
    subprocess.run(
        [TMS_ADMIN, "topic", "publish", "ns:t"],
        input="\n".join(map(str, range(3000))),
        env=tms_env,
        text=True,
        check=True,
        capture_output=True,
    )
    tail = subprocess.Popen(
        [TMS_ADMIN, "topic", "tail", "ns:t", "--last", "3000"],
        env=tms_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert tail.stdout is not None
    tail.stdout.readline()
    tail.stdout.close()
    assert tail.wait(timeout=120) == 0
    assert tail.stderr is not None and tail.stderr.read() == b""


# Loads a module list and runs tms-admin's main() as its console script does, then prints which were loaded.
STARTUP_PROBE = """
import atexit, sys
atexit.register(lambda: print(",".join(m for m in {modules!r} if m in sys.modules), file=sys.stderr))
from tms_hbase_admin.cli import main
main({args!r}, prog_name="tms-admin")
"""


def test_listing_topics_loads_no_metrics_avro_idl_parse_client_part_or_command_it_does_not_run(
    installed_env: dict[str, str],
) -> None:
    """`tms-admin topic list` against a real installation: it lists, and prometheus_client (made at the first
    metric update), fastavro (at the first Avro encoding), happybase with the HBase IDL its import parses
    (the storage port uses the generated ``hbase_thrift``), the client's parts it does not use (publish, fetch,
    consumers, shared queues: made on first use), asyncio and the other commands' modules stay unloaded."""
    modules = ("prometheus_client", "fastavro", "happybase", "Hbase_thrift", "tms_hbase_admin.inspect")
    modules += ("tms_hbase_admin.subscriptions", "asyncio", "tms_hbase.publish", "tms_hbase.fetch")
    modules += ("tms_hbase.consume.consumer", "tms_hbase.consume.subscription_admin", "tms_hbase.shared")
    probe = STARTUP_PROBE.format(modules=modules, args=["topic", "list", "--json"])
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=installed_env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
    assert result.stderr.strip() == "", f"loaded: {result.stderr}"
