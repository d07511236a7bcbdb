"""The launcher's Java helpers are compiled on first use, again only when their source changes, and a source
javac refuses is a clear LauncherError."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tms_hbase.errors import LauncherError
from tms_hbase_launcher.javac import compile_java

JAVA = shutil.which("java") or "java"


def _source(folder: Path, body: str) -> Path:
    source = folder / "Helper.java"
    source.write_text(f"public class Helper {{ {body} }}\n")
    return source


def test_a_source_is_compiled_once_and_again_when_it_changes(tmp_path: Path) -> None:
    source, classes, lib = _source(tmp_path, "static int x = 1;"), tmp_path / "classes", tmp_path / "lib"
    assert compile_java(JAVA, source, classes, lib) == classes
    compiled = classes / "Helper.class"
    first = compiled.stat().st_mtime_ns
    compile_java(JAVA, source, classes, lib)
    assert compiled.stat().st_mtime_ns == first  # unchanged source: not compiled again
    _source(tmp_path, "static int x = 2;")
    later = compiled.stat().st_mtime + 5
    os.utime(source, (later, later))
    compile_java(JAVA, source, classes, lib)
    assert compiled.stat().st_mtime_ns != first


def test_a_source_javac_refuses_is_a_clear_error(tmp_path: Path) -> None:
    source = _source(tmp_path, "static int x = ;")
    with pytest.raises(LauncherError, match=r"javac failed on .*Helper\.java(.|\n)*error"):
        compile_java(JAVA, source, tmp_path / "classes", tmp_path / "lib")


def test_a_jre_without_javac_is_a_clear_error(tmp_path: Path) -> None:
    jre = tmp_path / "jre" / "bin"
    jre.mkdir(parents=True)
    with pytest.raises(LauncherError, match=r"javac not found: compiling Helper\.java needs a JDK"):
        compile_java(str(jre / "java"), _source(tmp_path, ""), tmp_path / "classes", tmp_path / "lib")
