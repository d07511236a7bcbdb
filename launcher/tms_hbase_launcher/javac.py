"""Compile a launcher's Java helper against HBase's jars, once per change of its source."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tms_hbase.errors import LauncherError


def compile_java(java: str, source: Path, classes: Path, lib: Path) -> Path:
    """``classes`` holding ``source`` compiled (by the ``javac`` beside ``java``) with the jars of ``lib``,
    unless its class file is already newer than the source; returns ``classes``."""
    compiled = classes / f"{source.stem}.class"
    if compiled.exists() and compiled.stat().st_mtime >= source.stat().st_mtime:
        return classes
    classes.mkdir(parents=True, exist_ok=True)
    javac = str(Path(java).with_name("javac"))
    try:
        done = subprocess.run(
            [javac, "-d", str(classes), "-cp", f"{lib}/*", str(source)], capture_output=True, text=True
        )
    except FileNotFoundError:
        raise LauncherError(f"{javac} not found: compiling {source.name} needs a JDK, not only a JRE") from None
    if done.returncode != 0:
        raise LauncherError(f"javac failed on {source} (a JDK is needed):\n{done.stderr}")
    return classes
