"""The local HBase launcher: idempotent start, truthful status, clean stop, clear errors.

These start a second standalone HBase in a home and on a port of their own, sharing the jar cache.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.errors import LauncherError
from tms_hbase.launcher import LocalHBase, default_home
from tms_hbase.launcher.paths import default_jars_root

from ..tx_server import free_port

TMS_ADMIN = str(Path(sys.executable).with_name("tms-admin"))


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
    assert len(java_processes_of(home)) == 2

    with MessagingClient(address, "launchertest") as client:
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
def test_status_tells_when_a_process_died(launcher: LocalHBase) -> None:
    launcher.start()
    os.kill(launcher.status().pids["thrift"], 9)
    deadline = 50
    while launcher.status().running and deadline:
        deadline -= 1
        import time

        time.sleep(0.1)
    status = launcher.status()
    assert not status.running and not status.answering
    launcher.start()  # replaces the half-dead server
    assert launcher.status().answering


@pytest.mark.slow
def test_status_tells_when_hbase_serves_nothing_though_its_processes_live(launcher: LocalHBase) -> None:
    """The master's JVM (with its region server) frozen: alive, Thrift takes connections, nothing answers."""
    launcher.start()
    env = {**os.environ, "TMS_HBASE_HOME": str(launcher.paths.home)}
    master = launcher.status().pids["master"]
    os.kill(master, signal.SIGSTOP)
    try:
        as_json = subprocess.run([TMS_ADMIN, "hbase", "status", "--json"], env=env, capture_output=True, timeout=120)
        said = subprocess.run([TMS_ADMIN, "hbase", "status"], env=env, capture_output=True, text=True, timeout=120)
    finally:
        os.kill(master, signal.SIGCONT)
    assert as_json.returncode == 1 and said.returncode == 1
    status = json.loads(as_json.stdout)
    assert (status["state"], status["running"], status["answering"]) == ("not-serving", True, False)
    assert said.stdout.startswith("running, but HBase answers no call through Thrift")
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


def test_unknown_log_name(launcher: LocalHBase) -> None:
    with pytest.raises(LauncherError, match="choose master or thrift"):
        launcher.log_file("nope")
    assert stat.S_ISDIR(os.stat(launcher.paths.home.parent).st_mode)
