"""Start, stop and inspect a standalone HBase and its Thrift1 gateway from jars, on 127.0.0.1."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import happybase

from tms_hbase.errors import LauncherError
from tms_hbase_launcher.jars import hbase_jars
from tms_hbase_launcher.javac import compile_java
from tms_hbase_launcher.paths import (
    LauncherPaths,
    default_home,
    default_jars_root,
    hbase_version,
    read_state,
    write_state,
)
from tms_hbase_launcher.siteconf import write_conf

HOST = "127.0.0.1"
DEFAULT_THRIFT_PORT = 9090
MASTER_CLASS = "org.apache.hadoop.hbase.master.HMaster"
REGION_SERVER_SOURCE = Path(__file__).with_name("ThriftRegionServer.java")
PORT_RELEASE = 60.0  # seconds a killed server's process may take to let go of its port (a 2-core machine at load 30)
"""The standalone JVM's region server, with HBase's Thrift1 gateway inside it on its short-circuit connection."""

# What HBase's own bin/hbase adds on JDK 17.
JDK17_FLAGS = [
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules",
    "jdk.unsupported",
    "--add-opens",
    "java.base/java.io=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-exports",
    "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports",
    "java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports",
    "java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports",
    "java.base/sun.net.util=ALL-UNNAMED",
]

Progress = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


STOPPED, SERVING, THRIFT_DOWN, NOT_SERVING, REGION_SERVER_GONE = (
    "stopped",
    "serving",
    "thrift-down",
    "not-serving",
    "region-server-gone",
)
_ABORT = "ABORTING region server"  # what HBase's HRegionServer logs when its region server aborts


@dataclass
class LocalStatus:
    """What the launcher knows of its server: processes alive, whether Thrift answers, and ``state``:

    * ``stopped``: its processes are not running;
    * ``serving``: HBase serves data through Thrift;
    * ``thrift-down``: the JVM is alive but the Thrift port takes no connection (its region server is
      not online yet);
    * ``region-server-gone``: the JVM is alive but its region server aborted (``detail`` is the line it
      logged, e.g. an ``OutOfMemoryError``), and with it the Thrift gateway: nothing is served until a restart;
    * ``not-serving``: Thrift takes connections but HBase answers no call (still starting, or hung).
    """

    home: str
    version: str
    running: bool
    answering: bool
    thrift_address: str | None
    web_address: str | None = None
    pids: dict[str, int] = field(default_factory=dict)
    logs: str = ""
    state: str = STOPPED
    detail: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


class LocalHBase:
    """A standalone HBase in one JVM, from jars: master, region server, embedded ZooKeeper and HBase's Thrift1
    gateway, whose puts and reads take the region server's short-circuit connection (ThriftRegionServer.java).

    Idempotent: ``start`` on a running server returns its address; ``stop`` leaves no process.
    """

    def __init__(
        self,
        home: Path | None = None,
        thrift_port: int | None = None,
        progress: Progress = _stderr,
        version: str | None = None,
        *,
        site: dict[str, str] | None = None,
        java_flags: Sequence[str] = (),
    ) -> None:
        home = home or default_home()
        self.paths = LauncherPaths(home, default_jars_root(home), hbase_version(version))
        env_port = os.environ.get("TMS_LOCAL_THRIFT_PORT")
        self.thrift_port = thrift_port or (int(env_port) if env_port else DEFAULT_THRIFT_PORT)
        self.progress = progress
        self._marker = f"-Dtms.hbase.home={self.paths.home}"
        self.site = dict(site or {})  # hbase-site.xml settings over the launcher's own (e.g. Kerberos)
        self.java_flags = list(java_flags)  # more JVM flags (e.g. where the KDC's krb5.conf is)

    # -- public operations -------------------------------------------------------------------

    def start(self, timeout: float = 300.0) -> str:
        """Start (or find running) and wait until a Thrift call succeeds; returns ``host:port``."""
        state = self._read_state()
        if state and self._alive(state):
            address = f"{HOST}:{state['thrift_port']}"
            self.progress(f"local HBase already running, Thrift at {address}")
            self._wait_ready(state, timeout)
            return address
        pids = (state or {}).get("pids", {})
        if len(pids) > 1 and all(self._is_ours(p) for p in pids.values()):
            # Every process of an earlier launcher's layout (a separate Thrift JVM) alive: a server others may
            # be using, not a crash's leftovers. Replacing it is the operator's call, not a side effect.
            raise LauncherError(
                f"a local HBase started by an earlier version of the launcher ({', '.join(sorted(pids))} JVMs) "
                f"runs in {self.paths.home}; stop it with `tms-admin hbase stop`, then `start` runs the one JVM"
            )
        leftovers = bool(state or self._our_pids())
        if leftovers:
            self.progress("found a half-running local HBase; stopping it before a fresh start")
            self.stop()
        java = _find_java()
        # A JVM killed a moment ago may still be closing its sockets: its pid has lost its command line (so it
        # is no longer ours) while its threads finish exiting. Give it that moment before calling the port taken.
        _require_free(
            HOST, self.thrift_port, "--thrift-port or TMS_LOCAL_THRIFT_PORT", PORT_RELEASE if leftovers else 0
        )
        hbase_jars(self.paths, self.progress)
        classes = compile_java(java, REGION_SERVER_SOURCE, self.paths.classes, self.paths.lib)
        zk_port, web_port = _free_port(), _free_port()
        for folder in (self.paths.data, self.paths.logs):
            folder.mkdir(parents=True, exist_ok=True)
        write_conf(self.paths, zk_port, web_port, self.site)
        self.progress(f"starting HBase {self.paths.version} (logs in {self.paths.logs})")
        region_server = [
            *("-D", f"hbase.regionserver.impl={REGION_SERVER_SOURCE.stem}"),
            *("-D", f"tms.thrift.bind={HOST}", "-D", f"tms.thrift.port={self.thrift_port}"),
        ]
        pids = {"master": self._spawn(java, classes, [MASTER_CLASS, *region_server, "start"])}
        state = {
            "version": self.paths.version,
            "thrift_port": self.thrift_port,
            "zk_port": zk_port,
            "web_port": web_port,
            "pids": pids,
            "started_at": time.time(),
        }
        self._write_state(state)
        try:
            self._wait_ready(state, timeout)
        except LauncherError:
            self.stop()
            raise
        address = f"{HOST}:{self.thrift_port}"
        self.progress(f"local HBase is up, Thrift at {address}")
        return address

    def stop(self, grace: float = 30.0) -> bool:
        """Stop both JVMs (SIGTERM, then SIGKILL after ``grace`` seconds); True if any was running."""
        state = self._read_state() or {}
        pids = {p for p in state.get("pids", {}).values() if self._is_ours(p)} | set(self._our_pids())
        for pid in pids:
            _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_pid_alive(p) for p in pids):
            time.sleep(0.2)
        for pid in pids:
            if _pid_alive(pid):
                _signal_group(pid, signal.SIGKILL)
        while any(_pid_alive(p) for p in pids):
            time.sleep(0.1)
        if self.paths.state.exists():
            self.paths.state.unlink()
        if pids:
            self.progress("local HBase stopped")
        return bool(pids)

    def status(self) -> LocalStatus:
        """Report truthfully: which of our JVMs are alive and whether Thrift answers now."""
        state = self._read_state()
        pids = {name: pid for name, pid in (state or {}).get("pids", {}).items() if self._is_ours(pid)}
        running = bool(state) and set(pids) == {"master"}
        address = f"{HOST}:{state['thrift_port']}" if state else None
        answering = state is not None and running and _thrift_answers(HOST, state["thrift_port"], 3000)
        kind, detail = STOPPED, ""
        if state is not None and running:
            # The gateway stops with its region server, so an abort logged explains a closed port too.
            detail = "" if answering else region_server_abort(self.log_file())
            if answering:
                kind = SERVING
            elif detail:
                kind = REGION_SERVER_GONE
            else:
                kind = NOT_SERVING if _accepts(HOST, state["thrift_port"]) else THRIFT_DOWN
        return LocalStatus(
            home=str(self.paths.home),
            version=(state or {}).get("version", self.paths.version),
            running=running,
            answering=answering,
            thrift_address=address,
            web_address=f"{HOST}:{state['web_port']}" if running and state and "web_port" in state else None,
            pids=pids,
            logs=str(self.paths.logs),
            state=kind,
            detail=detail,
        )

    def log_file(self) -> Path:
        """The log4j log of the one JVM (master, region server, ZooKeeper and the Thrift gateway)."""
        return self.paths.logs / "hbase.log"

    # -- helpers ------------------------------------------------------------------------------

    def _spawn(self, java: str, classes: Path, main: list[str]) -> int:
        return spawn_jvm(
            java,
            [f"-Xmx{master_heap()}", "-XX:+UseG1GC", self._marker, *self.java_flags],
            conf=self.paths.conf,
            lib=self.paths.lib,
            log=self.log_file(),
            cwd=self.paths.run,
            main=main,
            classes=classes,
        )

    def _wait_ready(self, state: dict, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        next_note = time.monotonic() + 15
        while True:
            for name, pid in state["pids"].items():
                if not _pid_alive(pid):
                    raise LauncherError(
                        f"HBase {name} process exited during start; last lines of its log:\n" + self._tail()
                    )
            if _thrift_answers(HOST, state["thrift_port"], 5000):
                return
            if time.monotonic() > deadline:
                raise LauncherError(
                    f"HBase did not answer on {HOST}:{state['thrift_port']} within {timeout:.0f}s; "
                    f"see {self.paths.logs}:\n" + self._tail()
                )
            if time.monotonic() > next_note:
                self.progress("  waiting for HBase to finish starting...")
                next_note = time.monotonic() + 15
            time.sleep(0.5)

    def _tail(self, lines: int = 20) -> str:
        chunks = []
        for path in (self.log_file(), self.log_file().with_suffix(".out")):
            if path.exists():
                chunks.extend(path.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(chunks[-lines:])

    def _read_state(self) -> dict | None:
        return read_state(self.paths.state)

    def _write_state(self, state: dict) -> None:
        write_state(self.paths.state, state)

    def _alive(self, state: dict) -> bool:
        pids = state.get("pids", {})
        return set(pids) == {"master"} and all(self._is_ours(p) for p in pids.values())

    def _is_ours(self, pid: int) -> bool:
        return self._marker in _cmdline(pid)

    def _our_pids(self) -> list[int]:
        """Every live JVM started by a launcher with this home, found through /proc."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and self._marker in _cmdline(int(entry.name)):
                found.append(int(entry.name))
        return found


def spawn_jvm(
    java: str,
    flags: list[str],
    conf: Path,
    lib: Path,
    log: Path,
    cwd: Path,
    main: list[str],
    classes: Path | None = None,
) -> int:
    """Start a JVM in a session of its own (so a signal reaches its whole group) with ``conf``, the
    jars of ``lib`` and the launcher's own ``classes`` (if given) on its class path, log4j2 writing to
    ``log`` and stdout/stderr to ``log`` with ``.out`` for ``.log``; returns its pid. ``flags`` go before the
    JDK 17 flags (heap, GC, markers)."""
    cmd = [
        java,
        *flags,
        "-Djava.net.preferIPv4Stack=true",
        *JDK17_FLAGS,
        f"-Dlog4j2.configurationFile={conf / 'log4j2.properties'}",
        f"-Dtms.log.file={log}",
        f"-Dhbase.log.dir={log.parent}",
        "-cp",
        ":".join([*([str(classes)] if classes else []), str(conf), f"{lib}/*"]),
        *main,
    ]
    with open(log.with_suffix(".out"), "ab") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=cwd,
        )
    return proc.pid


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    # a zombie has an empty cmdline: it is not running
    return raw.replace(b"\0", b" ").decode(errors="replace")


def _pid_alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return not re.search(r"^State:\s+Z", status, re.M)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)


def master_heap() -> str:
    """The heap of the standalone JVM (master, region server and ZooKeeper in one): a quarter of the
    machine's memory, 2 to 8 GiB. A region server keeps per-region state in it, and test and benchmark
    runs that leave tables behind once made a fixed 2 GiB run out (OutOfMemoryError, then no answer)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "2g"
    return f"{max(2048, min(8192, total // 4 // 2**20))}m"


def _find_java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise LauncherError("java is not on PATH (nor in $JAVA_HOME); install a JDK 11+ (JDK 17 is tested)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', out)
    if not match or int(match.group(1)) < 11:
        raise LauncherError(f"HBase 2 needs Java 11 or newer; {java} says: {out.strip()}")
    return java


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _require_free(host: str, port: int, hint: str, wait: float = 0.0) -> None:
    """LauncherError if a server listens on the port, still after ``wait`` seconds (connections in TIME_WAIT
    do not count: the Thrift server binds with SO_REUSEADDR too)."""
    deadline = time.monotonic() + wait
    while not _bindable(host, port):
        if time.monotonic() >= deadline:
            raise LauncherError(
                f"port {port} on {host} is already in use by another program; free it or choose "
                f"another port with {hint}"
            )
        time.sleep(0.2)


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


PROBE_TABLE = b"tms_launcher_probe"


def _accepts(host: str, port: int) -> bool:
    """Whether something takes TCP connections on the port."""
    try:
        with socket.create_connection((host, port), timeout=3):
            return True
    except OSError:
        return False


def region_server_abort(master_log: Path, tail_bytes: int = 4 * 1024 * 1024) -> str:
    """The last line in which the standalone JVM's region server said it aborted, if it did since the log
    was last (re)started ("" otherwise): its master lives on, but nothing is served any more."""
    try:
        with open(master_log, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - tail_bytes))
            text = log.read().decode("utf-8", "replace")
    except OSError:
        return ""
    last = ""
    for line in text.splitlines():
        if _ABORT in line:
            last = line.strip()
        elif "Master has completed initialization" in line:
            last = ""  # a later start: an abort before it is history
    return last


def _thrift_answers(host: str, port: int, timeout_ms: int) -> bool:
    """True when HBase serves data through the gateway: a probe table exists and a read from it works.

    Listing tables alone is not enough: the master answers that before a region server has
    joined, and the first table created then waits for one.
    """
    conn = happybase.Connection(host, port, timeout=timeout_ms, autoconnect=False)
    try:
        conn.open()
        if PROBE_TABLE not in conn.tables():
            conn.create_table(PROBE_TABLE, {"d": {"max_versions": 1}})
        conn.table(PROBE_TABLE).row(b"ready")
        return True
    except Exception:  # any failure means "not ready yet"
        return False
    finally:
        conn.close()
