"""Addresses, prefixes and timeouts: bad values are InvalidArgument, never a silent default or a raw ValueError."""

from __future__ import annotations

import pytest

from tms_hbase import InvalidArgument, MessagingClient
from tms_hbase.aio import AsyncMessagingClient
from tms_hbase.config import Config, table_prefix, thrift_address
from tms_hbase.tx.client import TransactionClient


@pytest.mark.parametrize("address", ["127.0.0.1:²", "127.0.0.1:٩٠٩٠", "h:+90", "h: 90", "", ":9090"])
def test_a_port_must_be_ascii_digits(address: str) -> None:
    with pytest.raises(InvalidArgument, match="bad HBase Thrift address"):
        thrift_address(address)
    with pytest.raises(InvalidArgument, match="bad HBase Thrift address"):
        MessagingClient(address, "p")


def test_an_empty_prefix_is_bad_input_not_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TMS_TABLE_PREFIX", raising=False)
    with pytest.raises(InvalidArgument, match="bad table prefix ''"):
        table_prefix("")
    with pytest.raises(InvalidArgument, match="bad table prefix ''"):
        MessagingClient("127.0.0.1:9090", "")
    monkeypatch.setenv("TMS_TABLE_PREFIX", "")
    with pytest.raises(InvalidArgument, match="bad table prefix ''"):
        table_prefix(None)
    monkeypatch.setenv("TMS_HBASE_THRIFT", "")
    with pytest.raises(InvalidArgument, match="bad HBase Thrift address ''"):
        thrift_address(None)


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan"), "10", True])
def test_a_timeout_must_be_finite_and_positive(timeout: object) -> None:
    with pytest.raises(InvalidArgument, match="bad timeout"):
        MessagingClient("127.0.0.1:9090", "p", timeout_seconds=timeout)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="bad timeout"):
        TransactionClient("127.0.0.1:15165", timeout_seconds=timeout)  # type: ignore[arg-type]


def test_both_clients_refuse_a_config_together_with_loose_connection_arguments() -> None:
    config = Config.resolve("127.0.0.1:9", "p")
    assert Config.of_client(config, None, None, timeout_seconds=None, retry=None, pool_size=None) is config
    for loose in ({"address": "127.0.0.1:9"}, {"prefix": "p"}, {"timeout_seconds": 1.0}, {"pool_size": 2}):
        with pytest.raises(InvalidArgument, match="not both"):
            AsyncMessagingClient(config=config, **loose)  # type: ignore[arg-type]
