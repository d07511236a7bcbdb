"""A private local HBase for the faults that restart or kill HBase itself.

The shared HBase (``~/.cache/tms-hbase``) serves everyone's tests and must never be restarted by the
suite, so ``--faults hbase`` runs the whole workload on a second standalone HBase: the same launcher
(``tms_hbase_launcher.LocalHBase``) with a home of its own under the run folder, its own Thrift port,
ZooKeeper port and random master/region-server ports, and the jars of the shared home (no second
download). Its processes carry their own home in their command line, so stopping it never touches the
shared one. Its data lives on the local file system: standalone HBase's WAL there is not synced the
way HDFS syncs it, so what a killed standalone HBase loses is reported under the fault, not blamed on
the library (that is what the calibration run with only ``hbase`` faults is for).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path

from tms_hbase_launcher import LocalHBase
from tms_hbase_launcher.paths import default_home, default_jars_root


def _free_port_below_ephemeral() -> int:
    """A free port below the kernel's ephemeral range. While HBase is down, clients retrying a connection to
    a port inside that range can be handed that very port as their own and connect to themselves (TCP
    self-connect); the restarted Thrift server then cannot bind it."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for port in range(max(1025, low - 12000), low):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range for the run's own HBase")


class OwnHBase:
    def __init__(self, home: Path, log: Path) -> None:
        os.environ.setdefault("TMS_HBASE_JARS", str(default_jars_root(default_home())))
        self.log = log
        self.launcher = LocalHBase(home=home, thrift_port=_free_port_below_ephemeral(), progress=self._progress)

    def _progress(self, message: str) -> None:
        with open(self.log, "a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {message}\n")

    def start(self, timeout: float = 660.0, attempts: int = 3) -> str:
        for attempt in range(1, attempts + 1):
            try:
                return self.launcher.start(timeout=timeout)
            except Exception as exc:  # LauncherError: logged, tried again, raised after the last attempt
                self._progress(f"start attempt {attempt} failed: {exc}")
                if attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    def kill(self) -> None:
        """SIGKILL its JVM (no orderly shutdown: a crash), and wait until it is gone."""
        status = self.launcher.status()
        for pid in status.pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self.launcher.stop(grace=0.0)

    def stop(self) -> None:
        self.launcher.stop()
