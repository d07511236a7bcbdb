"""The launcher never replaces jars under a running JVM: a pom changed since they were downloaded (a new
checkout) updates them only when no process runs from them, since a JVM loads its jars as it needs them and a
region server whose jar vanished aborts."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tms_hbase.errors import LauncherError
from tms_hbase_launcher.jars import resolve_jars


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A jar folder downloaded for another pom than the one given now, and no mvn on PATH (a download would
    fail: the test sees whether one was tried)."""
    root = tmp_path / "hbase-x"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "hbase-server.jar").write_bytes(b"jar")
    (root / ".complete").write_text("an older pom's digest\n")
    (tmp_path / "pom.xml").write_text("<project/>")
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    return root


@pytest.fixture
def jvm(cache: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process with the folder's jars on its class path, as the launcher starts a JVM."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "-cp", f"{cache / 'lib'}/*"])
    yield proc
    proc.kill()
    proc.wait()


def test_jars_in_use_are_kept_and_the_update_waits(cache: Path, jvm: subprocess.Popen[bytes]) -> None:
    said: list[str] = []
    lib = resolve_jars(cache.parent / "pom.xml", cache, "HBase", said.append)
    assert lib == cache / "lib" and (lib / "hbase-server.jar").read_bytes() == b"jar"
    assert any(str(jvm.pid) in line and "kept" in line for line in said), said
    assert (cache / ".complete").read_text() == "an older pom's digest\n"  # still due for the update


def test_jars_nobody_uses_are_updated(cache: Path) -> None:
    with pytest.raises(LauncherError, match="mvn"):  # the download is tried (and fails here: no mvn)
        resolve_jars(cache.parent / "pom.xml", cache, "HBase", lambda _m: None)
