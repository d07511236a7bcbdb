"""The standalone HBase's settings: the launcher's and the container image's must not drift apart."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from tms_hbase_launcher.paths import LauncherPaths
from tms_hbase_launcher.siteconf import site_properties, site_xml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "hbase" / "hbase-site.xml"
# where the image keeps its data, and the launcher's free ports on a shared host
LAUNCHER_ONLY = {
    "hbase.rootdir",
    "hbase.tmp.dir",
    "hbase.zookeeper.property.dataDir",
    "hbase.zookeeper.property.clientPort",
    "hbase.localcluster.assign.random.ports",
    "hbase.regionserver.info.port",
    "hbase.regionserver.info.bindAddress",
}


def _properties(text: str) -> dict[str, str]:
    root = ET.fromstring(text)
    return {p.findtext("name", ""): p.findtext("value", "") for p in root.iter("property")}


def test_the_launchers_site_file_holds_every_property(tmp_path: Path) -> None:
    properties = site_properties(LauncherPaths(tmp_path, tmp_path / "jars"), 2181, 16030)
    assert _properties(site_xml(properties)) == properties


def test_sustained_writes_are_not_blocked_at_hbases_default_of_16_store_files(tmp_path: Path) -> None:
    properties = site_properties(LauncherPaths(tmp_path, tmp_path / "jars"), 2181, 16030)
    assert int(properties["hbase.hstore.blockingStoreFiles"]) >= 100


def test_the_container_image_runs_the_launchers_settings(tmp_path: Path) -> None:
    launcher = site_properties(LauncherPaths(tmp_path, tmp_path / "jars"), 2181, 16030)
    image = _properties(DEPLOY.read_text())
    shared = {k: v for k, v in launcher.items() if k not in LAUNCHER_ONLY}
    assert {k: image.get(k) for k in shared} == shared
