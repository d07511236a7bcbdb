"""``tms-admin hbase status`` tells a region server that aborted (its master's JVM lives on) from one that
serves, by what HBase logged since the master last came up."""

from __future__ import annotations

from pathlib import Path

from tms_hbase.launcher.local import region_server_abort

STARTED = (
    "2026-11-26T09:01:40,006 INFO  [master/localhost:0:becomeActiveMaster] master.HMaster: "
    "Master has completed initialization 12.974sec"
)
ABORTED = (
    "2026-11-26T10:12:03,114 ERROR [RS:0;localhost:16020] regionserver.HRegionServer: ***** ABORTING region server "
    "localhost,16020,1795683683000: Unrecoverable exception while closing *****\n"
    "java.lang.OutOfMemoryError: Java heap space"
)


def test_an_abort_after_the_last_start_is_reported(tmp_path: Path) -> None:
    log = tmp_path / "master.log"
    log.write_text(f"{STARTED}\nsome work\n{ABORTED}\n")
    assert "ABORTING region server localhost,16020" in region_server_abort(log)


def test_an_abort_before_a_restart_is_history(tmp_path: Path) -> None:
    log = tmp_path / "master.log"
    log.write_text(f"{STARTED}\n{ABORTED}\n{STARTED}\nserving again\n")
    assert region_server_abort(log) == ""
    assert region_server_abort(tmp_path / "missing.log") == ""
