"""Non-transactional publishing without waiting, from a thread: a bounded queue drained by one background
sender thread that batches, retries with backoff, and resolves a future per publish (docs/design.md,
requirement 5). It is a thread, not asyncio: the caller's thread never waits on HBase."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Literal

from tms_hbase import tracing
from tms_hbase.errors import (
    ClientClosed,
    HBaseError,
    InvalidArgument,
    PublisherClosed,
    PublishOutcomeUnknown,
    QueueFull,
    TmsError,
)
from tms_hbase.model.checks import sized_payloads
from tms_hbase.model.published import PublishResult
from tms_hbase.model.record import Record
from tms_hbase.model.retry import Retry
from tms_hbase.model.stats import PublisherStats
from tms_hbase.model.topic import TopicId, TopicLike, as_topic
from tms_hbase.publish.futures import PublishFuture
from tms_hbase.runtime import green

if TYPE_CHECKING:
    from tms_hbase.client import MessagingClient

log = logging.getLogger(__name__)

DEFAULT_RETRY = Retry(attempts=6, backoff_seconds=0.05, max_backoff_seconds=2.0)
"""How a failed batch is retried unless ``retry=`` says otherwise."""
OnFull = Literal["raise", "drop", "block"]
OnGiveUp = Literal["raise", "drop"]
DEFAULT_CLOSE_TIMEOUT = 30.0
"""Seconds :meth:`BackgroundPublisher.close` waits by default for what is queued to be sent."""


class _Item:
    """One publish call waiting for the sender (no payloads: a flush marker)."""

    __slots__ = ("future", "payloads", "size", "topic", "ttl")

    def __init__(self, topic: TopicId, payloads: tuple[bytes | Record, ...], ttl: float | None, size: int) -> None:
        self.topic, self.payloads, self.ttl, self.size = topic, payloads, ttl, size
        self.future = PublishFuture()


class BackgroundPublisher:
    """A background thread that pipelines publishes: ``publish`` returns at once with a
    :class:`concurrent.futures.Future` (cancelling it only stops the wait: the messages go on to their outcome).

    Publish without waiting: ``publish`` returns a Future that becomes the
    :class:`~tms_hbase.model.published.PublishResult` of its messages once they are stored (several
    publishes may share one batch row: each result names its own messages' ids).

    * ``max_queue`` publish calls may wait; when full, ``on_full`` decides: ``"raise"`` QueueFull,
      ``"drop"`` (the future is already done with None, counted), or ``"block"`` up to
      ``block_timeout_seconds``.
    * The sender takes everything queued at once and writes each topic's messages as batch rows of at
      most ``max_batch_messages`` / ``max_batch_bytes``: what is published while a write is in flight
      goes in the next one. When it finds less than a full batch queued, it waits for more until the
      oldest has waited ``linger_seconds`` (Kafka's ``linger.ms``); a full batch, a ``flush`` or
      ``close`` ends that wait. A publish wakes the sender only when it is idle or the batch is full,
      so one-message publishes cost no thread switch each.
    * A batch that failed with an error worth retrying (HBase unreachable or too slow, its answer
      lost) is retried as the ``retry`` policy says (default: 6 attempts, exponential backoff with
      jitter), exactly once (an interrupted write is resumed, never repeated). A refusal from HBase is
      not retried: it would be refused again. Then ``on_give_up`` decides: ``"raise"`` (the futures
      get the error) or ``"drop"`` (they get None, counted).
    * Bad input (unknown topic, empty or oversize batch) fails that publish's future at once.

    Messages of one topic are stored in the order they were queued (a thread's publishes in its call
    order). Use as a context manager, or call :meth:`close`, which sends what is queued first, for at
    most ``timeout`` seconds (:data:`DEFAULT_CLOSE_TIMEOUT` by default; the context manager uses that
    default).
    """

    def __init__(
        self,
        client: MessagingClient,
        *,
        max_queue: int = 10_000,
        on_full: OnFull = "raise",
        block_timeout_seconds: float | None = None,
        max_batch_messages: int = 500,
        max_batch_bytes: int = 1024 * 1024,
        linger_seconds: float = 0.005,
        retry: Retry | None = None,
        on_give_up: OnGiveUp = "raise",
    ) -> None:
        if on_full not in ("raise", "drop", "block"):
            raise InvalidArgument(f"on_full must be 'raise', 'drop' or 'block', not {on_full!r}")
        if on_give_up not in ("raise", "drop"):
            raise InvalidArgument(f"on_give_up must be 'raise' or 'drop', not {on_give_up!r}")
        if max_queue < 1 or max_batch_messages < 1:
            raise InvalidArgument("max_queue and max_batch_messages must be >= 1")
        self.retry = retry or DEFAULT_RETRY
        self.client = client
        self.block_timeout_seconds = block_timeout_seconds
        self.on_full, self.on_give_up = on_full, on_give_up
        self.max_queue = max_queue
        self.max_batch_messages, self.max_batch_bytes = max_batch_messages, max_batch_bytes
        self._max_bytes = client.max_batch_bytes  # what one publish may hold (checked at the call)
        self.linger_seconds = linger_seconds
        self.stats = PublisherStats()
        self._stats_lock = green.no_wait_lock()  # the sender and close() both count failures
        # What waits for the sender, and how much: publishes and flush markers in call order.
        self._lock = threading.Lock()
        self._queued: deque[_Item] = deque()
        self._calls = self._messages = self._bytes = self._markers = 0  # publishes, their messages and bytes
        self._since = 0.0  # time.monotonic() when the oldest publish queued
        self._wake = threading.Condition(self._lock)  # the sender waits on it; woken only if ``_listening``
        self._listening = False  # the sender waits for any publish (idle) rather than for a full batch
        self._lingering = False  # the sender waits for a full batch, a flush or close
        self._space = threading.Condition(self._lock)  # publishers blocked by a full queue wait on it
        self._blocked = 0
        self._closed = False
        self._deadline: float | None = None  # set by close(): nothing is sent or retried after it
        self._sender = threading.Thread(target=self._run, name="tms-background-publisher", daemon=True)
        self._sender.start()

    def __enter__(self) -> BackgroundPublisher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def publish(
        self,
        topic: TopicLike,
        payloads: Sequence[bytes | Record],
        *,
        ttl_seconds: float | None = None,
    ) -> Future:
        """Queue payloads for ``topic``; the returned Future gives their PublishResult once they are stored
        (None if they were dropped)."""
        if self._closed:
            raise ClientClosed("the background publisher is closed: open a new one")
        topic = as_topic(topic)
        batch, size = sized_payloads(tracing.created(str(topic), payloads), self._max_bytes, allow_empty=False)
        item = _Item(topic, batch, ttl_seconds, size)
        with self._lock:
            if self._closed:
                raise ClientClosed("the background publisher is closed: open a new one")
            if self._calls >= self.max_queue and not self._wait_for_space():
                if self.on_full == "drop":
                    self.stats.dropped_full += len(batch)
                    item.future.resolve(None)
                    return item.future
                raise QueueFull(f"background publisher queue is full ({self.max_queue} publishes waiting)")
            if not self._queued:
                self._since = time.monotonic()
            self._queued.append(item)
            self._calls += 1
            self._messages += len(batch)
            self._bytes += item.size
            if self._listening or (self._lingering and self._full()):
                self._wake.notify()
        return item.future

    def _wait_for_space(self) -> bool:
        """With ``on_full="block"``, wait (holding the lock's condition) until the queue has room or
        ``block_timeout_seconds`` pass; whether it has room. ClientClosed if the publisher closed meanwhile."""
        if self.on_full != "block":
            return False
        timeout = self.block_timeout_seconds
        deadline = None if timeout is None else time.monotonic() + timeout
        self._blocked += 1
        try:
            while self._calls >= self.max_queue and not self._closed:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._space.wait(left)
        finally:
            self._blocked -= 1
        if self._closed:
            raise ClientClosed("the background publisher closed while this publish waited for room")
        return True

    def _full(self) -> bool:
        """Whether what is queued makes a full batch (or must go now: a flush or close waits)."""
        return (
            self._messages >= self.max_batch_messages
            or self._bytes >= self.max_batch_bytes
            or self._markers > 0
            or self._closed
        )

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything queued so far is stored or given up (ClientClosed once closed: ``close``
        sends what is queued)."""
        marker = _Item(TopicId("_", "_"), (), None, 0)
        with self._lock:
            if self._closed:
                raise ClientClosed("the background publisher is closed: close() sent what was queued")
            self._queued.append(marker)
            self._markers += 1
            self._wake.notify()
        marker.future.result(timeout)

    def close(self, timeout: float | None = DEFAULT_CLOSE_TIMEOUT) -> None:
        """Send what is queued, then stop the sender; return within about ``timeout`` seconds
        (None: wait however long sending takes, e.g. against a hung HBase, retries and all).

        When the deadline passes, what is still queued is not sent: those futures fail with
        PublisherClosed and are counted in ``stats.abandoned`` (and ``stats.failed``), and no retry
        starts. A batch being written at that moment finishes on its own within the client's
        ``timeout``; its futures then tell how it went.
        """
        if self._closed:
            return
        if timeout is not None and (isinstance(timeout, bool) or not 0 <= timeout < float("inf")):
            raise InvalidArgument(f"bad close timeout {timeout!r}: expected seconds >= 0, or None")
        if timeout is not None:
            self._deadline = time.monotonic() + timeout
        with self._lock:
            self._closed = True  # the sender stops once the queue is empty
            self._wake.notify()
            self._space.notify_all()  # publishers waiting for room get ClientClosed
        self._sender.join(None if self._deadline is None else max(0.0, self._deadline - time.monotonic()))
        if self._sender.is_alive():
            with self._lock:
                queued = self._take_all()
            self._abandon(queued)

    def _take_all(self) -> list[_Item]:
        """Everything queued, in order, taken off the queue (the caller holds the lock)."""
        items = list(self._queued)
        self._queued.clear()
        self._calls = self._messages = self._bytes = self._markers = 0
        if self._blocked:
            self._space.notify_all()
        return items

    def _abandon(self, batch: list[_Item]) -> None:
        count = sum(len(item.payloads) for item in batch)
        with self._stats_lock:
            self.stats.abandoned += count
        self._finish(batch, error=PublisherClosed(f"{count} queued messages not sent: close()'s deadline passed"))

    def _past_deadline(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    # -- the sender thread --------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            items = self._take()
            if not items:
                return  # closed, and nothing left to send
            for topic_items in _by_topic([i for i in items if i.payloads]):
                for batch in self._split(topic_items):
                    try:
                        self._send(batch)
                    except Exception as exc:  # never leave a future hanging
                        log.exception("background publisher: unexpected error")
                        self._finish(batch, error=exc)
            for marker in (i for i in items if not i.payloads):
                marker.future.resolve(True)  # a flush marker: everything before it is done

    def _take(self) -> list[_Item]:
        """Everything queued once there is something (empty: closed and nothing queued); less than a full
        batch waits for more first, until the oldest publish has waited ``linger_seconds``."""
        with self._lock:
            while not self._queued:
                if self._closed:
                    return []
                self._listening = True
                self._wake.wait()
                self._listening = False
            if self.linger_seconds > 0 and not self._full():
                deadline = self._since + self.linger_seconds  # what queued during a write has waited already
                self._lingering = True
                while not self._full() and (left := deadline - time.monotonic()) > 0:
                    self._wake.wait(left)
                self._lingering = False
            return self._take_all()

    def _split(self, items: list[_Item]) -> list[list[_Item]]:
        """Consecutive runs with the same per-message TTL, cut at the batch limits."""
        batches: list[list[_Item]] = []
        count = size = 0
        for item in items:
            fits = count + len(item.payloads) <= self.max_batch_messages and size + item.size <= self.max_batch_bytes
            if not batches or not fits or batches[-1][0].ttl != item.ttl:
                batches.append([])
                count = size = 0
            batches[-1].append(item)
            count += len(item.payloads)
            size += item.size
        return batches

    def _send(self, batch: list[_Item]) -> None:
        topic, ttl = batch[0].topic, batch[0].ttl
        payloads = [p for item in batch for p in item.payloads]
        resume: PublishOutcomeUnknown | None = None
        error: TmsError | None = None
        failures = 0
        while True:
            if self._past_deadline():  # close()'s deadline: no (further) attempt
                if error is None:
                    self._abandon(batch)
                    return
                break
            try:
                result = self.client.publish(topic, payloads, ttl_seconds=ttl, resume=resume)
            except PublishOutcomeUnknown as exc:
                resume, error = exc, exc
            except HBaseError as exc:  # unreachable (retried), or a refusal (given up at once)
                error = exc
            except TmsError as exc:  # bad input: retrying cannot help
                self._finish(batch, error=exc)
                return
            else:
                self.stats.published += len(payloads)
                self.stats.batches += 1
                self._finish(batch, result=result)
                return
            failures += 1
            if not self.retry.pause(error, failures, what=f"publish to {topic}", deadline=self._deadline):
                break
            self.stats.retries += 1
        log.error("publish to %s gave up (not retriable, retries ran out or close() deadline passed): %s", topic, error)
        if self.on_give_up == "drop":
            self.stats.dropped_failed += len(payloads)
            for item in batch:
                item.future.resolve(None)
        else:
            self._finish(batch, error=error)

    def _finish(
        self, batch: list[_Item], error: BaseException | None = None, result: PublishResult | None = None
    ) -> None:
        """Resolve the futures of a batch: each with its own part of ``result``, or with ``error``."""
        first = 0
        for item in batch:
            if error is None:
                item.future.resolve(None if result is None else result.part(first, len(item.payloads)))
                first += len(item.payloads)
            else:
                with self._stats_lock:
                    self.stats.failed += len(item.payloads)
                item.future.resolve(error=error)


def _by_topic(items: list[_Item]) -> list[list[_Item]]:
    groups: dict[TopicId, list[_Item]] = {}
    for item in items:
        groups.setdefault(item.topic, []).append(item)
    return list(groups.values())
