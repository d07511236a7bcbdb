"""Natural batching of the asyncio clients' publishes to one topic, the way the Kafka producer's accumulator and
nats.py's pending writes do it: while one write to a topic is in flight, further publishes to that topic queue
behind it and go together in the next write, one batch row (one conditional put, or one gateway request) for
all of them.

Only non-transactional publishes are put together, and only where a shared row is safe. Direct over HBase,
that is a **sequencer** topic: there each publish's messages are a part of the shared row (its own message
ids, :meth:`~tms_hbase.model.published.PublishResult.part`) and an interrupted shared write resumes per
publish (:meth:`~tms_hbase.ordering.appends.Resume.part`); publishes to a chain topic are written one by
one. Through the gateway (which keeps the retry state itself) every topic takes shared rows.

* Each caller's ``await`` returns once the row holding its messages is stored; a group's failure is every
  member's failure (PublishOutcomeUnknown: each member its own, ``split_unknown``), never some of them.
  A group the writer refuses as a whole (``GroupOutcome(shared=True, result=None)``) is written again in
  halves, and so on, so that the refusal reaches only the publish it concerns and the others still share rows.
* Publishes leave the queue in the order they entered it: a caller's own publishes stay in its call order.
* A group is cut at the batch byte limit, at :data:`MAX_GROUP_MESSAGES` and where the per-message TTL changes.
* Cancelled while queued, a publish leaves the queue: not stored. Cancelled once its group is being written,
  it runs on to the group's outcome (logged), and the client's ``close()`` waits for it; with ``abandon``, a
  write whose callers were all cancelled is cut short instead (the gateway's client).
* A group's deadline is the client's timeout from its earliest member's call: no caller waits longer than
  its own deadline for a write, its queueing included.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from tms_hbase.errors import PublishOutcomeUnknown
from tms_hbase.model.published import PublishResult
from tms_hbase.model.record import Record
from tms_hbase.model.rows import batch_size
from tms_hbase.model.topic import TopicId

log = logging.getLogger(__name__)

MAX_GROUP_MESSAGES = 512
"""Messages one coalesced write holds at most (besides the batch byte limit)."""

GroupWrite = Callable[
    [TopicId, Sequence[tuple["bytes | Record", ...]], "float | None", float], Awaitable["GroupOutcome"]
]
OneWrite = Callable[[TopicId, tuple["bytes | Record", ...], "float | None", float], Awaitable[PublishResult]]
SplitUnknown = Callable[[PublishOutcomeUnknown, int], PublishOutcomeUnknown]
"""The outcome, for the member whose messages start at the given index, of a shared write that was lost."""


@dataclass(frozen=True)
class GroupOutcome:
    """What a group write did: whether the topic takes shared rows, and the row stored for the group (None:
    nothing was written and each member goes on its own: a topic that takes no shared rows, or a group the
    writer refused as a whole)."""

    shared: bool
    result: PublishResult | None


@dataclass(eq=False, slots=True)
class _Member:
    payloads: tuple[bytes | Record, ...]
    ttl: float | None
    since: float  # time.monotonic() at the call: its deadline counts from here
    future: asyncio.Future[PublishResult]
    sent: bool = False  # taken into a group being written


@dataclass(eq=False)
class _Lane:
    queue: deque[_Member] = field(default_factory=deque)
    writing: asyncio.Task[None] | None = None
    sending: tuple[list[_Member], asyncio.Task[None]] | None = None  # the group being written, and its write
    shared: bool | None = None  # what the last group write found (None: not known yet)
    checked: float = 0.0  # when it found it


class PublishLanes:
    """One queue and at most one coalesced write in flight per topic; ``group`` writes a group (one row where
    the topic takes shared rows), ``one`` writes a single publish (the others), ``split_unknown`` gives each
    member of a lost shared write its own PublishOutcomeUnknown, ``recheck_seconds`` is how long a topic found
    to take no shared rows is written to directly before looking again (the metadata's age). ``abandon``: a
    write whose callers were all cancelled is cut short rather than run on, for a writer whose writes are
    stored whole or not at all however they end (the gateway's), so it holds up no publish queued behind it."""

    def __init__(
        self,
        group: GroupWrite,
        one: OneWrite,
        split_unknown: SplitUnknown,
        max_batch_bytes: int,
        recheck_seconds: float,
        *,
        abandon: bool = False,
    ) -> None:
        self._abandon = abandon
        self._group = group
        self._one = one
        self._split_unknown = split_unknown
        self._max_bytes = max_batch_bytes
        self._recheck = recheck_seconds
        self._lanes: dict[TopicId, _Lane] = {}

    def direct(self, topic: TopicId) -> bool:
        """Whether a publish to ``topic`` goes on its own: it was found to take no shared rows a moment ago."""
        lane = self._lanes.get(topic)
        return lane is not None and lane.shared is False and time.monotonic() - lane.checked < self._recheck

    async def publish(self, topic: TopicId, payloads: tuple[bytes | Record, ...], ttl: float | None) -> PublishResult:
        """Queue a checked, non-empty batch for ``topic`` and wait for the write that stores it."""
        lane = self._lanes.get(topic)
        if lane is None:
            lane = self._lanes[topic] = _Lane()
        loop = asyncio.get_running_loop()
        member = _Member(payloads, ttl, time.monotonic(), loop.create_future())
        lane.queue.append(member)
        if lane.writing is None:
            lane.writing = loop.create_task(self._drain(topic, lane), name=f"tms-publish {topic}")
        try:
            return await member.future
        except asyncio.CancelledError:
            if not member.sent:
                lane.queue.remove(member)
                log.info("cancelled publish to %s: not stored (it was waiting for the write before it)", topic)
            elif member.future.done() and not member.future.cancelled():  # cancelled as its outcome came
                _log_cancelled(topic, member.future.exception() or member.future.result())
            elif self._abandon and lane.sending is not None and member in lane.sending[0]:
                group, write = lane.sending
                if all(other.future.cancelled() for other in group):
                    write.cancel()
                    log.info("cancelled publishes to %s: their write is cut short (stored whole or not at all)", topic)
            raise

    async def wait_idle(self) -> None:
        """Wait until every queued and in-flight write has ended."""
        while writing := [lane.writing for lane in self._lanes.values() if lane.writing is not None]:
            await asyncio.wait(writing)

    async def _drain(self, topic: TopicId, lane: _Lane) -> None:
        loop = asyncio.get_running_loop()
        try:
            while lane.queue:
                group = self._take(lane.queue)
                write = loop.create_task(self._write(topic, lane, group))
                lane.sending = group, write
                try:
                    await asyncio.wait([write])  # (ends too when the write is abandoned: see publish)
                except BaseException as exc:  # never leave a caller hanging (e.g. the loop shutting down)
                    write.cancel()
                    for member in group:
                        _settle(topic, member, exc)
                    raise
                finally:
                    lane.sending = None
                if not write.cancelled() and (error := write.exception()) is not None:
                    for member in group:
                        _settle(topic, member, error)
                    raise error
        finally:
            lane.writing = None

    def _take(self, queue: deque[_Member]) -> list[_Member]:
        """The queue's first publishes with the first one's TTL, within the group limits (taken: sent)."""
        first = queue.popleft()
        group, count, size = [first], len(first.payloads), batch_size(first.payloads)
        while queue and queue[0].ttl == first.ttl:
            more = queue[0].payloads
            count, size = count + len(more), size + batch_size(more)
            if count > MAX_GROUP_MESSAGES or size > self._max_bytes:
                break
            group.append(queue.popleft())
        for member in group:
            member.sent = True
        return group

    async def _write(self, topic: TopicId, lane: _Lane, group: list[_Member]) -> None:
        since = min(member.since for member in group)
        try:
            outcome = await self._group(topic, [member.payloads for member in group], group[0].ttl, since)
        except PublishOutcomeUnknown as exc:
            first = 0
            for member in group:
                _settle(topic, member, self._split_unknown(exc, first) if len(group) > 1 else exc)
                first += len(member.payloads)
            return
        except Exception as exc:
            for member in group:
                _settle(topic, member, exc)
            return
        lane.shared, lane.checked = outcome.shared, time.monotonic()
        result = outcome.result
        if result is None and outcome.shared:  # refused as a whole: each half again, so only its publish fails
            half = len(group) // 2
            await self._write(topic, lane, group[:half])
            await self._write(topic, lane, group[half:])
            return
        if result is None:  # no shared row: each member on its own, in the group's order
            for member in group:
                await self._write_one(topic, member)
            return
        first = 0
        for member in group:
            _settle(topic, member, result.part(first, len(member.payloads)))
            first += len(member.payloads)

    async def _write_one(self, topic: TopicId, member: _Member) -> None:
        try:
            result = await self._one(topic, member.payloads, member.ttl, member.since)
        except Exception as exc:
            _settle(topic, member, exc)
        else:
            _settle(topic, member, result)


def _settle(topic: TopicId, member: _Member, outcome: PublishResult | BaseException) -> None:
    """Give a member its outcome; a member whose caller was cancelled gets it in the log."""
    future = member.future
    if future.cancelled():
        _log_cancelled(topic, outcome)
    elif future.done():
        return
    elif isinstance(outcome, asyncio.CancelledError):
        future.cancel()
    elif isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _log_cancelled(topic: TopicId, outcome: PublishResult | BaseException) -> None:
    """What a publish whose caller was cancelled once its write was sent came to."""
    if isinstance(outcome, BaseException):
        log.info("cancelled publish to %s ran on and failed: %s", topic, outcome)
    else:
        log.info("cancelled publish to %s ran on and was stored as %s", topic, outcome.message_ids)
