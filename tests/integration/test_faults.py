"""A dead, hung or flaky HBase gives clear errors within the timeout, never a hang or a raw traceback."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tms_hbase import HBaseUnavailable, InvalidArgument, MessagingClient, TmsError, TopicId
from tms_hbase.config import Config

from ..tcp_proxy import TcpProxy
from ..tx_server import free_port

T = TopicId("ns", "t")


def test_dead_hbase_is_a_clear_error_at_once() -> None:
    port = free_port()
    deadline = time.monotonic() + 60  # not retried on and on: an error, however busy the machine
    with (
        MessagingClient(f"127.0.0.1:{port}", "x", timeout_seconds=2) as client,
        pytest.raises(HBaseUnavailable, match=rf"127\.0\.0\.1:{port}.*is HBase running") as info,
    ):
        client.create_topic(T)
    assert time.monotonic() < deadline
    assert isinstance(info.value, TmsError)


def test_hung_hbase_times_out(proxy: TcpProxy, prefix: str, hbase_address: str) -> None:
    # creating tables takes longer than 1.5 s on a busy HBase
    with MessagingClient(hbase_address, prefix, create_tables=True) as direct:
        direct.create_topic(T)
    with MessagingClient(proxy.address, prefix, timeout_seconds=1.5) as client:
        proxy.stall = True  # for good: without the client's timeout the call would never return
        with pytest.raises(HBaseUnavailable, match=r"did not answer within 1\.5s"):
            client.get_topic(T)
        proxy.stall = False
        assert client.get_topic(T).generation == 1


def test_broken_connections_are_replaced(proxy: TcpProxy, prefix: str) -> None:
    with MessagingClient(proxy.address, prefix, timeout_seconds=5, create_tables=True) as client:
        client.create_topic(T)
        for _ in range(3):
            # fill the pool with several idle connections, then break every one of them
            with ThreadPoolExecutor(8) as pool:
                assert all(m.generation == 1 for m in pool.map(lambda _: client.get_topic(T), range(32)))
            proxy.cut()
            assert client.get_topic(T).generation == 1
            assert client.list_topics("ns") == [T]


def test_idle_connections_are_not_reused(proxy: TcpProxy, prefix: str) -> None:
    """The gateway closes idle connections on its own; the pool opens a fresh one instead."""
    with MessagingClient(proxy.address, prefix, timeout_seconds=5, create_tables=True) as client:
        client.installation.hbase.max_idle = 0.3
        client.create_topic(T)
        opened = proxy.accepted
        client.get_topic(T)
        assert proxy.accepted == opened
        time.sleep(0.5)
        client.get_topic(T)
        assert proxy.accepted == opened + 1


def test_create_whose_answer_is_lost_still_succeeds(proxy: TcpProxy, prefix: str) -> None:
    """The checkAndPut lands but its answer is lost: the client re-reads and finds its own write."""
    with MessagingClient(proxy.address, prefix, timeout_seconds=5) as client:
        client.admin.init_tables()
        proxy.lose_reply_to(b"checkAndPut")
        meta = client.create_topic(T, {"ttl": "77"})
        assert proxy.replies_lost == 1
        assert (meta.generation, meta.ttl) == (1, 77)
        assert client.get_topic(T).ttl == 77
        proxy.lose_reply_to(b"checkAndPut")
        client.delete_topic(T)
        assert proxy.replies_lost == 2
        assert client.list_topics("ns") == []
        assert client.create_topic(T).generation == 2


def test_a_dead_gateway_in_the_config_is_failed_over_to_the_next(hbase_address: str, prefix: str) -> None:
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    config = Config.resolve(f"{dead},{hbase_address}", prefix, timeout_seconds=10)
    assert config.thrift == (dead, hbase_address)
    with MessagingClient(config=config, create_tables=True) as client:
        client.create_topic(T)
        client.publish(T, [b"via the second gateway"])
        assert [m.payload for m in client.fetch(T)] == [b"via the second gateway"]
        assert client.installation.address == hbase_address and client.config is config
    with pytest.raises(HBaseUnavailable, match="is HBase running"), MessagingClient(dead, prefix) as alone:
        alone.get_topic(T)  # a single dead gateway is still a clear error


def test_a_config_and_separate_connection_arguments_are_not_mixed(hbase_address: str, prefix: str) -> None:
    with pytest.raises(InvalidArgument, match="not both"):
        MessagingClient(hbase_address, config=Config.resolve(hbase_address, prefix))
