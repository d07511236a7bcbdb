"""``tms-admin hbase status`` tells a region server that aborted (its master's JVM lives on) from one that
serves, by what HBase logged since the master last came up."""

from __future__ import annotations

from pathlib import Path

import pytest

from tms_hbase.launcher import local
from tms_hbase.launcher.local import master_heap, region_server_abort

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


@pytest.mark.parametrize(
    ("memory_gib", "heap"), [(4, "2048m"), (24, "6144m"), (64, "8192m")], ids=["small", "this size", "large"]
)
def test_the_local_hbase_heap_is_a_quarter_of_the_memory_within_2_to_8_gib(
    monkeypatch: pytest.MonkeyPatch, memory_gib: int, heap: str
) -> None:
    """A fixed 2 GiB ran out once about 850 tables had piled up: the heap grows with the machine."""
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": memory_gib * 2**30 // 4096}
    monkeypatch.setattr(local.os, "sysconf", pages.__getitem__)
    assert master_heap() == heap
