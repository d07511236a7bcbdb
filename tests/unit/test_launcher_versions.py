"""Which HBase release the launcher runs (tms_hbase_launcher.paths.hbase_version) and where its jars go: each
release in a folder of its own, the default release's download unchanged by the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from tms_hbase.errors import LauncherError
from tms_hbase_launcher import jars
from tms_hbase_launcher.paths import HBASE_VERSION, LauncherPaths, hbase_version


def test_the_release_is_the_argument_else_the_environment_else_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TMS_HBASE_VERSION", raising=False)
    assert hbase_version() == HBASE_VERSION
    monkeypatch.setenv("TMS_HBASE_VERSION", "2.5.2")
    assert hbase_version() == "2.5.2"
    assert hbase_version("2.5.10") == "2.5.10"


@pytest.mark.parametrize("text", ["2.5", "latest", "3.0.0", "2.5.2-hadoop3", "2.5.2; rm"])
def test_a_release_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(LauncherError, match=r"expected a 2\.x\.y release"):
        hbase_version(text)


def test_each_release_resolves_into_its_own_folder_and_the_default_without_extra_properties(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[Path, dict[str, str]]] = []
    monkeypatch.setattr(
        jars, "resolve_jars", lambda _pom, root, *_a, properties, **_k: asked.append((root, properties))
    )
    for version in (HBASE_VERSION, "2.5.2"):
        jars.hbase_jars(LauncherPaths(tmp_path, tmp_path / "jars", version), lambda _m: None)
    assert asked == [
        (tmp_path / "jars" / f"hbase-{HBASE_VERSION}", {}),  # the digest of an existing download stays valid
        (tmp_path / "jars" / "hbase-2.5.2", {"hbase.version": "2.5.2", "hbase.thrift.version": HBASE_VERSION}),
    ]
