"""Resolve HBase's jars from Maven Central with ``mvn`` into the launcher's cache, once."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

from ..errors import LauncherError
from .paths import POM, LauncherPaths

Progress = Callable[[str], None]


def ensure_jars(paths: LauncherPaths, progress: Progress) -> None:
    """Download the pinned HBase jars unless a completed download is cached already."""
    if paths.jars_complete.exists():
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LauncherError(
            "mvn (Apache Maven) is not on PATH; it is needed once to download HBase's jars "
            "from Maven Central (Debian: apt-get install maven)"
        )
    paths.jars.mkdir(parents=True, exist_ok=True)
    if paths.lib.exists():
        shutil.rmtree(paths.lib)
    progress(f"downloading HBase jars with Maven into {paths.lib} (first start only)")
    cmd = [
        mvn,
        "-B",
        "-f",
        str(POM),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={paths.lib}",
        "-DincludeScope=runtime",
    ]
    log = paths.jars / "mvn.log"
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
        raise LauncherError(f"mvn failed to resolve HBase's jars (exit {code}); see {log}:\n{tail}")
    jars = list(paths.lib.glob("*.jar"))
    progress(f"  {len(jars)} jars ready ({downloaded} files downloaded)")
    paths.jars_complete.write_text("ok\n")
