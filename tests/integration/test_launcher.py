"""The local HBase launcher: one JVM with the Thrift gateway inside the region server, idempotent start,
truthful status, clean stop, clear errors, nothing acknowledged lost to a kill -9.

These start a second standalone HBase in a home and on a port of their own, sharing the jar cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import happybase
import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.errors import LauncherError
from tms_hbase_launcher import LocalHBase, default_home
from tms_hbase_launcher.paths import default_jars_root

from ..tx_server import free_port

TMS_ADMIN = str(Path(sys.executable).with_name("tms-admin"))
BATCHES = 1000  # of 5 puts, in the short-circuit test: over RPC, one call each


def java_processes_of(home: Path) -> list[int]:
    marker = f"-Dtms.hbase.home={home}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


@pytest.fixture
def launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalHBase]:
    monkeypatch.setenv("TMS_HBASE_JARS", str(default_jars_root(default_home())))
    local = LocalHBase(home=tmp_path / "home", thrift_port=free_port(), progress=lambda _m: None)
    yield local
    local.stop()


@pytest.mark.slow
def test_start_twice_is_one_server_and_stop_leaves_nothing(launcher: LocalHBase) -> None:
    home = launcher.paths.home
    assert not launcher.status().running
    address = launcher.start()
    first = launcher.status()
    assert first.running and first.answering and first.thrift_address == address
    assert sorted(java_processes_of(home)) == sorted(first.pids.values())

    assert launcher.start() == address
    again = launcher.status()
    assert again.pids == first.pids
    assert len(java_processes_of(home)) == 1

    with MessagingClient(address, "launchertest", create_tables=True) as client:
        assert client.create_topic(TopicId("ns", "t")).generation == 1

    assert launcher.stop() is True
    assert java_processes_of(home) == []
    after = launcher.status()
    assert not after.running and not after.answering
    assert launcher.stop() is False

    # data survives a restart
    launcher.start()
    with MessagingClient(address, "launchertest") as client:
        assert client.get_topic(TopicId("ns", "t")).generation == 1


@pytest.mark.slow
def test_a_jvm_killed_9_is_reported_and_a_restart_serves_every_acknowledged_publish(launcher: LocalHBase) -> None:
    address = launcher.start()
    topic = TopicId("ns", "crash")
    batches = [[f"{b}-{i}".encode() for i in range(100)] for b in range(20)]
    with MessagingClient(address, "launchertest", create_tables=True) as client:
        client.create_topic(topic)
        for batch in batches:
            client.publish(topic, batch)  # acknowledged: in the write-ahead log
    os.kill(launcher.status().pids["master"], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while launcher.status().running:
        assert time.monotonic() < deadline, "the killed JVM is still reported running"
        time.sleep(0.1)
    status = launcher.status()
    assert (status.running, status.answering, status.state) == (False, False, "stopped")
    launcher.start()  # replaces the dead server; the region server replays its log
    assert launcher.status().answering
    with MessagingClient(address, "launchertest") as client:
        assert [m.payload for m in client.fetch(topic)] == [p for batch in batches for p in batch]


def _listening_inodes(port: int) -> set[str]:
    """The socket inodes listening on ``port`` of 127.0.0.1 (/proc/net/tcp: state 0A is LISTEN)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == f"0100007F:{port:04X}" and fields[3] == "0A":
            inodes.add(fields[9])
    return inodes


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    return inodes


def _wait_for(check: Callable[[], bool], what: str, seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


def _region_server_metric(web: str, sub: str, name: str) -> int:
    """One metric from the region server's /jmx (published a few seconds after it starts: waited for)."""
    url = f"http://{web}/jmx?qry=Hadoop:service=HBase,name=RegionServer,sub={sub}"
    beans: list[dict] = []

    def published() -> bool:
        with urllib.request.urlopen(url, timeout=30) as answer:
            beans[:] = json.load(answer)["beans"]
        return bool(beans) and name in beans[0]

    _wait_for(published, f"the region server's metric {sub}/{name}")
    return int(beans[0][name])


@pytest.mark.slow
def test_the_thrift_gateway_runs_in_the_region_servers_jvm_and_its_puts_take_no_rpc(launcher: LocalHBase) -> None:
    """The gateway listens in the one JVM, and its puts reach the region server through the short-circuit
    connection: rows land (the region server counts their writes) while its RPC server sees no call for them.
    A call the gateway makes on an ordinary connection (the table's regions) does reach the RPC server, so the
    counter is live.

    The RPC server also answers the master's chores, more of them the longer the puts take (a loaded machine),
    so the puts are many small batches: over RPC each would be a call of its own, 1,000 in all, far above
    what the chores make meanwhile; through the short-circuit the count is the chores' alone."""
    address = launcher.start()
    status = launcher.status()
    assert java_processes_of(launcher.paths.home) == [status.pids["master"]]
    assert _listening_inodes(launcher.thrift_port) <= _socket_inodes(status.pids["master"])
    assert _listening_inodes(launcher.thrift_port)
    assert "Thrift gateway in the region server's JVM" in launcher.log_file().read_text()
    assert status.web_address is not None
    web = status.web_address

    host, port = address.split(":")
    connection = happybase.Connection(host, int(port), timeout=60000)
    try:
        connection.create_table("launcher_short_circuit", {"d": {"max_versions": 1}})
        table = connection.table("launcher_short_circuit")
        calls = _region_server_metric(web, "IPC", "ProcessCallTime_num_ops")
        writes = _region_server_metric(web, "Server", "writeRequestCount")
        for b in range(BATCHES):
            with table.batch() as batch:
                for i in range(5):
                    batch.put(f"{b:04d}-{i}".encode(), {b"d:m": os.urandom(1024)})
        assert sum(1 for _ in table.scan()) == BATCHES * 5
        _wait_for(
            lambda: _region_server_metric(web, "Server", "writeRequestCount") >= writes + BATCHES * 5,
            "the region server to count the writes",
        )
        assert table.regions()  # an ordinary client connection: a scan of hbase:meta over RPC
        _wait_for(
            lambda: _region_server_metric(web, "IPC", "ProcessCallTime_num_ops") > calls,
            "the region server's RPC server to count the gateway's hbase:meta lookup",
        )
        # the batches over RPC would be at least a call each; the lookup and the chores are a few dozen
        assert _region_server_metric(web, "IPC", "ProcessCallTime_num_ops") - calls < BATCHES // 2
    finally:
        connection.delete_table("launcher_short_circuit", disable=True)
        connection.close()


@pytest.mark.slow
def test_status_tells_when_hbase_serves_nothing_though_its_processes_live(launcher: LocalHBase) -> None:
    """The master's JVM (with its region server) frozen: alive, Thrift takes connections, nothing answers."""
    launcher.start()
    env = {**os.environ, "TMS_HBASE_HOME": str(launcher.paths.home)}
    master = launcher.status().pids["master"]
    os.kill(master, signal.SIGSTOP)
    try:  # both at once: the freeze stays well inside ZooKeeper's session timeout even on a loaded machine
        asked = [
            subprocess.Popen([TMS_ADMIN, "hbase", "status", *flag], env=env, stdout=subprocess.PIPE, text=True)
            for flag in (["--json"], [])
        ]
        (as_json, _), (said, _) = (p.communicate(timeout=120) for p in asked)
    finally:
        os.kill(master, signal.SIGCONT)
    assert [p.returncode for p in asked] == [1, 1]
    status = json.loads(as_json)
    assert (status["state"], status["running"], status["answering"]) == ("not-serving", True, False)
    assert said.startswith("running, but HBase answers no call through Thrift")
    deadline = time.monotonic() + 120
    while launcher.status().state != "serving":
        assert time.monotonic() < deadline, "HBase did not serve again after SIGCONT"
        time.sleep(1)


def test_port_in_use_is_a_clear_error(launcher: LocalHBase) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", launcher.thrift_port))
        blocker.listen()
        with pytest.raises(LauncherError, match=f"port {launcher.thrift_port} .* already in use"):
            launcher.start()
    assert java_processes_of(launcher.paths.home) == []


def _path_without(tool: str, tmp_path: Path) -> str:
    """A PATH with python and the usual tools but not ``tool``."""
    keep = tmp_path / "bin"
    keep.mkdir(exist_ok=True)
    for folder in os.environ["PATH"].split(os.pathsep):
        for entry in Path(folder).glob("*") if Path(folder).is_dir() else []:
            if entry.name != tool and not (keep / entry.name).exists() and os.access(entry, os.X_OK):
                (keep / entry.name).symlink_to(entry)
    return str(keep)


def test_missing_java_is_a_clear_error(launcher: LocalHBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", _path_without("java", tmp_path))
    with pytest.raises(LauncherError, match="java is not on PATH"):
        launcher.start()


def test_missing_mvn_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMS_HBASE_JARS", str(tmp_path / "empty-jar-cache"))
    monkeypatch.setenv("PATH", _path_without("mvn", tmp_path))
    local = LocalHBase(home=tmp_path / "home", thrift_port=free_port(), progress=lambda _m: None)
    with pytest.raises(LauncherError, match=r"mvn \(Apache Maven\) is not on PATH"):
        local.start()
    assert not (tmp_path / "empty-jar-cache" / "hbase-2.6.1" / ".complete").exists()
