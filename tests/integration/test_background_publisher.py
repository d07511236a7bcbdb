"""The background publisher on the real HBase: batching, order, futures, full-queue and give-up policies."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tms_hbase import BackgroundPublisher, InvalidArgument, MessagingClient, QueueFull, TopicId, TopicNotFound
from tms_hbase.model.retry import Retry

from ..tcp_proxy import TcpProxy

T = TopicId("ns", "async")
ROOT = Path(__file__).resolve().parents[2]


def payloads(client: MessagingClient, topic: TopicId = T) -> list[bytes]:
    return [m.payload for m in client.fetch(topic)]


def test_publishes_in_order_in_few_batches(client: MessagingClient) -> None:
    client.create_topic(T)
    with BackgroundPublisher(client, linger_seconds=0.05) as publisher:
        futures = [publisher.publish(T, [f"{i}".encode(), b"+"]) for i in range(300)]
        results = [f.result(timeout=30) for f in futures]
        assert publisher.stats.published == 600
        assert publisher.stats.batches < 30, publisher.stats
    stored = list(client.fetch(T))
    assert [m.payload for m in stored] == [p for i in range(300) for p in (f"{i}".encode(), b"+")]
    # each future names its own messages, though publishes shared batch rows
    assert [i for r in results for i in r.message_ids] == [m.id for m in stored]
    assert len({r.position for r in results}) == publisher.stats.batches


def test_flush_waits_and_close_sends_what_is_queued(client: MessagingClient) -> None:
    client.create_topic(T)
    publisher = BackgroundPublisher(client, linger_seconds=0.2)
    publisher.publish(T, [b"a"])
    publisher.flush(timeout=30)
    assert payloads(client) == [b"a"]
    publisher.publish(T, [b"b", b"c"])
    publisher.close(timeout=30)
    assert payloads(client) == [b"a", b"b", b"c"]
    with pytest.raises(Exception, match="closed"):
        publisher.publish(T, [b"late"])


def test_bad_input_fails_at_once_or_in_its_future(client: MessagingClient) -> None:
    client.create_topic(T)
    with BackgroundPublisher(client) as publisher:
        with pytest.raises(InvalidArgument):
            publisher.publish(T, [])
        with pytest.raises(InvalidArgument):
            publisher.publish(T, ["not bytes"])
        missing = publisher.publish(TopicId("ns", "missing"), [b"x"])
        with pytest.raises(TopicNotFound):
            missing.result(timeout=30)
        assert publisher.publish(T, [b"fine"]).result(timeout=30).count == 1
    assert payloads(client) == [b"fine"]
    with pytest.raises(InvalidArgument, match="on_full"):
        BackgroundPublisher(client, on_full="ignore")  # type: ignore[arg-type]


def test_full_queue_policies(proxy: TcpProxy, prefix: str, hbase_address: str) -> None:
    # tables and topic without the proxy's short timeout
    with MessagingClient(hbase_address, prefix, create_tables=True) as direct:
        direct.create_topic(T)
    with MessagingClient(proxy.address, prefix, timeout_seconds=2) as client:
        proxy.stall = True  # the sender hangs on its first publish; the queue fills up
        raising = BackgroundPublisher(client, max_queue=2, on_full="raise", retry=Retry.never(), linger_seconds=0)
        dropping = BackgroundPublisher(client, max_queue=2, on_full="drop", retry=Retry.never(), linger_seconds=0)
        for publisher in (raising, dropping):
            publisher.publish(T, [b"in flight"])
            time.sleep(0.2)
            publisher.publish(T, [b"q1"])
            publisher.publish(T, [b"q2"])
        with pytest.raises(QueueFull):
            raising.publish(T, [b"one too many"])
        dropped = dropping.publish(T, [b"one too many", b"and another"])
        assert dropped.done() and dropped.result() is None
        assert dropping.stats.dropped_full == 2
        proxy.stall = False
        for publisher in (raising, dropping):
            publisher.close(timeout=60)


def test_give_up_policies_after_retries(proxy: TcpProxy, prefix: str, hbase_address: str) -> None:
    # creating tables takes longer than 0.5 s on a busy HBase
    with MessagingClient(hbase_address, prefix, create_tables=True) as direct:
        direct.create_topic(T)
    with MessagingClient(proxy.address, prefix, timeout_seconds=0.5) as client:
        proxy.stall = True
        with BackgroundPublisher(client, retry=Retry(attempts=3, backoff_seconds=0.01), on_give_up="raise") as raising:
            failed = raising.publish(T, [b"x"])
            assert failed.exception(timeout=60) is not None
            assert raising.stats.retries == 2 and raising.stats.failed == 1
        with BackgroundPublisher(client, retry=Retry(attempts=2, backoff_seconds=0.01), on_give_up="drop") as dropping:
            assert dropping.publish(T, [b"y", b"z"]).result(timeout=60) is None
            assert dropping.stats.dropped_failed == 2


def test_retry_after_an_outage_stores_exactly_once(client: MessagingClient, proxy: TcpProxy, prefix: str) -> None:
    client.create_topic(T)
    with (
        MessagingClient(proxy.address, prefix, timeout_seconds=1) as flaky,
        BackgroundPublisher(
            flaky, retry=Retry(attempts=21, backoff_seconds=0.05, max_backoff_seconds=0.2), linger_seconds=0
        ) as publisher,
    ):
        # the write lands, its answer is lost, and HBase then stops answering for a while
        proxy.lose_reply_to(b"checkAndPut", then_stall=True)
        first = publisher.publish(T, [b"once"])
        time.sleep(3)
        assert proxy.replies_lost == 1 and not first.done()
        proxy.stall = False
        assert first.result(timeout=60).count == 1
        assert publisher.publish(T, [b"after"]).result(timeout=60).count == 1
    assert payloads(client) == [b"once", b"after"]


def test_one_message_publishes_from_threads_are_stored_once_each_in_each_threads_order(
    client: MessagingClient,
) -> None:
    client.create_topic(T)
    threads, count = 4, 400
    # a long linger and small rows: the sender gathers what the threads publish meanwhile into shared rows
    with BackgroundPublisher(client, linger_seconds=0.2, max_batch_messages=64) as publisher:

        def produce(t: int) -> list[Future]:
            return [publisher.publish(T, [f"{t}:{i}".encode()]) for i in range(count)]

        with ThreadPoolExecutor(threads) as pool:
            futures = dict(enumerate(pool.map(produce, range(threads))))
        publisher.flush(timeout=120)
        results = {f"{t}:{i}": future.result(timeout=0) for t, fs in futures.items() for i, future in enumerate(fs)}
    stored = list(client.fetch(T))
    names = [m.payload.decode() for m in stored]
    assert sorted(names) == sorted(results)  # every message exactly once
    for t in range(threads):
        assert [n for n in names if n.startswith(f"{t}:")] == [f"{t}:{i}" for i in range(count)]
    assert [results[n].message_ids for n in names] == [[m.id] for m in stored]  # each future names its message
    assert len({r.position for r in results.values()}) < len(results)  # publishes shared rows


@pytest.mark.parametrize("ordering", ["chain", "sequencer"])
def test_a_killed_pipelining_process_loses_nothing_it_was_told_was_stored(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path, ordering: str
) -> None:
    client.create_topic(T, {"ordering": ordering})
    log, threads = tmp_path / "log", 3
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.workers.background_writer", str(T), str(threads), str(log)],
        cwd=ROOT,
        env=tms_env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while True:  # kill it once it has stored some and has publishes in flight (its log is final while stopped)
            assert worker.poll() is None, f"the writer ended early: {worker.communicate()[1]}"
            assert time.monotonic() < deadline, "the writer never had 2,000 messages stored and more in flight"
            worker.send_signal(signal.SIGSTOP)
            windows = _writer_log(log)
            in_flight = windows["sent"] - windows["stored"]
            if sum(last - first + 1 for _, first, last in windows["stored"]) >= 2000 and in_flight:
                worker.send_signal(signal.SIGKILL)
                break
            worker.send_signal(signal.SIGCONT)
            time.sleep(0.2)
    finally:
        worker.kill()
        worker.communicate()
    names = [m.payload.decode() for m in client.fetch(T)]
    assert len(names) == len(set(names))  # nothing stored twice
    for t in range(threads):
        indexes = [int(n.split(":")[1]) for n in names if n.startswith(f"{t}:")]
        assert indexes == list(range(len(indexes)))  # in the thread's order, without a gap
    told = {f"{t}:{i}" for t, first, last in _writer_log(log)["stored"] for i in range(first, last + 1)}
    assert told <= set(names)


def _writer_log(log: Path) -> dict[str, set[tuple[int, int, int]]]:
    """The (thread, first, last) message windows the writer logged as ``sent`` and as ``stored`` (whole lines
    only: a stopped writer may be halfway through one)."""
    windows: dict[str, set[tuple[int, int, int]]] = {"sent": set(), "stored": set()}
    for line in log.read_text().split("\n")[:-1] if log.exists() else ():
        kind, t, first, last = line.split()
        windows[kind].add((int(t), int(first), int(last)))
    return windows
