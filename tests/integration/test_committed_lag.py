"""Lag and topic statistics count what a committed-only subscription will receive (docs/consumers.md), with a
real transaction server (``tms-admin tx serve``) and the real HBase: a rolled-back transaction's messages and an
invalidated one's are not counted; one still in progress is reported apart (``Lag.held``: what it holds back
from its first message on, Kafka's messages past the last stable offset; ``TopicStats.uncommitted``) and
counted once it commits, or left out once it rolls back. Every surface says the same: the library, a new
process (``tms-admin``), the gateway's REST API and its client, the Prometheus exporter and the console's
numbers, with the transaction server up and stopped (the state it stored in HBase decides)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.model.stats import Lag, TopicStats
from tms_hbase.model.transaction import Transaction
from tms_hbase.ops.exporter import TopicCollector
from tms_hbase.tx.client import TransactionClient
from tms_hbase_gateway.console import views
from tms_hbase_gateway.console.history import History

from ..gateway_server import GatewayProcess, gateway_env
from ..tx_server import TxServer, free_port

T = TopicId("committedlag", "events")
TMS_ADMIN = str(Path(sys.executable).with_name("tms-admin"))


@pytest.fixture
def server(tms_env: dict[str, str]) -> Iterator[TxServer]:
    s = TxServer(tms_env, free_port()).start()
    yield s
    if s.proc is not None and s.proc.poll() is None:
        s.stop()


@pytest.fixture
def tx(server: TxServer) -> Iterator[TransactionClient]:
    with TransactionClient(server.address) as c:
        yield c


@pytest.fixture
def env(tms_env: dict[str, str], server: TxServer) -> dict[str, str]:
    return {**tms_env, "TMS_TX_SERVER": server.address}


@pytest.fixture
def reader(hbase_address: str, prefix: str, server: TxServer) -> Iterator[MessagingClient]:
    with MessagingClient(hbase_address, prefix, tx_server=server.address) as c:
        yield c


def setup_topic(client: MessagingClient, tx: TransactionClient) -> tuple[Transaction, object]:
    """a, [rolled back: 2 messages], [invalidated], b, [in progress: held], c, and subscription "svc" from
    the start. Returns the transaction in progress and its publish result."""
    client.create_topic(T)
    client.create_subscription(T, "svc")
    client.publish(T, [b"a"])
    rolled = tx.start_short()
    client.rollback(T, client.publish(T, [b"r1", b"r2"], tx_write_pointer=rolled.write_pointer))
    tx.abort(rolled)
    invalid = tx.start_short()
    client.publish(T, [b"invalid"], tx_write_pointer=invalid.write_pointer)
    assert tx.invalidate(invalid.tx_id)
    client.publish(T, [b"b"])
    held = tx.start_short(timeout_seconds=600)
    result = client.publish(T, [b"held"], tx_write_pointer=held.write_pointer)
    client.publish(T, [b"c"])
    return held, result


def numbers(lag: Lag, stats: TopicStats) -> tuple[int, int, int, int, bool]:
    """(lag messages, lag held, topic messages, topic uncommitted, all exact)."""
    (_, _, listed), *_ = stats.subscriptions
    assert (listed.messages, listed.held) == (lag.messages, lag.held)
    return lag.messages, lag.held, stats.messages, stats.uncommitted, lag.exact and stats.exact


def library(client: MessagingClient) -> tuple[int, int, int, int, bool]:
    return numbers(client.lag(T, "svc"), client.topic_stats(T))


def cli(env: dict[str, str]) -> tuple[int, int, int, int, bool]:
    """The same numbers from ``tms-admin`` in new processes."""

    def run(*args: str) -> dict:
        out = subprocess.run([TMS_ADMIN, *args, "--json"], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    sub, stats = run("sub", "get", str(T), "svc"), run("topic", "stats", str(T))
    (listed,) = stats["subscriptions"]
    assert (listed["lag_messages"], listed["lag_held"]) == (sub["lag_messages"], sub["lag_held"])
    exact = sub["lag_exact"] and stats["exact"]
    return sub["lag_messages"], sub["lag_held"], stats["messages"], stats["uncommitted"], exact


def exporter(client: MessagingClient) -> tuple[int, int, int, int]:
    gauges = {
        (metric.name, sample.labels.get("subscription")): sample.value
        for metric in TopicCollector(client, T.namespace, max_age=0).collect()
        for sample in metric.samples
        if sample.labels.get("topic") == str(T)
    }
    return (
        int(gauges[("tms_subscription_lag_messages", "svc")]),
        int(gauges[("tms_subscription_held_messages", "svc")]),
        int(gauges[("tms_topic_messages", None)]),
        int(gauges[("tms_topic_uncommitted_messages", None)]),
    )


def console(client: MessagingClient) -> tuple[int, int, int, int]:
    """The numbers the console's topic screen shows."""
    detail = views.topic_detail(client, T, History())
    (sub,) = detail["subscriptions"]
    return sub["lag"]["messages"], sub["lag"]["held"], detail["messages"], detail["uncommitted"]


@pytest.mark.parametrize("how", ["commit", "rollback"])
def test_lag_and_stats_leave_out_rolled_back_and_report_in_progress_apart(
    client: MessagingClient, reader: MessagingClient, tx: TransactionClient, env: dict[str, str], how: str
) -> None:
    held, result = setup_topic(client, tx)
    # deliverable now: a, b; held back from the transaction in progress on: held, c; committed: a, b, c
    assert library(reader) == (2, 2, 3, 1, True)
    assert cli(env) == (2, 2, 3, 1, True)
    assert exporter(reader) == (2, 2, 3, 1)
    assert console(reader) == (2, 2, 3, 1)
    with reader.consumer(T, "svc") as consumer:  # what the numbers promise is what it receives
        assert [m.payload for m in consumer.poll(max_messages=10, timeout_seconds=2.0)] == [b"a", b"b"]
        consumer.commit()
    assert library(reader) == (0, 2, 3, 1, True)
    if how == "commit":
        tx.can_commit(held, [])
        tx.commit(held)
        after = (2, 0, 4, 0, True)  # held, c
    else:
        client.rollback(T, result.rollback)  # type: ignore[attr-defined]
        tx.abort(held)
        after = (1, 0, 3, 0, True)  # c
    assert library(reader) == after
    assert cli(env) == after
    assert exporter(reader) == after[:4]


def test_with_the_transaction_server_stopped_the_state_in_hbase_decides(
    client: MessagingClient, tx: TransactionClient, server: TxServer, env: dict[str, str]
) -> None:
    setup_topic(client, tx)
    tx.close()
    server.stop()  # the transaction stays in progress in the state the server stored in HBase
    assert cli(env) == (2, 2, 3, 1, True)


@pytest.fixture
def gateway(hbase_address: str, prefix: str, server: TxServer, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(
        {**gateway_env(hbase_address, prefix), "TMS_TX_SERVER": server.address}, tmp_path / "gateway.log"
    ).start()
    yield process
    process.stop()


def test_the_gateway_reports_the_same(client: MessagingClient, tx: TransactionClient, gateway: GatewayProcess) -> None:
    setup_topic(client, tx)
    with GatewayClient(gateway.url, timeout_seconds=60) as gw:
        assert numbers(gw.lag(T, "svc"), gw.topic_stats(T)) == (2, 2, 3, 1, True)


def test_a_shared_subscription_counts_what_it_will_deliver(
    client: MessagingClient, reader: MessagingClient, tx: TransactionClient
) -> None:
    held, _ = setup_topic(client, tx)
    client.create_subscription(T, "work", shared=True)  # from the start
    # waiting: a, b, the message in progress (delivered if it commits) and c; not the rolled-back or invalid ones
    assert reader.get_subscription(T, "work").shared.waiting == 4  # type: ignore[union-attr]
    with reader.shared_consumer(T, "work") as consumer:

        def receive(count: int) -> list[bytes]:
            got: list[bytes] = []
            for _ in range(30):
                got += [d.payload for d in consumer.receive(max_messages=10, timeout_seconds=1.0)]
                if len(got) >= count:
                    break
            return got

        assert receive(2) == [b"a", b"b"]  # c waits behind the transaction in progress, in its range
        numbers = reader.get_subscription(T, "work").shared
        assert numbers is not None and (numbers.waiting, numbers.in_flight) == (2, 2)
        tx.can_commit(held, [])
        tx.commit(held)
        assert receive(2) == [b"held", b"c"]
        numbers = reader.get_subscription(T, "work").shared
        assert numbers is not None and (numbers.waiting, numbers.in_flight) == (0, 4)
