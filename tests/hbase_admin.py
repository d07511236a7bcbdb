"""HBase admin calls the Thrift1 gateway lacks (region splits), through HBase's Java client with the
launcher's jars and the ZooKeeper of the launcher's HBase — tests only (the ``region_splitter`` fixture).

On an external HBase (``$TMS_HBASE_THRIFT`` naming one the launcher did not start) these calls need
``$TMS_TEST_HBASE_ZK_PORT`` and a ZooKeeper reachable on 127.0.0.1; without it the tests that split
regions skip, saying so. CI runs on the launcher's HBase, where they always run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tms_hbase_launcher import LocalHBase
from tms_hbase_launcher.local import JDK17_FLAGS

from .hbase_server import served_by_launcher

SOURCE = Path(__file__).with_name("java") / "SplitRegion.java"


def _zk_port() -> str:
    """The ZooKeeper port of the session's HBase: the launcher's, or $TMS_TEST_HBASE_ZK_PORT."""
    if os.environ.get("TMS_TEST_HBASE_ZK_PORT"):
        return os.environ["TMS_TEST_HBASE_ZK_PORT"]
    state = LocalHBase().paths.state
    if not state.exists():
        raise RuntimeError(
            "splitting regions needs the ZooKeeper port: run on the local launcher's HBase "
            "or set TMS_TEST_HBASE_ZK_PORT"
        )
    return str(json.loads(state.read_text())["zk_port"])


def external_hbase_reason(address: str) -> str | None:
    """Why regions cannot be split on the session's HBase, or None when they can."""
    if os.environ.get("TMS_TEST_HBASE_ZK_PORT") or served_by_launcher(address):
        return None
    return (
        f"splits regions through the local launcher's HBase jars and ZooKeeper; {address} is an external HBase "
        "(set TMS_TEST_HBASE_ZK_PORT to its ZooKeeper port on 127.0.0.1 to run it there)"
    )


def compiled(source: Path, lib: Path) -> Path:
    """The folder of ``source``'s class (tests/java), compiled against the jars of ``lib`` on first use and again
    when the source changes."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    classes = Path(tempfile.gettempdir()) / f"tms-hbase-test-java-{digest}"
    if not (classes / f"{source.stem}.class").exists():
        # compiled beside and renamed into place: a parallel test process sees the folder whole or not at all
        building = Path(tempfile.mkdtemp(prefix=f"{classes.name}-", dir=classes.parent))
        javac = shutil.which("javac") or "javac"
        subprocess.run([javac, "-d", str(building), "-cp", f"{lib}/*", str(source)], check=True, capture_output=True)
        try:
            building.rename(classes)
        except OSError:  # another process put its own there first
            shutil.rmtree(building)
    return classes


def split_table(table: str, key: bytes) -> None:
    """Split ``table`` at row ``key`` and wait for the daughter regions."""
    lib = LocalHBase().paths.lib
    classes = compiled(SOURCE, lib)
    subprocess.run(
        [
            "java",
            *JDK17_FLAGS,
            "-Dlog4j2.level=WARN",
            "-cp",
            f"{classes}:{lib}/*",
            "SplitRegion",
            _zk_port(),
            table,
            key.hex(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
