"""Subscriptions deliver committed messages only (docs/consumers.md, docs/shared.md), with a real transaction
server (``tms-admin tx serve``) and the real HBase: a rolled-back or invalidated message is never delivered;
one still in progress holds an exclusive subscription at its position until its transaction ends, then is
delivered (commit) or skipped (rollback, invalidate); a shared subscription goes on with the other ranges
meanwhile. The same holds for a consumer in a new process started after the transaction ended, and with the
transaction server stopped (the state it stored in HBase is read instead)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.aio import AsyncMessagingClient
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.isolation import committed
from tms_hbase.rest import codec as rest
from tms_hbase.tx.client import TransactionClient

from ..gateway_server import GatewayProcess, gateway_env
from ..tcp_proxy import TcpProxy
from ..tx_server import TxServer, free_port

T = TopicId("committed", "events")
TMS_ADMIN = str(Path(sys.executable).with_name("tms-admin"))
WAIT = 60.0  # seconds a condition may take on a loaded machine


@pytest.fixture
def server(tms_env: dict[str, str]) -> Iterator[TxServer]:
    """A transaction server of the test's own, storing its state in the test's installation."""
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
    """Environment for processes of the test's own, naming its transaction server."""
    return {**tms_env, "TMS_TX_SERVER": server.address}


@pytest.fixture
def reader(hbase_address: str, prefix: str, server: TxServer) -> Iterator[MessagingClient]:
    """A client whose consumers judge transactional rows by that server's state."""
    with MessagingClient(hbase_address, prefix, tx_server=server.address) as c:
        yield c


def setup_topic(client: MessagingClient, tx: TransactionClient) -> dict[str, object]:
    """Rows: a, [held: in progress], b, [rolled back], [invalidated], c. Returns the held transaction and
    its publish result."""
    client.create_topic(T)
    client.create_subscription(T, "svc")
    client.publish(T, [b"a"])
    held = tx.start_short(timeout_seconds=600)
    held_result = client.publish(T, [b"held"], tx_write_pointer=held.write_pointer)
    client.publish(T, [b"b"])
    rolled = tx.start_short()
    client.rollback(T, client.publish(T, [b"rolled"], tx_write_pointer=rolled.write_pointer))
    tx.abort(rolled)
    invalid = tx.start_short()
    client.publish(T, [b"invalid"], tx_write_pointer=invalid.write_pointer)
    assert tx.invalidate(invalid.tx_id)
    client.publish(T, [b"c"])
    return {"held": held, "result": held_result}


def end(client: MessagingClient, tx: TransactionClient, how: str, setup: dict[str, object]) -> None:
    held = setup["held"]
    if how == "commit":
        tx.can_commit(held, [])
        tx.commit(held)
    elif how == "rollback":
        client.rollback(T, setup["result"])
        tx.abort(held)
    else:
        assert tx.invalidate(held.tx_id)
    client.notify_consumers(T)  # what a transactional publisher does once its transaction ended


def expected(how: str) -> list[bytes]:
    return [b"a", b"held", b"b", b"c"] if how == "commit" else [b"a", b"b", b"c"]


def drain(consumer, until: list[bytes]) -> list[bytes]:
    """Poll until ``until`` came (or the deadline), returning everything delivered."""
    got: list[bytes] = []
    deadline = time.monotonic() + WAIT
    while got != until and time.monotonic() < deadline and len(got) < len(until) + 5:
        got += [m.payload for m in consumer.poll(timeout_seconds=0.5)]
    return got


@pytest.mark.parametrize("how", ["commit", "rollback", "invalidate"])
def test_exclusive_consumer_holds_at_a_transaction_in_progress(
    client: MessagingClient, reader: MessagingClient, tx: TransactionClient, env: dict[str, str], how: str
) -> None:
    setup = setup_topic(client, tx)
    with reader.consumer(T, "svc") as consumer:
        assert drain(consumer, [b"a"]) == [b"a"]
        assert consumer.poll(timeout_seconds=1.0) == []  # held at the transaction in progress
        end(client, tx, how, setup)
        assert drain(consumer, expected(how)[1:]) == expected(how)[1:]
        consumer.commit()
    # a consumer in a new process, started after the transaction ended, from the start
    client.reset_subscription(T, "svc", "earliest")
    assert consume_in_new_process(env) == expected(how)


CONSUME = """
import json, sys
from tms_hbase import MessagingClient, TopicId
with MessagingClient() as client, client.consumer(TopicId.parse(sys.argv[1]), "svc") as consumer:
    print(json.dumps([m.payload.decode() for m in consumer.poll(max_messages=100, timeout_seconds=2.0)]))
"""


def consume_in_new_process(env: dict[str, str]) -> list[bytes]:
    """What a consumer in a process of its own receives in one poll (the environment names the server)."""
    out = subprocess.run([sys.executable, "-c", CONSUME, str(T)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [p.encode() for p in json.loads(out.stdout)]


def test_with_the_transaction_server_stopped_the_state_in_hbase_decides(
    client: MessagingClient, reader: MessagingClient, tx: TransactionClient, server: TxServer, env: dict[str, str]
) -> None:
    setup_topic(client, tx)
    tx.close()
    server.stop()  # the held transaction stays in progress in the state the server stored in HBase
    with reader.consumer(T, "svc") as consumer:
        assert drain(consumer, [b"a"]) == [b"a"]
        assert consumer.poll(timeout_seconds=1.0) == []
    assert consume_in_new_process(env) == [b"a"]  # (nothing committed: from the start, held at the same place)


def test_uncommitted_isolation_delivers_every_row_as_stored(
    client: MessagingClient, reader: MessagingClient, tx: TransactionClient
) -> None:
    setup_topic(client, tx)
    with reader.consumer(T, "svc", isolation="uncommitted") as consumer:
        got = drain(consumer, [b"a", b"held", b"b", b"rolled", b"invalid", b"c"])
    assert got == [b"a", b"held", b"b", b"rolled", b"invalid", b"c"]


@pytest.mark.parametrize("how", ["commit", "rollback"])
def test_shared_consumers_go_on_past_a_transaction_in_progress(
    client: MessagingClient, reader: MessagingClient, tx: TransactionClient, how: str
) -> None:
    """claim_size 3: ranges are positions 1-3 and 4-6 (rows a, held, b | rolled, invalid, c). What follows
    the held row in its range (b) waits for it; the next range is delivered meanwhile (c)."""
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True, claim_size=3)
    setup = setup_topic_rows(client, tx)
    received: list[bytes] = []
    with reader.shared_consumer(T, "work", max_wait_seconds=1.0) as consumer:
        deadline = time.monotonic() + WAIT
        while sorted(received) != [b"a", b"c"] and time.monotonic() < deadline:
            for d in consumer.receive(10, timeout_seconds=0.5):
                received.append(d.payload)
                consumer.ack(d)
        assert sorted(received) == [b"a", b"c"]
        assert consumer.receive(10, timeout_seconds=1.0) == []  # b waits behind the held row
        end(client, tx, how, setup)
        later = [b"held", b"b"] if how == "commit" else [b"b"]
        got: list[bytes] = []
        deadline = time.monotonic() + WAIT
        while len(got) < len(later) and time.monotonic() < deadline:
            for d in consumer.receive(10, timeout_seconds=0.5):
                got.append(d.payload)
                consumer.ack(d)
        assert got == later  # in order within the range


def setup_topic_rows(client: MessagingClient, tx: TransactionClient) -> dict[str, object]:
    """The rows of :func:`setup_topic` on a topic and subscription that exist already."""
    client.publish(T, [b"a"])
    held = tx.start_short(timeout_seconds=600)
    held_result = client.publish(T, [b"held"], tx_write_pointer=held.write_pointer)
    client.publish(T, [b"b"])
    rolled = tx.start_short()
    client.rollback(T, client.publish(T, [b"rolled"], tx_write_pointer=rolled.write_pointer))
    tx.abort(rolled)
    invalid = tx.start_short()
    client.publish(T, [b"invalid"], tx_write_pointer=invalid.write_pointer)
    assert tx.invalidate(invalid.tx_id)
    client.publish(T, [b"c"])
    return {"held": held, "result": held_result}


def test_asyncio_consumer_delivers_committed_messages_only(
    client: MessagingClient, tx: TransactionClient, server: TxServer, hbase_address: str, prefix: str
) -> None:
    setup = setup_topic(client, tx)

    async def consume() -> tuple[list[bytes], list[bytes]]:
        aio = AsyncMessagingClient(hbase_address, prefix, tx_server=server.address)
        async with aio, aio.consumer(T, "svc") as consumer:
            first: list[bytes] = []
            deadline = time.monotonic() + WAIT
            while first != [b"a"] and time.monotonic() < deadline:
                first += [m.payload for m in await consumer.poll(timeout_seconds=0.5)]
            assert await consumer.poll(timeout_seconds=1.0) == []
            await asyncio.to_thread(end, client, tx, "commit", setup)
            rest: list[bytes] = []
            deadline = time.monotonic() + WAIT
            while len(rest) < 3 and time.monotonic() < deadline:
                rest += [m.payload for m in await consumer.poll(timeout_seconds=0.5)]
            return first, rest

    first, rest = asyncio.run(consume())
    assert first == [b"a"]
    assert rest == [b"held", b"b", b"c"]


SLOW_SERVER = 6.0  # seconds the transaction server takes to answer, in the next test
SLOW_CALLBACK = 3.0  # a loop step this long is a blocking call (a loaded machine stretches one to about a second)


def test_an_asyncio_consumer_waits_for_a_slow_transaction_server_on_the_event_loop(
    client: MessagingClient,
    tx: TransactionClient,
    server: TxServer,
    hbase_address: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The asyncio client reads the transaction server's state over a socket that waits on the event loop:
    while the server is slow to answer, the loop runs on (asyncio's debug mode reports any step that held it
    past SLOW_CALLBACK), and the committed message comes from the server's answer."""
    monkeypatch.setattr(committed, "SERVER_TIMEOUT_SECONDS", 60.0)  # the slow answer is awaited, not given up on
    client.create_topic(T)
    client.create_subscription(T, "svc")
    done = tx.start_short(timeout_seconds=600)
    client.publish(T, [b"done"], tx_write_pointer=done.write_pointer)
    tx.can_commit(done, [])
    tx.commit(done)
    slow = TcpProxy(("127.0.0.1", int(server.address.rsplit(":", 1)[1])))
    slow.delay = SLOW_SERVER
    watcher = SlowSteps()
    logging.getLogger("asyncio").addHandler(watcher)

    async def consume() -> list[bytes]:
        asyncio.get_running_loop().slow_callback_duration = SLOW_CALLBACK
        aio = AsyncMessagingClient(hbase_address, prefix, tx_server=slow.address, timeout_seconds=60)
        async with aio, aio.consumer(T, "svc") as consumer:
            got: list[bytes] = []
            deadline = time.monotonic() + WAIT
            while not got and time.monotonic() < deadline:
                got += [m.payload for m in await consumer.poll(timeout_seconds=0.5)]
            return got

    try:
        got = asyncio.run(consume(), debug=True)
    finally:
        logging.getLogger("asyncio").removeHandler(watcher)
        slow.close()
    assert got == [b"done"]
    assert slow.requests, "the transaction server's state was never asked for: the test tested nothing"
    assert watcher.reports == []


class SlowSteps(logging.Handler):
    """asyncio's debug-mode reports of a step that held the event loop past its ``slow_callback_duration``."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.reports: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if re.match(r"Executing .* took [\d.]+ seconds", record.getMessage()):
            self.reports.append(record.getMessage())


# -- through the gateway ------------------------------------------------------------------------


@pytest.fixture
def gateway(hbase_address: str, prefix: str, server: TxServer, tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway process whose consumers read that transaction server's state."""
    env = {**gateway_env(hbase_address, prefix), "TMS_TX_SERVER": server.address}
    process = GatewayProcess(env, tmp_path / "gateway.log").start()
    yield process
    process.stop()


def rest_messages(http: httpx.Client, session: str | None, **query: object) -> tuple[list[bytes], str]:
    """One REST ``GET .../messages`` (JSON): the payloads and the session to go on with."""
    headers = {"Accept": "application/json"} | ({"TMS-Consumer": session} if session else {})
    response = http.get(rest.subscription_path(T, "svc", "messages"), params=query, headers=headers)
    assert response.status_code == 200, response.text
    return [base64.b64decode(m["payload"]) for m in response.json()], response.headers["TMS-Consumer"]


def test_gateway_rest_and_client_deliver_committed_messages_only(
    client: MessagingClient, tx: TransactionClient, gateway: GatewayProcess
) -> None:
    setup = setup_topic(client, tx)
    client.create_subscription(T, "raw")
    with httpx.Client(base_url=gateway.url, timeout=60) as http:
        got, session = rest_messages(http, None, wait=1)
        assert got == [b"a"]
        assert rest_messages(http, session, wait=1)[0] == []  # held at the transaction in progress
        raw = http.get(
            rest.subscription_path(T, "raw", "messages"), params={"isolation": "uncommitted", "max": 10}
        ).json()
        assert [base64.b64decode(m["payload"]) for m in raw] == [b"a", b"held", b"b", b"rolled", b"invalid", b"c"]
        bad = http.get(rest.subscription_path(T, "svc", "messages"), params={"isolation": "dirty"})
        assert bad.status_code == 400 and "isolation" in bad.text
        end(client, tx, "rollback", setup)
        later: list[bytes] = []
        deadline = time.monotonic() + WAIT
        while later != [b"b", b"c"] and time.monotonic() < deadline:
            page, session = rest_messages(http, session, wait=1)
            later += page
        assert later == [b"b", b"c"]
    # the library's gateway client: a new session from the start
    client.reset_subscription(T, "svc", "earliest", force=True)
    with GatewayClient(gateway.url, timeout_seconds=60) as gw, gw.consumer(T, "svc") as consumer:
        assert drain(consumer, [b"a", b"b", b"c"]) == [b"a", b"b", b"c"]


def test_gateway_shared_deliveries_and_cli_skip_rolled_back_messages(
    client: MessagingClient, tx: TransactionClient, gateway: GatewayProcess, env: dict[str, str]
) -> None:
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True)
    client.create_subscription(T, "cli", shared=True)
    setup = setup_topic_rows(client, tx)
    end(client, tx, "rollback", setup)
    received: list[bytes] = []
    with GatewayClient(gateway.url, timeout_seconds=60) as gw, gw.shared_consumer(T, "work") as consumer:
        deadline = time.monotonic() + WAIT
        while sorted(received) != [b"a", b"b", b"c"] and time.monotonic() < deadline:
            for d in consumer.receive(10, timeout_seconds=0.5):
                received.append(d.payload)
                consumer.ack(d)
    assert sorted(received) == [b"a", b"b", b"c"]
    # tms-admin sub consume, a process of its own
    out = subprocess.run(
        [TMS_ADMIN, "sub", "consume", str(T), "cli", "--count", "10", "--wait", "3", "--ack", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert sorted(r["payload"] for r in json.loads(out.stdout)) == ["a", "b", "c"]
