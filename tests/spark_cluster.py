"""A standalone Spark cluster on 127.0.0.1 for the cluster tests: a master and workers started from the pyspark
package's own launch classes (``org.apache.spark.deploy.master.Master`` and ``...worker.Worker``, run by the
package's ``bin/spark-class``), each with its own ports, work directory and log, one core each.

It lives with the tests, not in the launcher: users run Spark with Spark's own deployment (its ``sbin``
scripts, YARN, Kubernetes), which tms-hbase does not replace; this exists so that the ``tms`` data source is
tested with executors in processes of their own that a test can kill. A worker's executors and their Python
workers are its descendants: killing them all at once is a node dying. ``stop`` leaves no process behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .tx_server import free_port

HOST = "127.0.0.1"
DAEMON_HEAP = "256m"
"""Heap of the master and of each worker daemon (they only schedule)."""
EXECUTOR_MEMORY = "512m"
"""Heap of each executor; a worker offers 768m, so one executor of one core fits on each."""
WORKER_MEMORY = "768m"


def spark_home() -> Path:
    """The pyspark package's folder: its ``jars/`` hold Spark, and it is what SPARK_HOME must name."""
    import pyspark

    return Path(pyspark.__file__).parent


def _two_ports() -> tuple[int, int]:
    """Two free loopback ports, different from each other (an RPC and a web UI port of one daemon)."""
    first = free_port()
    return first, next(port for port in iter(free_port, None) if port != first)


@dataclass
class _Daemon:
    name: str
    process: subprocess.Popen
    ports: tuple[int, int]  # RPC, web UI


@dataclass
class SparkCluster:
    """The master and ``workers`` workers, with logs and work directories under ``folder``."""

    folder: Path
    workers: int = 2
    master: _Daemon | None = None
    alive: dict[str, _Daemon] = field(default_factory=dict)
    _started: int = 0  # workers started so far (names are never reused)

    @property
    def url(self) -> str:
        """The master's URL, for ``SparkSession.builder.master``."""
        assert self.master, "not started"
        return f"spark://{HOST}:{self.master.ports[0]}"

    def start(self, timeout: float = 180.0) -> SparkCluster:
        """Start the master and the workers; return when the master sees every worker alive."""
        self.folder.mkdir(parents=True, exist_ok=True)
        rpc, ui = _two_ports()
        self.master = self._spawn(
            "master", ["org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(rpc)], (rpc, ui)
        )
        # The master's ports are bound once its report answers: a worker's free_port() cannot pick them after.
        self.wait(lambda s: "workers" in s, "the master's report", timeout)
        for _ in range(self.workers):
            self.start_worker(timeout)
        return self

    def start_worker(self, timeout: float = 180.0) -> str:
        """Start one more worker (1 core, WORKER_MEMORY) and wait until the master counts it alive; its name."""
        self._started += 1
        name = f"worker-{self._started}"
        work = self.folder / name
        work.mkdir(exist_ok=True)
        rpc, ui = _two_ports()
        main = ["org.apache.spark.deploy.worker.Worker", "--host", HOST, "--port", str(rpc)]
        main += ["--cores", "1", "--memory", WORKER_MEMORY, "--work-dir", str(work), self.url]
        self.alive[name] = self._spawn(name, main, (rpc, ui))
        self.wait(lambda s: f"{HOST}:{rpc}" in _alive_workers(s), f"{name} registered with the master", timeout)
        return name

    def kill_worker(self, name: str) -> list[int]:
        """SIGKILL the worker and every process under it (its executors and their Python workers), as if its
        machine died; returns their pids."""
        daemon = self.alive.pop(name)
        victims = _tree(daemon.process.pid)
        for pid in victims:
            _signal(pid, signal.SIGKILL)
        daemon.process.wait()
        deadline = time.monotonic() + 30
        while any(_living(p) for p in victims):
            assert time.monotonic() < deadline, f"processes of {name} outlived SIGKILL"
            time.sleep(0.1)
        return victims

    def executors(self, name: str) -> list[int]:
        """The pids of the executor JVMs a worker runs (its children)."""
        return [p for p in _tree(self.alive[name].process.pid) if "CoarseGrainedExecutorBackend" in _cmdline(p)]

    def state(self) -> dict[str, Any]:
        """The master's own report (its web UI's ``/json``): workers, their state, applications."""
        assert self.master
        with urllib.request.urlopen(f"http://{HOST}:{self.master.ports[1]}/json/", timeout=10) as answer:
            return json.loads(answer.read())

    def wait(self, condition: Any, what: str, timeout: float = 180.0) -> None:
        """Wait until ``condition(self.state())`` holds; fail naming ``what`` (with the logs' tails) otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if condition(self.state()):
                    return
            except (OSError, ValueError):
                pass  # the master's UI is not up yet, or another program answered on its port before it
            assert self.master and self.master.process.poll() is None, f"the master died:\n{self.tail('master')}"
            assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{self.tails()}"
            time.sleep(0.5)

    def session_config(self) -> dict[str, str]:
        """The SparkSession settings of a driver on this cluster: small executors of one core each, on both
        workers, and the driver on loopback (executors connect back to it)."""
        return {
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.executor.cores": "1",
            "spark.cores.max": str(self.workers),
            "spark.driver.memory": "512m",
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": str(self.workers),
            "spark.default.parallelism": str(self.workers),
        }

    def stop(self) -> None:
        """SIGTERM every daemon, SIGKILL whatever of them and their executors is left after 20 s: no process
        stays behind."""
        daemons = [*self.alive.values(), *([self.master] if self.master else [])]
        processes = [pid for daemon in daemons for pid in _tree(daemon.process.pid)]
        for daemon in daemons:
            _signal(daemon.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while any(_living(p) for p in processes) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in processes:
            if _living(pid):
                _signal(pid, signal.SIGKILL)
        for daemon in daemons:
            daemon.process.wait()
        self.alive.clear()
        self.master = None

    def tail(self, name: str, lines: int = 30) -> str:
        """The end of a daemon's log."""
        path = self.folder / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def tails(self) -> str:
        """The ends of the logs of the daemons that run."""
        names = ["master", *self.alive]
        return "\n".join(f"--- {n}.log\n{self.tail(n)}" for n in names)

    def _spawn(self, name: str, main: list[str], ports: tuple[int, int]) -> _Daemon:
        home = spark_home()
        log = self.folder / f"{name}.log"
        # spark-class (which execs java) sets what Spark's launcher needs (SPARK_SCALA_VERSION, the jars
        # folder); the worker's executors are started the same way, by its own launcher
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": HOST, "SPARK_DAEMON_MEMORY": DAEMON_HEAP}
        command = [str(home / "bin" / "spark-class"), *main, "--webui-port", str(ports[1])]
        with log.open("ab") as out:  # a session of its own: a Ctrl-C (or make's SIGINT) reaches pytest only, whose
            # fixture then stops the daemons in order
            process = subprocess.Popen(
                command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=self.folder, start_new_session=True
            )
        return _Daemon(name, process, ports)


def _alive_workers(state: dict[str, Any]) -> set[str]:
    """host:port of the workers the master counts alive."""
    return {f"{w['host']}:{w['port']}" for w in state.get("workers", []) if w.get("state") == "ALIVE"}


def _tree(root: int) -> list[int]:
    """``root`` and its live descendants (zombies excluded)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()  # after the name: state, ppid
            except OSError:
                continue
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root] if _living(root) else []
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _living(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""
