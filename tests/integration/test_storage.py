"""The storage port on the real HBase: each operation does what the layers above rely on."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

import pytest

from tms_hbase import MessagingClient
from tms_hbase.errors import HBaseError, HBaseUnavailable
from tms_hbase.storage.connection import CheckedClient, Connection, HBaseConnection
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


def test_compare_and_set_over_several_connections(
    client: MessagingClient, hbase_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compare_and_set_many over four connections at once: the answers come back in the swaps' order
    across the connections' parts; a refusal of HBase is raised once and leaves all four in step for the
    next calls; fewer free connections than asked for is no error (the parts share those there are)."""
    client.admin.init_tables()
    host, port = hbase_address.rsplit(":", 1)
    pool = HBaseConnection(host, int(port), pool_size=4, timeout=300)  # no slow answer replaces a connection
    opened: list[Connection] = []  # this pool's, not those the client fixture's background threads open
    real_open = pool._open

    def counted(deadline: float) -> Connection:
        conn = real_open(deadline)
        opened.append(conn)
        return conn

    monkeypatch.setattr(pool, "_open", counted)
    try:
        missing = Table(pool, f"{client.installation.prefix}_missing")
        metadata = Table(pool, client.installation.metadata.name)
        there = {3, 40, 41, 77, 149}  # in the first, second, third and last of four parts
        for i in there:
            assert metadata.put_if_absent(b"w%03d" % i, b"d:x", b"there")
        won = metadata.compare_and_set_many([(b"w%03d" % i, b"d:x", None, b"v%d" % i) for i in range(150)], ways=4)
        assert won == [i not in there for i in range(150)]
        assert len(opened) == 4
        with pytest.raises(HBaseError, match=r"compare-and-set of 70 cells.*refused"):
            missing.compare_and_set_many([(b"k%d" % i, b"d:x", None, b"v") for i in range(70)], ways=4)
        swaps = [(b"w%03d" % i, b"d:x", b"v%d" % i if i not in there else b"stale", b"new") for i in range(40)]
        assert metadata.compare_and_set_many(swaps, ways=4) == [i not in there for i in range(40)]
        assert len(opened) == 4  # the refusal left every connection usable
        inner = [(b"w%03d" % i, b"d:x", b"new" if i not in there else b"stale", b"last") for i in range(40)]
        held, won = pool.run_over(
            "hold two", 2, lambda conns: (len(conns), metadata.compare_and_set_many(inner, ways=4))
        )
        assert held == 2 and won == [i not in there for i in range(40)]  # on the two left free
        assert len(opened) == 4
    finally:
        pool.close()


def test_compare_and_set_over_several_connections_to_no_server() -> None:
    """With nothing listening, a compare-and-set over several connections fails as HBaseUnavailable."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pool = HBaseConnection("127.0.0.1", port, timeout=5)
    try:
        with pytest.raises(HBaseUnavailable, match=r"compare-and-set of 40 cells.*cannot reach"):
            Table(pool, "nowhere").compare_and_set_many([(b"k%d" % i, b"d:x", None, b"v") for i in range(40)], ways=4)
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
