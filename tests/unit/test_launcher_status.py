"""``tms-admin hbase status`` tells a region server that aborted (its JVM lives on, its gateway stopped with it)
from one that serves, by what HBase logged since the master last came up, and a closed Thrift port from a mute
one."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tms_hbase.errors import LauncherError
from tms_hbase_launcher import LocalHBase, local
from tms_hbase_launcher.local import master_heap, region_server_abort
from tms_hbase_launcher.paths import write_state

STARTED = (
    "2026-11-26T09:01:40,006 INFO  [master/localhost:0:becomeActiveMaster] master.HMaster: "
    "Master has completed initialization 12.974sec"
)
ABORTED = (
    "2026-11-26T10:12:03,114 ERROR [RS:0;localhost:16020] regionserver.HRegionServer: ***** ABORTING region server "
    "localhost,16020,1795683683000: Unrecoverable exception while closing *****\n"
    "java.lang.OutOfMemoryError: Java heap space"
)


def test_an_abort_after_the_last_start_is_reported(tmp_path: Path) -> None:
    log = tmp_path / "master.log"
    log.write_text(f"{STARTED}\nsome work\n{ABORTED}\n")
    assert "ABORTING region server localhost,16020" in region_server_abort(log)


def test_an_abort_before_a_restart_is_history(tmp_path: Path) -> None:
    log = tmp_path / "master.log"
    log.write_text(f"{STARTED}\n{ABORTED}\n{STARTED}\nserving again\n")
    assert region_server_abort(log) == ""
    assert region_server_abort(tmp_path / "missing.log") == ""


@pytest.mark.parametrize(
    ("memory_gib", "heap"), [(4, "2048m"), (24, "6144m"), (64, "8192m")], ids=["small", "this size", "large"]
)
def test_the_local_hbase_heap_is_a_quarter_of_the_memory_within_2_to_8_gib(
    monkeypatch: pytest.MonkeyPatch, memory_gib: int, heap: str
) -> None:
    """A fixed 2 GiB ran out once about 850 tables had piled up: the heap grows with the machine."""
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": memory_gib * 2**30 // 4096}
    monkeypatch.setattr(local.os, "sysconf", pages.__getitem__)
    assert master_heap() == heap


@pytest.fixture
def jvm_stand_in(tmp_path: Path) -> Iterator[tuple[LocalHBase, int]]:
    """A launcher whose state names a live process carrying its home's marker (a sleeping python, standing in
    for the JVM whose Thrift port is closed or mute), on a free port."""
    launcher = LocalHBase(home=tmp_path / "home", thrift_port=_free_port(), progress=lambda _m: None)
    marker = f"-Dtms.hbase.home={launcher.paths.home}"
    proc = _stand_in(marker)
    write_state(
        launcher.paths.state,
        {"thrift_port": launcher.thrift_port, "web_port": _free_port(), "pids": {"master": proc.pid}},
    )
    try:
        yield launcher, proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_closed_thrift_port_with_an_abort_logged_is_region_server_gone(jvm_stand_in: tuple[LocalHBase, int]) -> None:
    """The gateway stops with its region server: the abort explains the closed port."""
    launcher, pid = jvm_stand_in
    launcher.paths.logs.mkdir(parents=True)
    launcher.log_file().write_text(f"{STARTED}\n{ABORTED}\n")
    status = launcher.status()
    assert (status.running, status.answering, status.state) == (True, False, "region-server-gone")
    assert "ABORTING region server" in status.detail and status.pids == {"master": pid}


def test_a_closed_thrift_port_without_an_abort_is_thrift_down(jvm_stand_in: tuple[LocalHBase, int]) -> None:
    launcher, _pid = jvm_stand_in
    status = launcher.status()
    assert (status.running, status.state, status.detail) == (True, "thrift-down", "")


def test_a_mute_thrift_port_is_not_serving(jvm_stand_in: tuple[LocalHBase, int]) -> None:
    launcher, _pid = jvm_stand_in
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", launcher.thrift_port))
        mute.listen()
        status = launcher.status()
    assert (status.running, status.answering, status.state) == (True, False, "not-serving")


def test_start_refuses_to_replace_a_running_server_of_the_earlier_two_jvm_layout(tmp_path: Path) -> None:
    """Its processes all alive: someone's server, which ``start`` must not stop as a crash's leftovers."""
    launcher = LocalHBase(home=tmp_path / "home", thrift_port=_free_port(), progress=lambda _m: None)
    marker = f"-Dtms.hbase.home={launcher.paths.home}"
    procs = [_stand_in(marker), _stand_in(marker)]
    try:
        pids = {"master": procs[0].pid, "thrift": procs[1].pid}
        write_state(launcher.paths.state, {"thrift_port": launcher.thrift_port, "pids": pids})
        with pytest.raises(LauncherError, match=r"earlier version of the launcher \(master, thrift JVMs\)"):
            launcher.start()
        assert [p.poll() for p in procs] == [None, None]
        assert launcher.status().state == "stopped"  # not this launcher's server: status does not claim it
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_state_naming_a_dead_process_is_stopped(tmp_path: Path) -> None:
    launcher = LocalHBase(home=tmp_path / "home", thrift_port=_free_port(), progress=lambda _m: None)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    write_state(launcher.paths.state, {"thrift_port": launcher.thrift_port, "pids": {"master": int(done.stdout)}})
    status = launcher.status()
    assert (status.running, status.state, status.pids) == (False, "stopped", {})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stand_in(marker: str) -> subprocess.Popen:
    """A sleeping python with ``marker`` on its command line, returned once its exec shows it (read at once
    after Popen, /proc still has the parent's command line)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", marker])
    deadline = time.monotonic() + 30
    while marker.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the stand-in process did not start"
        time.sleep(0.01)
    return proc


def test_a_port_let_go_while_the_launcher_waits_is_taken_and_one_held_is_a_clear_error() -> None:
    """A server killed a moment ago may hold its port while its process finishes exiting: a restart waits for
    it; a port another program keeps is refused with the option to choose another."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    with pytest.raises(LauncherError, match=f"port {port} .* already in use.*--thrift-port"):
        local._require_free("127.0.0.1", port, "--thrift-port", wait=0.5)
    letting_go = threading.Timer(0.5, holder.close)
    letting_go.start()
    local._require_free("127.0.0.1", port, "--thrift-port", wait=local.PORT_RELEASE)
    letting_go.join()
