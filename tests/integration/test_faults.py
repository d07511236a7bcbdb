"""A dead, hung or flaky HBase gives clear errors within the timeout, never a hang or a raw traceback."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tms_hbase import HBaseUnavailable, MessagingClient, TmsError, TopicId

from ..tcp_proxy import TcpProxy

T = TopicId("ns", "t")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dead_hbase_is_a_clear_error_at_once() -> None:
    port = free_port()
    started = time.monotonic()
    with (
        MessagingClient(f"127.0.0.1:{port}", "x", timeout=2) as client,
        pytest.raises(HBaseUnavailable, match=rf"127\.0\.0\.1:{port}.*is HBase running") as info,
    ):
        client.create_topic(T)
    assert time.monotonic() - started < 5
    assert isinstance(info.value, TmsError)


def test_hung_hbase_times_out(proxy: TcpProxy, prefix: str) -> None:
    with MessagingClient(proxy.address, prefix, timeout=1.5) as client:
        client.create_topic(T)
        proxy.stall = True
        started = time.monotonic()
        with pytest.raises(HBaseUnavailable, match=r"did not answer within 1\.5s"):
            client.get_topic(T)
        assert time.monotonic() - started < 5
        proxy.stall = False
        assert client.get_topic(T).generation == 1


def test_broken_connections_are_replaced(proxy: TcpProxy, prefix: str) -> None:
    with MessagingClient(proxy.address, prefix, timeout=5) as client:
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
    with MessagingClient(proxy.address, prefix, timeout=5) as client:
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
    with MessagingClient(proxy.address, prefix, timeout=5) as client:
        client.init_tables()
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
