"""Resolve a pom's runtime jars from Maven Central with ``mvn`` into a cache folder, once per pom."""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from tms_hbase.errors import LauncherError

Progress = Callable[[str], None]


def resolve_jars(pom: Path, root: Path, what: str, progress: Progress, expect: str | None = None) -> Path:
    """``root/lib`` holding the runtime dependencies of ``pom``, downloaded unless a download for
    this exact pom is cached. Parallel callers wait for one download (a file lock). ``expect`` names a
    jar that must be there afterwards."""
    lib, marker = root / "lib", root / ".complete"
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text().strip() == digest:
            return lib
        mvn = shutil.which("mvn")
        if mvn is None:
            raise LauncherError(
                f"mvn (Apache Maven) is not on PATH; it is needed once to download {what} from Maven Central "
                "(Debian: apt-get install maven)"
            )
        if lib.exists():
            shutil.rmtree(lib)
        marker.unlink(missing_ok=True)
        progress(f"downloading {what} with Maven into {lib} (first time only)")
        log = root / "mvn.log"
        cmd = [mvn, "-B", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={lib}"]
        cmd.append("-DincludeScope=runtime")
        downloaded = 0
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                if "Downloaded from" in line:
                    downloaded += 1
                    if downloaded % 25 == 0:
                        progress(f"  {downloaded} files downloaded")
            code = proc.wait()
        if code != 0:
            tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
            raise LauncherError(
                f"mvn failed to resolve {what} (exit {code}); is Maven Central reachable? See {log}:\n{tail}"
            )
        jars = sorted(lib.glob("*.jar"))
        if expect is not None and not any(j.name == expect for j in jars):
            raise LauncherError(f"mvn finished but {lib} holds no {expect}; see {log}")
        progress(f"  {len(jars)} jars ready ({downloaded} files downloaded)")
        marker.write_text(digest + "\n")
        return lib
