"""A private local HBase for the faults that restart or kill HBase itself.

The shared HBase (``~/.cache/tms-hbase``) serves everyone's tests and must never be restarted by the
suite, so ``--faults hbase`` runs the whole workload on a second standalone HBase: the same launcher
(``tms_hbase.launcher.LocalHBase``) with a home of its own under the run folder, its own Thrift port,
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

from tms_hbase.launcher import LocalHBase
from tms_hbase.launcher.paths import default_home, default_jars_root


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OwnHBase:
    def __init__(self, home: Path, log: Path) -> None:
        os.environ.setdefault("TMS_HBASE_JARS", str(default_jars_root(default_home())))
        self.log = log
        self.launcher = LocalHBase(home=home, thrift_port=_free_port(), progress=self._progress)

    def _progress(self, message: str) -> None:
        with open(self.log, "a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {message}\n")

    def start(self, timeout: float = 300.0) -> str:
        return self.launcher.start(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL both JVMs (no orderly shutdown: a crash), and wait until they are gone."""
        status = self.launcher.status()
        for pid in status.pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self.launcher.stop(grace=0.0)

    def stop(self) -> None:
        self.launcher.stop()
