"""Resolve a pom's runtime jars from Maven Central with ``mvn`` into a cache folder, once per pom."""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from tms_hbase.errors import LauncherError
from tms_hbase_launcher.paths import HBASE_VERSION, POM, LauncherPaths

Progress = Callable[[str], None]


def resolve_jars(
    pom: Path,
    root: Path,
    what: str,
    progress: Progress,
    expect: str | None = None,
    properties: dict[str, str] | None = None,
) -> Path:
    """``root/lib`` holding the runtime dependencies of ``pom`` (its ``properties`` set as given), downloaded
    unless a download for this exact pom and properties is cached. Parallel callers wait for one download (a
    file lock). ``expect`` names a jar that must be there afterwards."""
    lib, marker = root / "lib", root / ".complete"
    given = [f"-D{name}={value}" for name, value in sorted((properties or {}).items())]
    digest = hashlib.sha256(pom.read_bytes() + "\n".join(given).encode()).hexdigest()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text().strip() == digest:
            return lib
        users = jvms_using(lib)
        if marker.exists() and users:  # replacing its jars under a running JVM would make it fail as it loads them
            progress(
                f"{what} in {lib} kept as it is: in use by process {', '.join(map(str, users))}; updated at a start"
            )
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
        cmd += ["-DincludeScope=runtime", *given]
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


def hbase_jars(paths: LauncherPaths, progress: Progress) -> Path:
    """The folder of the jars of HBase ``paths.version`` (:func:`resolve_jars` of the launcher's pom for that
    release: its -hadoop3 build). Another release than :data:`HBASE_VERSION` runs that one's Thrift gateway
    (hbase-thrift): Maven Central has none of the 2.5.x releases."""
    version = paths.version
    return resolve_jars(
        POM,
        paths.jars,
        f"HBase {version} jars",
        progress,
        expect=f"hbase-server-{version}-hadoop3.jar",
        properties={}
        if version == HBASE_VERSION
        else {"hbase.version": version, "hbase.thrift.version": HBASE_VERSION},
    )


def jvms_using(lib: Path) -> list[int]:
    """The processes started with ``lib``'s jars on their class path (their command line names the folder)."""
    needle = f"{lib}/*".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if needle in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:  # gone meanwhile, or not ours to read
                pass
    return found
