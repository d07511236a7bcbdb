"""Where the local HBase keeps its jars, configuration, data and logs (one documented folder)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

HBASE_VERSION = "2.6.1"
"""The pinned HBase release; its -hadoop3 build runs on JDK 17 (see pom.xml beside this file)."""

POM = Path(__file__).with_name("pom.xml")


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

    @property
    def jars(self) -> Path:
        return self.jars_root / f"hbase-{HBASE_VERSION}"

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
