"""Non-transactional publishing without waiting, from a thread: a bounded queue drained by one background
sender thread that batches, retries with backoff, and resolves a future per publish (docs/design.md,
requirement 5). It is a thread, not asyncio: the caller's thread never waits on HBase."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
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
from tms_hbase.model.checks import validate_payloads
from tms_hbase.model.published import PublishResult
from tms_hbase.model.record import Record
from tms_hbase.model.retry import Retry
from tms_hbase.model.rows import batch_size
from tms_hbase.model.stats import PublisherStats
from tms_hbase.model.topic import TopicId, TopicLike, as_topic
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


@dataclass
class _Item:
    topic: TopicId
    payloads: tuple[bytes | Record, ...]
    ttl: float | None
    future: Future = field(default_factory=Future)


class BackgroundPublisher:
    """A background thread that pipelines publishes: ``publish`` returns at once with a
    :class:`concurrent.futures.Future`.

    Publish without waiting: ``publish`` returns a Future that becomes the
    :class:`~tms_hbase.model.published.PublishResult` of its messages once they are stored (several
    publishes may share one batch row: each result names its own messages' ids).

    * ``max_queue`` publish calls may wait; when full, ``on_full`` decides: ``"raise"`` QueueFull,
      ``"drop"`` (the future is already done with None, counted), or ``"block"`` up to
      ``block_timeout_seconds``.
    * The sender takes what is queued (waiting up to ``linger_seconds`` for more) and writes each
      topic's messages as batch rows of at most ``max_batch_messages`` / ``max_batch_bytes``.
    * A batch that failed with an error worth retrying (HBase unreachable or too slow, its answer
      lost) is retried as the ``retry`` policy says (default: 6 attempts, exponential backoff with
      jitter), exactly once (an interrupted write is resumed, never repeated). A refusal from HBase is
      not retried: it would be refused again. Then ``on_give_up`` decides: ``"raise"`` (the futures
      get the error) or ``"drop"`` (they get None, counted).
    * Bad input (unknown topic, empty or oversize batch) fails that publish's future at once.

    Messages of one topic are stored in the order they were queued. Use as a context manager, or
    call :meth:`close`, which sends what is queued first, for at most ``timeout`` seconds
    (:data:`DEFAULT_CLOSE_TIMEOUT` by default; the context manager uses that default).
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
        self.max_batch_messages, self.max_batch_bytes = max_batch_messages, max_batch_bytes
        self.linger_seconds = linger_seconds
        self.stats = PublisherStats()
        self._stats_lock = green.no_wait_lock()  # the sender and close() both count failures
        self._queue: queue.Queue[_Item | None] = queue.Queue(max_queue)
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
        batch = validate_payloads(tracing.created(str(topic), payloads), self.client.max_batch_bytes, allow_empty=False)
        item = _Item(topic, batch, ttl_seconds)
        try:
            if self.on_full == "block":
                self._queue.put(item, timeout=self.block_timeout_seconds)
            else:
                self._queue.put_nowait(item)
        except queue.Full:
            if self.on_full == "drop":
                self.stats.dropped_full += len(batch)
                item.future.set_result(None)
                return item.future
            raise QueueFull(f"background publisher queue is full ({self._queue.maxsize} publishes waiting)") from None
        return item.future

    def flush(self, timeout: float | None = None) -> None:
        """Wait until everything queued so far is stored or given up."""
        marker = _Item(TopicId("_", "_"), (), None)
        self._queue.put(marker, timeout=timeout)
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
        self._closed = True
        if timeout is not None:
            self._deadline = time.monotonic() + timeout
        with contextlib.suppress(queue.Full):  # the sender is stuck on a batch; the queue is emptied below
            self._queue.put(None, timeout=timeout)
        self._sender.join(None if self._deadline is None else max(0.0, self._deadline - time.monotonic()))
        if self._sender.is_alive():
            self._abandon_queued()

    def _abandon_queued(self) -> None:
        """Fail everything still queued with PublisherClosed, and leave the sender its stop marker."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                try:
                    self._queue.put_nowait(None)
                    return
                except queue.Full:  # a publisher blocked in put() got in first: empty it again
                    continue
            if item is not None:
                self._abandon([item])

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
            stop = None in items
            real = [i for i in items if i is not None and i.payloads]
            for topic_items in _by_topic(real):
                for batch in self._split(topic_items):
                    try:
                        self._send(batch)
                    except Exception as exc:  # never leave a future hanging
                        log.exception("background publisher: unexpected error")
                        self._finish(batch, error=exc)
            for marker in (i for i in items if i is not None and not i.payloads):
                marker.future.set_result(True)  # a flush marker: everything before it is done
            if stop:
                return

    def _take(self) -> list[_Item | None]:
        items = [self._queue.get()]
        deadline = time.monotonic() + self.linger_seconds
        while items[-1] is not None and len(items) < self.max_batch_messages:
            wait = deadline - time.monotonic()
            try:
                items.append(self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait())
            except queue.Empty:
                break
        return items

    def _split(self, items: list[_Item]) -> list[list[_Item]]:
        """Consecutive runs with the same per-message TTL, cut at the batch limits."""
        batches: list[list[_Item]] = []
        count = size = 0
        for item in items:
            item_size = batch_size(item.payloads)
            fits = count + len(item.payloads) <= self.max_batch_messages and size + item_size <= self.max_batch_bytes
            if not batches or not fits or batches[-1][0].ttl != item.ttl:
                batches.append([])
                count = size = 0
            batches[-1].append(item)
            count += len(item.payloads)
            size += item_size
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
                item.future.set_result(None)
        else:
            self._finish(batch, error=error)

    def _finish(
        self, batch: list[_Item], error: BaseException | None = None, result: PublishResult | None = None
    ) -> None:
        """Resolve the futures of a batch: each with its own part of ``result``, or with ``error``."""
        first = 0
        for item in batch:
            if error is None:
                item.future.set_result(None if result is None else result.part(first, len(item.payloads)))
                first += len(item.payloads)
            else:
                with self._stats_lock:
                    self.stats.failed += len(item.payloads)
                item.future.set_exception(error)


def _by_topic(items: list[_Item]) -> list[list[_Item]]:
    groups: dict[TopicId, list[_Item]] = {}
    for item in items:
        groups.setdefault(item.topic, []).append(item)
    return list(groups.values())
