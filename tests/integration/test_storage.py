"""The storage port on the real HBase: each operation does what the layers above rely on."""

from __future__ import annotations

import pytest

from tms_hbase import MessagingClient

from ..storage_contract import CHECKS


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_storage_port_on_hbase(client: MessagingClient, check) -> None:
    client.admin.init_tables()
    check(client.installation.metadata)


def test_regions_of_a_new_table(client: MessagingClient) -> None:
    client.admin.init_tables()
    (region,) = client.installation.messages.regions()
    assert (region.start, region.end, region.table) == (b"", b"", client.installation.messages.name)
