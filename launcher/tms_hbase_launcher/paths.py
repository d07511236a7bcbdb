"""Where the local HBase keeps its jars, configuration, data and logs (one documented folder)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from tms_hbase.errors import LauncherError

HBASE_VERSION = "2.6.1"
"""The HBase release the launcher runs unless told otherwise; its -hadoop3 build runs on JDK 17 (see pom.xml
beside this file)."""
VERSION_ENV = "TMS_HBASE_VERSION"
"""Another HBase release to run (2.5.2 and later, the -hadoop3 builds on Maven Central; tested: see the Makefile's
test-hbase-versions), for testing against what users run."""

POM = Path(__file__).with_name("pom.xml")


def hbase_version(explicit: str | None = None) -> str:
    """The HBase release to run: ``explicit``, else ``$TMS_HBASE_VERSION``, else :data:`HBASE_VERSION`;
    LauncherError unless it is a release number (x.y.z)."""
    version = explicit or os.environ.get(VERSION_ENV) or HBASE_VERSION
    if not re.fullmatch(r"2\.[0-9]+\.[0-9]+", version):
        raise LauncherError(f"bad HBase version {version!r} (${VERSION_ENV}): expected a 2.x.y release, e.g. 2.5.2")
    return version


def default_home() -> Path:
    """``$TMS_HBASE_HOME`` if set, else ``~/.cache/tms-hbase`` (outside any work tree)."""
    env = os.environ.get("TMS_HBASE_HOME")
    if env:
        return Path(env).expanduser().resolve()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser().resolve() / "tms-hbase"


def default_jars_root(home: Path) -> Path:
    """``$TMS_HBASE_JARS`` if set (to share one download between homes), else ``<home>/jars``."""
    env = os.environ.get("TMS_HBASE_JARS")
    return Path(env).expanduser().resolve() if env else home / "jars"


@dataclass(frozen=True)
class LauncherPaths:
    """The folder layout below the launcher's home (jars may live elsewhere, see TMS_HBASE_JARS)."""

    home: Path
    jars_root: Path
    version: str = HBASE_VERSION

    @property
    def jars(self) -> Path:
        return self.jars_root / f"hbase-{self.version}"

    @property
    def lib(self) -> Path:
        return self.jars / "lib"

    @property
    def run(self) -> Path:
        return self.home / "local"

    @property
    def conf(self) -> Path:
        return self.run / "conf"

    @property
    def data(self) -> Path:
        return self.run / "data"

    @property
    def classes(self) -> Path:
        """The launcher's Java helper, compiled on first use."""
        return self.run / "classes"

    @property
    def logs(self) -> Path:
        return self.run / "logs"

    @property
    def state(self) -> Path:
        return self.run / "state.json"


def read_state(path: Path) -> dict | None:
    """A launcher's state file (what it started, with which pids and ports), or None if there is none
    or it does not parse (a launcher killed while writing it)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_state(path: Path, state: dict) -> None:
    """Replace a launcher's state file at once (written aside, then renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(path)
