"""The cluster test group (``make test-cluster``, marker ``cluster``): the tests here run on the local HBase
cluster (``tms-admin hbase cluster start``), started for the session if it is not running and stopped
afterwards only if the session started it. ``make test`` deselects them (``-m "not cluster"``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tms_hbase_launcher.cluster import ClusterHBase


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test below tests/cluster is in the ``cluster`` group."""
    for item in items:
        if "/tests/cluster/" in str(item.path):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def cluster() -> Iterator[ClusterHBase]:
    """The local HBase cluster, healthy."""
    launcher = ClusterHBase()
    started = not launcher.status(probe=False).running
    launcher.start()
    yield launcher
    if started:
        launcher.stop()
    else:
        launcher.start()  # leave it as found: whole (a test may have killed a process and not restarted it)


@pytest.fixture(scope="session")
def hbase_address(cluster: ClusterHBase) -> str:
    """Both Thrift gateways of the cluster: every client here fails over between them (Config's list)."""
    return ",".join(cluster.layout.thrift_addresses)
