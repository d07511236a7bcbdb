"""The background publisher's futures: standard Futures to their holders (waits, callbacks, wait/as_completed)
though they make their lock only when needed, and a holder's cancel never stops the publisher."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, CancelledError, as_completed, wait

import pytest

from tms_hbase import BackgroundPublisher, TopicId
from tms_hbase.model.published import PublishResult
from tms_hbase.publish.futures import PublishFuture


def test_resolved_before_anyone_looks() -> None:
    done, failed = PublishFuture(), PublishFuture()
    done.resolve("stored")
    failed.resolve(error=ValueError("refused"))
    assert done.done() and done.result(timeout=0) == "stored" and done.exception(timeout=0) is None
    assert failed.done() and isinstance(failed.exception(timeout=0), ValueError)
    with pytest.raises(ValueError, match="refused"):
        failed.result(timeout=0)
    seen: list[object] = []
    done.add_done_callback(lambda f: seen.append(f.result()))
    assert seen == ["stored"]


def test_waiters_callbacks_and_wait_see_a_later_resolve() -> None:
    futures = [PublishFuture() for _ in range(3)]
    seen: list[object] = []
    futures[0].add_done_callback(lambda f: seen.append(f.result()))
    results: list[object] = []
    waiter = threading.Thread(target=lambda: results.append(futures[1].result(timeout=60)))
    waiter.start()
    resolver = threading.Timer(0.05, lambda: [f.resolve(i) for i, f in enumerate(futures)])
    resolver.start()
    finished, _ = wait(futures[2:], timeout=60, return_when=FIRST_COMPLETED)
    assert finished == {futures[2]}
    waiter.join(60)
    assert seen == [0] and results == [1]
    assert sorted(f.result() for f in as_completed(futures, timeout=60)) == [0, 1, 2]


def test_a_cancelled_future_stays_cancelled_when_resolved() -> None:
    future = PublishFuture()
    assert future.cancel()
    future.resolve("stored")
    future.resolve(error=ValueError("late"))
    with pytest.raises(CancelledError):
        future.result(timeout=0)


class Held:
    """Stands in for MessagingClient.publish: each publish waits until ``go`` is set."""

    max_batch_bytes = 1024

    def __init__(self) -> None:
        self.go, self.writing = threading.Event(), threading.Event()

    def publish(self, topic, payloads, *, ttl_seconds=None, resume=None) -> PublishResult:
        self.writing.set()
        assert self.go.wait(60)
        return PublishResult(topic, 1, 7, len(payloads))


def test_cancelling_a_publish_in_flight_leaves_the_publisher_working() -> None:
    client = Held()
    with BackgroundPublisher(client, linger_seconds=0) as publisher:
        cancelled = publisher.publish(TopicId("ns", "t"), [b"x"])
        assert client.writing.wait(60)
        assert cancelled.cancel()  # only the caller's wait ends: the write goes on
        client.go.set()
        assert publisher.publish(TopicId("ns", "t"), [b"y"]).result(timeout=60).count == 1
        assert publisher.stats.published == 2
