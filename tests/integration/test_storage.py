"""The storage port on the real HBase: each operation does what the layers above rely on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tms_hbase import MessagingClient
from tms_hbase.errors import HBaseError
from tms_hbase.storage.connection import CheckedClient, HBaseConnection
from tms_hbase.storage.hbase import Table

from ..storage_contract import CHECKS


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_storage_port_on_hbase(client: MessagingClient, check) -> None:
    client.admin.init_tables()
    check(client.installation.metadata)


def test_regions_of_a_new_table(client: MessagingClient) -> None:
    client.admin.init_tables()
    (region,) = client.installation.messages.regions()
    assert (region.start, region.end, region.table) == (b"", b"", client.installation.messages.name)


def test_a_refused_pipeline_leaves_its_connection_in_step(client: MessagingClient, hbase_address: str) -> None:
    """Every answer of a pipeline is read even when HBase refuses the requests (a missing table): the error
    is raised once, and the one connection of the pool answers the next call with its own answer."""
    client.admin.init_tables()
    host, port = hbase_address.rsplit(":", 1)
    pool = HBaseConnection(host, int(port), pool_size=1)
    try:
        missing, metadata = (
            Table(pool, f"{client.installation.prefix}_missing"),
            Table(pool, client.installation.metadata.name),
        )
        with pytest.raises(HBaseError, match="compare-and-set of 70 cells"):
            missing.compare_and_set_many([(b"k%d" % i, b"d:x", None, b"v") for i in range(70)])
        assert metadata.compare_and_set(b"step", b"d:x", None, b"one")
        assert not metadata.compare_and_set(b"step", b"d:x", b"stale", b"two")
        assert metadata.compare_and_set_many([(b"step", b"d:x", b"one", b"three")]) == [True]
        assert metadata.get_cell(b"step", b"d:x") == b"three"
    finally:
        pool.close()


def test_a_limited_scan_closes_its_scanner_in_the_round_trip_of_its_rows(
    client: MessagingClient, hbase_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan of at most MAX_BATCH rows sends its fetch and its close together (two round trips, three
    requests) whether it finds rows or none, and the one connection of the pool stays usable: after a scan
    HBase refused (a filter it does not know, at the open) the next scans answer their own rows."""
    client.admin.init_tables()
    host, port = hbase_address.rsplit(":", 1)
    pool = HBaseConnection(host, int(port), pool_size=1)
    sent: list[list[str]] = []
    pipeline = CheckedClient.pipeline

    def recorded(self: CheckedClient, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[Any]:
        sent.append([api for api, _ in calls])
        return pipeline(self, calls)

    try:
        table = Table(pool, client.installation.metadata.name)
        table.put_many([(b"scan-%d" % i, {b"d:x": b"%d" % i}) for i in range(5)])
        monkeypatch.setattr(CheckedClient, "pipeline", recorded)
        assert [k for k, _ in table.scan(b"scan-", b"scan.", limit=3)] == [b"scan-0", b"scan-1", b"scan-2"]
        assert table.scan(b"scan.", b"scan/", limit=3) == []
        with pytest.raises(HBaseError, match="scannerOpenWithScan"):
            table.scan(b"scan-", b"scan.", limit=3, filter="NoSuchFilter()")
        assert [k for k, _ in table.scan(b"scan-", b"scan.", limit=10)] == [b"scan-%d" % i for i in range(5)]
        assert sent == [["scannerGetList", "scannerClose"]] * 3  # (the refused one failed at its open)
    finally:
        pool.close()
