"""Fault injection: every operation through a TCP proxy that hangs, trickles one byte per second,
resets, or answers bytes that are not Thrift fails with the documented error (HBaseUnavailable)
within the client's timeout plus a small margin; the CLIs exit with code 5 and one line."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tms_hbase import (
    BackgroundPublisher,
    HBaseUnavailable,
    MessagingClient,
    PublisherClosed,
    PublishOutcomeUnknown,
    TopicId,
)
from tms_hbase.config import PREFIX_ENV, THRIFT_ENV
from tms_hbase.tx import write_pointer_now
from tms_hbase.tx.client import TransactionClient, TransactionServiceUnavailable

from ..tcp_proxy import TcpProxy
from ..waiting import wait_for

# Faults timed against deadlines: in `make test-slow` and CI's loaded step, not `make test`.
pytestmark = pytest.mark.slow

T = TopicId("ns", "faults")  # ordering=sequencer
C = TopicId("ns", "chained")  # ordering=chain
TIMEOUT = 1.5
LIMIT = 60.0  # a call still blocked this long has no deadline (a trickled reply takes minutes): at load 10, the
# timeout takes effect long before; how soon after TIMEOUT it ends is the scheduler's, not asserted
FAULTS = ["hang", "trickle", "reset", "garbage", "huge"]
OPERATIONS: dict[str, Callable[[MessagingClient, bytes], object]] = {
    "create_topic": lambda c, _: c.create_topic(TopicId("ns", f"new{uuid.uuid4().hex[:8]}")),
    "get_topic": lambda c, _: c.get_topic(T),
    "list_topics": lambda c, _: c.list_topics("ns"),
    "publish": lambda c, _: c.publish(C, [b"x"]),
    "publish_sequencer": lambda c, _: c.publish(T, [b"x"]),
    "fetch": lambda c, _: list(c.fetch(T)),
    "store": lambda c, _: c.store(T, [b"s"], tx_write_pointer=write_pointer_now()),
    "rollback": lambda c, handle: c.rollback(T, handle),
}


@pytest.fixture(scope="module")
def installation(hbase_address: str) -> Iterator[tuple[str, bytes]]:
    """One installation for the whole file (creating tables takes seconds): its prefix, and the
    handle of a transactional publish to roll back."""
    prefix = f"f{uuid.uuid4().hex[:12]}"
    with MessagingClient(hbase_address, prefix, timeout_seconds=60, create_tables=True) as client:
        client.create_topic(T, {"ordering": "sequencer"})
        client.create_topic(C, {"ordering": "chain"})
        client.publish(T, [b"a", b"b"])
        handle = bytes(client.publish(T, [b"tx"], tx_write_pointer=write_pointer_now()).rollback)
    yield prefix, handle
    with MessagingClient(hbase_address, prefix, timeout_seconds=60) as client:
        client.admin.drop_tables()


def outcome(call: Callable[[], object], limit: float = LIMIT) -> BaseException | None:
    """Run ``call`` in a thread; its exception (None if it returned). Fails if it is still blocked after
    ``limit`` seconds."""
    result: dict[str, object] = {}

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # the test inspects whatever came out
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"still blocked after {limit}s"
    return result.get("error")  # type: ignore[return-value]


def warm_client(proxy: TcpProxy, prefix: str) -> MessagingClient:
    """A client through the proxy whose tables, metadata, tail and HBase's clock are already known, so
    that the fault hits the operation's own calls."""
    client = MessagingClient(proxy.address, prefix, timeout_seconds=TIMEOUT, metadata_max_age_seconds=600)
    warm_up: list[Callable[[], object]] = [
        client.hbase_clock.now_ms,
        lambda: client.publish(T, [b"warm"]),
        lambda: client.publish(C, [b"warm"]),
    ]
    for step in warm_up:  # no fault yet: a call slower than TIMEOUT is the machine's load, so it is tried again
        wait_for(lambda step=step: step() or True, "a warm-up call through the proxy", 300, ignore=(HBaseUnavailable,))
    return client


def check(error: BaseException | None, fault: str) -> None:
    assert isinstance(error, HBaseUnavailable), repr(error)
    if fault in ("hang", "trickle"):
        assert error.timed_out and f"within {TIMEOUT}s" in str(error)
    elif fault in ("garbage", "huge"):
        assert not error.timed_out and "not an HBase Thrift reply" in str(error)


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("operation", OPERATIONS)
def test_every_operation_fails_clearly_within_the_timeout(
    installation: tuple[str, bytes], proxy: TcpProxy, operation: str, fault: str
) -> None:
    prefix, handle = installation
    with warm_client(proxy, prefix) as client:
        proxy.fault = fault  # type: ignore[assignment]
        error = outcome(lambda: OPERATIONS[operation](client, handle))
    check(error, fault)
    if operation == "publish":  # a chain publish sent its write: the caller must learn it may have landed
        assert isinstance(error, PublishOutcomeUnknown)
    if operation == "publish_sequencer":  # its increment failed first: nothing was written, safe to retry
        assert not isinstance(error, PublishOutcomeUnknown)


@pytest.mark.parametrize("fault", ["hang", "trickle"])
def test_each_read_of_a_fetch_iterator_is_bounded(installation: tuple[str, bytes], proxy: TcpProxy, fault: str) -> None:
    prefix, _ = installation
    with warm_client(proxy, prefix) as client:
        messages = client.fetch(T)  # the start is found now; rows are read while iterating
        proxy.fault = fault  # type: ignore[assignment]
        error = outcome(lambda: next(messages))
    check(error, fault)


def test_the_client_works_again_once_the_gateway_does(installation: tuple[str, bytes], proxy: TcpProxy) -> None:
    prefix, _ = installation
    with warm_client(proxy, prefix) as client:
        for fault in FAULTS:
            proxy.fault = fault  # type: ignore[assignment]
            check(outcome(lambda: client.get_topic(T)), fault)
            proxy.fault = None
            proxy.cut()  # a trickled reply would otherwise still be arriving
            assert client.get_topic(T).generation == 1


def test_background_publisher_close_has_a_deadline(installation: tuple[str, bytes], proxy: TcpProxy) -> None:
    """Against a hung gateway, close() returns by its deadline; what is still queued fails with
    PublisherClosed and is counted; the batch being written fails within the client's timeout."""
    prefix, _ = installation
    with warm_client(proxy, prefix) as client:
        proxy.fault = "hang"
        publisher = BackgroundPublisher(client)
        seen = proxy.requests
        in_flight = publisher.publish(T, [b"in flight"])
        deadline = time.monotonic() + 10
        while proxy.requests == seen:  # the sender's write has reached the (hung) gateway
            assert time.monotonic() < deadline, "the sender never sent its batch"
            time.sleep(0.01)
        queued = [publisher.publish(T, [b"queued %d" % i, b"more"]) for i in range(3)]
        assert outcome(lambda: publisher.close(timeout=1.0)) is None
        for future in queued:
            assert isinstance(future.exception(timeout=0), PublisherClosed)
        assert isinstance(in_flight.exception(timeout=LIMIT), HBaseUnavailable)
        stats = publisher.stats
        assert (stats.abandoned, stats.failed, stats.published) == (6, 7, 0)


@pytest.mark.parametrize("fault", ["garbage", "huge"])
def test_transaction_client_reports_garbage_as_unavailable(proxy: TcpProxy, fault: str) -> None:
    proxy.fault = fault  # type: ignore[assignment]
    with TransactionClient(proxy.address, timeout_seconds=TIMEOUT) as tx:
        error = outcome(tx.status)
    assert isinstance(error, TransactionServiceUnavailable), repr(error)


def run_cli(program: str, args: list[str], prefix: str, proxy: TcpProxy) -> subprocess.CompletedProcess:
    """The program's outcome; one still running after LIMIT plus its start-up fails the test."""
    env = {**os.environ, THRIFT_ENV: proxy.address, PREFIX_ENV: prefix}
    script = str(Path(sys.executable).with_name(program))
    return subprocess.run([script, *args], env=env, capture_output=True, text=True, timeout=LIMIT + 30)


@pytest.mark.parametrize("fault", ["garbage", "trickle"])
@pytest.mark.parametrize(
    "program, args",
    [("tms-admin", ["--timeout", str(TIMEOUT), "topic", "list"]), ("tms-sweeper", ["once", "--timeout", str(TIMEOUT)])],
    ids=["tms-admin", "tms-sweeper"],
)
def test_cli_exits_5_with_one_line(
    installation: tuple[str, bytes], proxy: TcpProxy, program: str, args: list[str], fault: str
) -> None:
    proxy.fault = fault  # type: ignore[assignment]
    result = run_cli(program, args, installation[0], proxy)
    assert result.returncode == 5, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and proxy.address in lines[-1]
    if program == "tms-admin":
        assert len(lines) == 1
