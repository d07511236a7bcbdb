"""Find or start the real HBase the test session runs against (docs/design.md, requirement 23), in this order:

1. ``$TMS_HBASE_THRIFT`` names one: use it (any HBase with a Thrift1 gateway, e.g. ``docker compose up -d
   hbase`` from this repository, or a cluster: docs/existing-cluster.md);
2. otherwise start the project's local launcher (``tms-admin hbase start``), the HBase CI runs on.

There is no fallback to a fake: if neither works the session fails.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import happybase

from tms_hbase.config import THRIFT_ENV, thrift_address
from tms_hbase_launcher import LocalHBase


def _answers(address: str, timeout_ms: int = 5000) -> bool:
    host, port = thrift_address(address)
    conn = happybase.Connection(host, port, timeout=timeout_ms, autoconnect=False)
    try:
        conn.open()
        conn.tables()
        return True
    except Exception:
        return False
    finally:
        conn.close()


def _endpoint(address: str) -> tuple[str, int]:
    host, port = thrift_address(address)
    try:
        return socket.gethostbyname(host), port
    except OSError:
        return host, port


def served_by_launcher(address: str) -> bool:
    """Whether ``address`` is the Thrift gateway of the local launcher's running HBase (its jars, its
    ZooKeeper), as opposed to an external HBase named by ``$TMS_HBASE_THRIFT``."""
    status = LocalHBase(progress=lambda _msg: None).status()
    return bool(status.running and status.thrift_address) and _endpoint(status.thrift_address) == _endpoint(address)


@contextmanager
def hbase_for_tests() -> Iterator[tuple[str, str]]:
    """Yield (Thrift address, how it was found); stops only what it started itself."""
    address = os.environ.get(THRIFT_ENV)
    if address:
        if not _answers(address, 15000):
            raise RuntimeError(f"{THRIFT_ENV}={address} is set but no HBase Thrift gateway answers there")
        yield address, f"${THRIFT_ENV}" + (", the local launcher's" if served_by_launcher(address) else ", external")
        return
    launcher = LocalHBase()
    # its processes, not whether it answered within the status check's 3 s: a loaded machine delays that
    # answer, and a server others use would then be stopped at the end as if this run had started it
    was_running = launcher.status().running
    address = launcher.start()
    try:
        yield address, "local launcher" + (" (already running)" if was_running else "")
    finally:
        if not was_running:
            launcher.stop()
