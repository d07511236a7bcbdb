"""A local HBase *cluster* from the standalone launcher's Maven jars: HDFS (a NameNode and DataNodes, WALs and
data on HDFS), ZooKeeper, an HMaster, several region servers and several Thrift1 gateways, each a JVM of its own
on 127.0.0.1 with its own ports, configuration folder, data folder and log.

Separate processes rather than HBase's one-JVM minicluster: a region server can be SIGKILLed for real (its
ZooKeeper session expires, the master splits its WAL from HDFS and reassigns its regions), as in production.

The jars are the standalone's (``pom.xml``; hbase-server brings hadoop-hdfs, hadoop-common and ZooKeeper with
it), resolved once into the same cache (``TMS_HBASE_JARS`` or the standalone home's ``jars``). The cluster
never shares anything else with the standalone HBase: its home is ``~/.cache/tms-hbase-cluster``, its ports
are fixed offsets of a base port (19000) outside the range the standalone picks its random ports from, its
ZooKeeper is its own, and its processes carry a marker (``-Dtms.cluster.home=...``) that the standalone's
``stop`` does not match (nor this one the standalone's).
"""

from __future__ import annotations

import fcntl
import json
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tms_hbase.errors import LauncherError
from tms_hbase_launcher.cluster_conf import (
    HEAPS,
    HOST,
    ClusterLayout,
    ClusterPaths,
    default_cluster_home,
    split_name,
    write_cluster_conf,
)
from tms_hbase_launcher.jars import hbase_jars
from tms_hbase_launcher.javac import compile_java
from tms_hbase_launcher.local import (
    JDK17_FLAGS,
    Progress,
    _cmdline,
    _find_java,
    _pid_alive,
    _signal_group,
    _stderr,
    _thrift_answers,
    spawn_jvm,
)
from tms_hbase_launcher.paths import (
    HBASE_VERSION,
    LauncherPaths,
    default_home,
    default_jars_root,
    read_state,
    write_state,
)

MAIN_CLASSES = {
    "namenode": ["org.apache.hadoop.hdfs.server.namenode.NameNode"],
    "datanode": ["org.apache.hadoop.hdfs.server.datanode.DataNode"],
    "zookeeper": ["org.apache.hadoop.hbase.zookeeper.HQuorumPeer"],
    "master": ["org.apache.hadoop.hbase.master.HMaster", "start"],
    "regionserver": ["org.apache.hadoop.hbase.regionserver.HRegionServer", "start"],
    "thrift": ["org.apache.hadoop.hbase.thrift.ThriftServer"],
}

KINDS = ("namenode", "datanode", "zookeeper", "master", "regionserver", "thrift")
"""The kinds of process in start order."""

ADMIN_SOURCE = Path(__file__).with_name("ClusterAdmin.java")


@dataclass
class ProcessStatus:
    """One process of the cluster: its pid if alive, its ports and whether its first port accepts connections."""

    name: str
    pid: int | None
    ports: list[int]
    listening: bool
    heap: str
    rss_mib: float | None = None


@dataclass
class ClusterStatus:
    """What the launcher knows of its cluster, from /proc, the sockets and the NameNode's and master's JMX."""

    home: str
    version: str
    running: bool
    layout: dict[str, int]
    processes: list[ProcessStatus] = field(default_factory=list)
    live_datanodes: int | None = None
    live_regionservers: list[str] = field(default_factory=list)
    thrift_answering: dict[str, bool] = field(default_factory=dict)
    logs: str = ""

    @property
    def rss_mib(self) -> float:
        """Resident memory of every live process of the cluster, in MiB."""
        return sum(p.rss_mib or 0.0 for p in self.processes)

    @property
    def healthy(self) -> bool:
        """Every process alive and listening, every gateway answering."""
        return (
            self.running
            and all(p.pid and p.listening for p in self.processes)
            and bool(self.thrift_answering)
            and all(self.thrift_answering.values())
        )

    def as_dict(self) -> dict:
        d = asdict(self)
        d["rss_mib"] = round(self.rss_mib, 1)
        d["healthy"] = self.healthy
        return d


@dataclass(frozen=True)
class Region:
    """A region of a table as the master sees it."""

    name: str  # the encoded name, as Admin.move takes it
    start: bytes
    end: bytes
    server: str  # host,port,startcode


class ClusterHBase:
    """Start, stop, inspect and hurt the local HBase cluster.

    ``start`` is idempotent: on a running cluster it starts only the processes that are missing (a killed
    region server comes back) and waits until every one answers. ``stop`` leaves no process behind.
    """

    def __init__(
        self,
        home: Path | None = None,
        layout: ClusterLayout | None = None,
        progress: Progress = _stderr,
    ) -> None:
        self.paths = ClusterPaths(home or default_cluster_home())
        self.jar_paths = LauncherPaths(default_home(), default_jars_root(default_home()))
        self.progress = progress
        self._requested = layout
        self._marker = f"-Dtms.cluster.home={self.paths.home}"
        self._spawned: dict[str, float] = {}  # process name -> when this launcher started it (epoch seconds)
        self._pids: dict[str, int] = {}  # process name -> the pid this launcher started it as

    # -- the cluster as a whole ---------------------------------------------------------------

    @property
    def layout(self) -> ClusterLayout:
        """The running cluster's layout (from its state file), else the one asked for, else the default."""
        state = self._read_state()
        if state:
            return ClusterLayout(**state["layout"])
        return self._requested or ClusterLayout()

    def start(self, timeout: float = 600.0) -> list[str]:
        """Start every missing process in order and wait until each answers; returns the Thrift addresses."""
        with self._lock():
            running = self._running()
            state = self._read_state()
            if running and state:
                layout = ClusterLayout(**state["layout"])
                if self._requested and self._requested != layout:
                    self.progress(f"a cluster with {layout} runs already; keeping it (stop it to change the layout)")
            else:
                layout = self._requested or (ClusterLayout(**state["layout"]) if state else ClusterLayout())
            missing = [name for name in layout.process_names() if name not in running]
            for name in missing:
                for port in layout.ports_of(name):
                    _require_free(port, name)
            java = _find_java()
            hbase_jars(self.jar_paths, self.progress)
            self._write_state({"version": HBASE_VERSION, "layout": layout.as_dict(), "started_at": time.time()})
            if not missing:
                self.progress("the local HBase cluster runs already")
            deadline = time.monotonic() + timeout
            try:
                for kind in KINDS:  # the processes of one kind start together: each kind needs the one before
                    names = [n for n in layout.process_names() if split_name(n)[0] == kind]
                    for name in names:
                        if name in missing:
                            self._spawn(java, layout, name)
                    for name in names:
                        self._wait_ready(layout, name, deadline)
            except LauncherError:
                self.progress("start failed; stopping what was started")
                self.stop()
                raise
            if missing:
                self.progress(f"local HBase cluster is up, Thrift at {', '.join(layout.thrift_addresses)}")
            return layout.thrift_addresses

    def stop(self, grace: float = 30.0) -> bool:
        """Stop every process (SIGTERM in reverse start order, SIGKILL after ``grace``); True if any ran."""
        running = self._running()
        order = [*reversed(self.layout.process_names())]
        pids = [running[n] for n in order if n in running] + [p for n, p in running.items() if n not in order]
        for group in (pids[: len(pids) // 2], pids[len(pids) // 2 :]):  # gateways and servers, then the rest
            for pid in group:
                _signal_group(pid, signal.SIGTERM)
            _wait_dead(group, grace / 2)
        for pid in pids:
            if not _gone(pid):
                _signal_group(pid, signal.SIGKILL)
        _wait_dead(pids, 30.0)
        if pids:
            self.progress("local HBase cluster stopped")
        return bool(pids)

    def status(self, probe: bool = True) -> ClusterStatus:
        """Report truthfully: which processes live, what listens, what HDFS and the master see, which
        gateways answer a Thrift call (``probe``)."""
        layout = self.layout
        running = self._running()
        processes = [
            ProcessStatus(
                name=name,
                pid=running.get(name),
                ports=layout.ports_of(name),
                listening=name in running and _listening(layout.ports_of(name)[0]),
                heap=HEAPS[split_name(name)[0]],
                rss_mib=_rss_mib(running[name]) if name in running else None,
            )
            for name in layout.process_names()
        ]
        status = ClusterStatus(
            home=str(self.paths.home),
            version=HBASE_VERSION,
            running=bool(running),
            layout=layout.as_dict(),
            processes=processes,
            logs=str(self.paths.logs),
        )
        if "namenode" in running:
            status.live_datanodes = _live_datanodes(layout)
        if "master" in running:
            status.live_regionservers = _live_regionservers(layout)
        if probe:
            for i in range(1, layout.thrift_gateways + 1):
                up = f"thrift{i}" in running and _thrift_answers(HOST, layout.thrift_port(i), 5000)
                status.thrift_answering[layout.thrift_addresses[i - 1]] = up
        return status

    def log_file(self, name: str) -> Path:
        """The log4j log of process ``name`` (``namenode``, ``datanode1``, ``zookeeper``, ``master``, ``rs2``...)."""
        split_name(name)  # ValueError if unknown
        return self.paths.log(name)

    # -- faults -------------------------------------------------------------------------------

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` (SIGKILL: no shutdown hook, no WAL close) to process ``name``; returns its pid once it
        is gone. The cluster carries on without it until :meth:`start_process` or :meth:`start`."""
        pid = self._running().get(name)
        if pid is None:
            raise LauncherError(f"{name} is not running")
        _signal_group(pid, sig)
        if not _wait_dead([pid], 60.0):
            raise LauncherError(f"{name} (pid {pid}) did not exit after signal {sig}")
        return pid

    def start_process(self, name: str, timeout: float = 180.0) -> int:
        """Start process ``name`` of the cluster's layout (e.g. a region server that was killed) on its own ports
        and wait until it answers (a region server: until the master counts it); returns its pid."""
        layout = self.layout
        if name not in layout.process_names():
            raise LauncherError(f"{name} is not a process of this cluster ({', '.join(layout.process_names())})")
        with self._lock():
            pid = self._running().get(name)
            if pid is None:
                for port in layout.ports_of(name):
                    _require_free(port, name)
                pid = self._spawn(_find_java(), layout, name)
            self._wait_ready(layout, name, time.monotonic() + timeout)
            return pid

    def restart(self, name: str, timeout: float = 180.0) -> int:
        """SIGKILL process ``name`` and start it again on the same ports; returns the new pid."""
        self.kill(name)
        return self.start_process(name, timeout)

    def regions(self, table: str) -> list[Region]:
        """The regions of ``table`` (a full HBase name, e.g. ``tms_messages``), in key order, with their server."""
        out = self._admin("regions", table)
        return [
            Region(r["name"], bytes.fromhex(r["start"]), bytes.fromhex(r["end"]), r["server"]) for r in json.loads(out)
        ]

    def server_of_last_region(self, table: str) -> str:
        """The process name (``rs2``) of the region server holding ``table``'s last region: for a message table,
        where every topic's new messages are written."""
        port = int(self.regions(table)[-1].server.split(",")[1])
        layout = self.layout
        return next(
            p for p in layout.process_names() if split_name(p)[0] == "regionserver" and layout.ports_of(p)[0] == port
        )

    def move_region(self, region: str, server: str | None = None) -> str:
        """Move the region with encoded name ``region`` to ``server`` (``host,port,startcode``; by default
        another live region server) and wait until it is open there; returns the server."""
        return self._admin("move", region, *([server] if server else [])).strip()

    def split_region(self, table: str, key: bytes | None = None) -> list[Region]:
        """Split ``table`` at ``key`` (its largest region at its midpoint if None) and wait for the daughters
        to open; returns the table's regions afterwards."""
        self._admin("split", table, key.hex() if key else "")
        return self.regions(table)

    def balance(self) -> None:
        """Run the master's balancer once (it moves regions to even out the servers)."""
        self._admin("balance")

    # -- helpers ------------------------------------------------------------------------------

    def _spawn(self, java: str, layout: ClusterLayout, name: str) -> int:
        kind, _ = split_name(name)
        conf = write_cluster_conf(layout, self.paths, name)
        self.paths.logs.mkdir(parents=True, exist_ok=True)
        if kind == "namenode" and not (self.paths.data(name) / "name" / "current" / "VERSION").exists():
            self.progress("formatting HDFS")
            self._run_to_end(java, conf, name + "-format", [*MAIN_CLASSES[kind], "-format", "-nonInteractive"])
        main = list(MAIN_CLASSES[kind])
        if kind == "thrift":
            port = layout.ports_of(name)[0]
            main += ["-b", HOST, "-p", str(port), "--infoport", "-1", "-threadpool", "start"]
        self.progress(f"  starting {name} (heap {HEAPS[kind]}, ports {layout.ports_of(name)})")
        self._spawned[name] = time.time()
        self._pids[name] = spawn_jvm(
            java,
            self._flags(name, kind),
            conf=conf,
            lib=self.jar_paths.lib,
            log=self.paths.log(name),
            cwd=self.paths.data(name),
            main=main,
        )
        return self._pids[name]

    def _flags(self, name: str, kind: str) -> list[str]:
        return [
            f"-Xmx{HEAPS[kind]}",
            "-XX:+UseSerialGC",
            "-XX:ReservedCodeCacheSize=64m",
            "-XX:MaxDirectMemorySize=256m",
            self._marker,
            f"-Dtms.cluster.process={name}",
            f"-Dhadoop.log.dir={self.paths.logs}",
            "-Dzookeeper.admin.enableServer=false",
        ]

    def _run_to_end(self, java: str, conf: Path, name: str, main: list[str]) -> None:
        log = self.paths.log(name)
        pid = spawn_jvm(java, ["-Xmx256m", self._marker], conf, self.jar_paths.lib, log, self.paths.run, main)
        if not _wait_dead([pid], 120.0):
            raise LauncherError(f"{name} did not finish; see {log}")

    def _wait_ready(self, layout: ClusterLayout, name: str, deadline: float) -> None:
        kind, i = split_name(name)
        next_note = time.monotonic() + 20
        while True:
            # The pid spawn_jvm returned: for a moment after the spawn the java launcher's /proc cmdline is
            # empty, so _running() cannot see a process this launcher has just started.
            if name not in self._running() and not _pid_alive(self._pids.get(name, -1)):
                raise LauncherError(f"{name} exited during start; last lines of its log:\n{self._tail(name)}")
            if _ready(layout, kind, i, self._spawned.get(name, 0.0)):
                return
            if time.monotonic() > deadline:
                raise LauncherError(f"{name} did not become ready in time; see {self.paths.log(name)}")
            if time.monotonic() > next_note:
                self.progress(f"  waiting for {name}...")
                next_note = time.monotonic() + 20
            time.sleep(0.5)

    def _tail(self, name: str, lines: int = 20) -> str:
        chunks: list[str] = []
        for path in (self.paths.log(name), self.paths.log(name).with_suffix(".out")):
            if path.exists():
                chunks.extend(path.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(chunks[-lines:])

    def _admin(self, *args: str) -> str:
        """Run ClusterAdmin (compiled on first use) with HBase's Java client against this cluster."""
        write_cluster_conf(self.layout, self.paths, "master")
        classes = compile_java(_find_java(), ADMIN_SOURCE, self.paths.tools, self.jar_paths.lib)
        cmd = [
            _find_java(),
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            *JDK17_FLAGS,
            "-Dlog4j2.level=WARN",
            f"-Dtms.log.file={self.paths.log('admin')}",  # the conf folder's log4j2.properties names it
            "-cp",
            f"{classes}:{self.paths.conf('master')}:{self.jar_paths.lib}/*",
            "ClusterAdmin",
            *args,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            said = [line for line in done.stderr.splitlines() if not line.lstrip().startswith(("at ", "..."))]
            raise LauncherError(f"cluster admin {' '.join(args)} failed:\n" + "\n".join(said[-15:]))
        return done.stdout

    def _running(self) -> dict[str, int]:
        """Every live process of this cluster by name, found through /proc (the state file is not trusted)."""
        found: dict[str, int] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            args = _cmdline(int(entry.name)).split(" ")
            if self._marker in args and _pid_alive(int(entry.name)):
                for arg in args:
                    if arg.startswith("-Dtms.cluster.process="):
                        found[arg.split("=", 1)[1]] = int(entry.name)
        return found

    @contextmanager
    def _lock(self) -> Iterator[None]:
        self.paths.run.mkdir(parents=True, exist_ok=True)
        with open(self.paths.run / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _read_state(self) -> dict | None:
        return read_state(self.paths.state)

    def _write_state(self, state: dict) -> None:
        write_state(self.paths.state, state)


def _ready(layout: ClusterLayout, kind: str, i: int, since: float) -> bool:
    """Whether a process of ``kind`` answers as it should once started (a region server: the master counts one
    on its port started after ``since``, not the killed one it has not yet declared dead)."""
    if kind == "namenode":
        return _live_datanodes(layout) is not None
    if kind == "datanode":
        live = _live_datanodes(layout)
        return live is not None and live >= i
    if kind == "regionserver":
        rpc, _ = layout.regionserver_ports(i)
        servers = [s.split(",") for s in _live_regionservers(layout)]
        return any(port == str(rpc) and int(code) >= int(since * 1000) - 5000 for _, port, code in servers)
    if kind == "thrift":
        return _thrift_answers(HOST, layout.thrift_port(i), 5000)
    if kind == "master":
        return _jmx(layout.master_info_port, "Hadoop:service=HBase,name=Master,sub=Server") is not None
    return _listening(layout.ports_of(kind)[0])


def _jmx(port: int, query: str) -> dict | None:
    """The first bean of a Hadoop/HBase JMX servlet query, or None if it does not answer."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/jmx?qry={query}", timeout=5) as reply:
            beans = json.load(reply).get("beans", [])
    except (OSError, ValueError):
        return None
    return beans[0] if beans else None


def _live_datanodes(layout: ClusterLayout) -> int | None:
    bean = _jmx(layout.namenode_http_port, "Hadoop:service=NameNode,name=FSNamesystemState")
    return None if bean is None else int(bean.get("NumLiveDataNodes", 0))


def _live_regionservers(layout: ClusterLayout) -> list[str]:
    """``host,port,startcode`` of every region server the master counts as live."""
    bean = _jmx(layout.master_info_port, "Hadoop:service=HBase,name=Master,sub=Server")
    servers = (bean or {}).get("tag.liveRegionServers", "")
    return [s for s in servers.split(";") if s]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=2):
            return True
    except OSError:
        return False


def _require_free(port: int, name: str) -> None:
    """LauncherError if something listens on ``port`` already (a standalone HBase, another program)."""
    if _listening(port):
        raise LauncherError(
            f"port {port} on {HOST}, which the cluster's {name} needs, is taken by another program; "
            "choose other ports with --base-port (or TMS_HBASE_CLUSTER_BASE_PORT)"
        )


def _gone(pid: int) -> bool:
    """Whether every thread of ``pid`` has exited: a JVM's main thread turns zombie while other threads still
    run (and hold its sockets), so the process's own state is not enough."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return True
    for task in tasks:
        try:
            state = next(line for line in (task / "status").read_text().splitlines() if line.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if "Z" not in state.split()[1]:
            return False
    return True


def _wait_dead(pids: list[int], timeout: float) -> bool:
    """Wait until every thread of every pid has exited; False if some still run after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not all(_gone(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None
