"""Offsets for one writer's publishes to sequencer generations: one increment per queue, and a spare.

* **One increment per queue.** Publishes of one writer to one generation queue up; the thread that finds
  nobody reserving reserves for the whole queue with one increment by the total span, hands each
  publish its offsets, and passes the lead to the first publish that queued meanwhile. So k threads
  publishing at once cost about one increment per round instead of k.
* **The pipelined spare.** While a writer is busy (a publish begins within ``IDLE_SECONDS`` of the
  previous one's end), a background thread reserves the next round's offsets while the current batch is
  written; a round of the same span takes the spare instead of an increment (waiting for it if its
  increment is still on its way). A spare is used only while
  younger than half the window W (it counts W from when it was reserved, like any reservation), and
  is released (filled with this writer's skip marker over its span) once the writer is idle, once it is
  too old to use, or when the writer closes, so readers wait on it for milliseconds at most.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from . import sequencer
from .clock import now_ms
from .errors import HBaseUnavailable
from .storage import Table
from .topic import TopicId

log = logging.getLogger(__name__)

IDLE_SECONDS = 0.005  # a publish beginning within this of the previous one's end: the writer is busy


@dataclass
class Ticket:
    """Offsets for one publish: ``first`` and ``span``, the publish time read before they were reserved,
    and ``started`` (time.monotonic() before the clock was read and the increment sent: W counts from it)."""

    span: int
    done: threading.Event = field(default_factory=threading.Event)
    first: int = 0
    publish_time: int = 0
    started: float = 0.0
    error: HBaseUnavailable | None = None
    lead: bool = False  # woken to reserve for the queue


@dataclass
class _Queue:
    lock: threading.Lock = field(default_factory=threading.Lock)
    waiting: list[Ticket] = field(default_factory=list)
    busy: bool = False  # a thread is reserving for the queue
    spare: Ticket | None = None
    spare_pending: bool = False  # a spare is being reserved in the background
    spare_ready: threading.Event = field(default_factory=threading.Event)  # set when no spare is pending
    writing: int = 0  # publishes holding offsets and not yet ended
    rounds: int = 0  # rounds taken so far (a spare is only for the round after the one that asked for it)
    last_end: float = -1.0  # time.monotonic() when the last publish of this queue ended


class Reservations:
    """Hands out offsets of sequencer generations to one writer's publishes (thread-safe)."""

    def __init__(self, messages: Table, writer_id: bytes, window: Callable[[], float]) -> None:
        self.messages = messages
        self.writer_id = writer_id
        self.window = window  # W in seconds, now
        self._queues: dict[tuple[TopicId, int], _Queue] = {}
        self._lock = threading.Lock()
        self._last_time = 0  # publish times handed out never go back
        self._background: ThreadPoolExecutor | None = None
        self._keeper: threading.Thread | None = None
        self._closed = threading.Event()
        self.spares_used = self.spares_released = 0

    def take(self, topic: TopicId, generation: int, ticket: Ticket) -> None:
        """Fill in the ticket's offsets: from the queue's round (one increment or the spare); raises the
        HBaseUnavailable of a failed increment (nothing written; the caller may try again)."""
        queue = self._queue(topic, generation)
        with queue.lock:
            queue.waiting.append(ticket)
            lead = not queue.busy
            queue.busy = True
        if not lead:
            ticket.done.wait()
            if not ticket.lead:
                if ticket.error is not None:
                    raise ticket.error
                return
        with queue.lock:
            round_, queue.waiting = queue.waiting, []
            span = sum(t.span for t in round_)
            pending = queue.spare is None and queue.spare_pending
        if pending:  # the next offsets are on their way: waiting for them is cheaper than an increment
            queue.spare_ready.wait(self.window() / 2)
        with queue.lock:
            spare, queue.spare = queue.spare, None
            busy = time.monotonic() - queue.last_end < IDLE_SECONDS
            queue.rounds += 1
            round_no = queue.rounds
        try:
            if spare is not None and (spare.span != span or time.monotonic() - spare.started >= self.window() / 2):
                self._release(topic, generation, spare)
                spare = None
            if spare is None:
                self._reserve(topic, generation, round_, span)
            else:
                self.spares_used += 1
                self._hand_out(round_, spare.first, spare.publish_time, spare.started)
            if busy and len(round_) == 1:  # a round of several publishes rarely repeats its span
                self._reserve_spare(topic, generation, queue, span, round_no)
        finally:
            with queue.lock:  # hand the lead to the first publish that queued meanwhile
                if queue.waiting:
                    queue.waiting[0].lead = True
                    queue.waiting[0].done.set()
                else:
                    queue.busy = False
                queue.writing += sum(1 for waiting in round_ if waiting.error is None)
            for waiting in round_:
                waiting.lead = False
                waiting.done.set()
        if ticket.error is not None:
            raise ticket.error

    def published(self, topic: TopicId, generation: int) -> None:
        """A publish of this queue that got offsets ended (the spare keeper measures idleness from here)."""
        queue = self._queue(topic, generation)
        with queue.lock:
            queue.last_end = time.monotonic()
            queue.writing -= 1

    def close(self) -> None:
        """Release every spare and stop the background threads."""
        self._closed.set()
        if self._keeper is not None:
            self._keeper.join(5)
        self._release_idle(force=True)
        if self._background is not None:
            self._background.shutdown(wait=True)

    # -- inside -----------------------------------------------------------------------------------

    def _queue(self, topic: TopicId, generation: int) -> _Queue:
        with self._lock:
            return self._queues.setdefault((topic, generation), _Queue())

    def _clock(self) -> int:
        with self._lock:
            self._last_time = max(now_ms(), self._last_time)
            return self._last_time

    def _reserve(self, topic: TopicId, generation: int, round_: list[Ticket], span: int) -> None:
        started = time.monotonic()
        publish_time = self._clock()
        try:
            first = sequencer.reserve(self.messages, topic, generation, span)
        except HBaseUnavailable as exc:
            for waiting in round_:
                waiting.error = exc
            return
        self._hand_out(round_, first, publish_time, started)

    @staticmethod
    def _hand_out(round_: list[Ticket], first: int, publish_time: int, started: float) -> None:
        for waiting in round_:
            waiting.first, waiting.publish_time, waiting.started = first, publish_time, started
            first += waiting.span

    def _reserve_spare(self, topic: TopicId, generation: int, queue: _Queue, span: int, round_no: int) -> None:
        with queue.lock:
            if queue.spare is not None or queue.spare_pending or self._closed.is_set():
                return
            queue.spare_pending = True
            queue.spare_ready.clear()
        with self._lock:
            if self._background is None:
                self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tms-spare")
                self._keeper = threading.Thread(target=self._keep, name="tms-spare-keeper", daemon=True)
                self._keeper.start()
        self._background.submit(self._spare_job, topic, generation, queue, span, round_no)

    def _spare_job(self, topic: TopicId, generation: int, queue: _Queue, span: int, round_no: int) -> None:
        """Reserve a spare for the round after ``round_no``; if that round began meanwhile (it took an
        increment of its own), the spare would sit below its rows and hold readers: release it at once."""
        spare = Ticket(span)
        kept = False
        try:
            self._reserve(topic, generation, [spare], span)
        finally:
            with queue.lock:
                queue.spare_pending = False
                wanted = queue.spare is None and queue.rounds == round_no and not self._closed.is_set()
                if spare.error is None and wanted:
                    queue.spare, kept = spare, True
            queue.spare_ready.set()
        if not kept and spare.error is None:  # not wanted any more
            self._release(topic, generation, spare)

    def _keep(self) -> None:
        """Release spares of idle queues and spares too old to use, every few milliseconds."""
        while not self._closed.wait(IDLE_SECONDS):
            self._release_idle()

    def _release_idle(self, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            queues = list(self._queues.items())
        for (topic, generation), queue in queues:
            with queue.lock:
                spare = queue.spare
                if spare is None:
                    continue
                idle = not queue.busy and not queue.writing and now - queue.last_end >= IDLE_SECONDS
                if not (force or idle or now - spare.started >= self.window() / 2):
                    continue
                queue.spare = None
            self._release(topic, generation, spare)

    def _release(self, topic: TopicId, generation: int, spare: Ticket) -> None:
        """Fill an unused spare with this writer's skip marker over its whole span (if-absent: a reader
        that filled its first offset already is as good)."""
        try:
            sequencer.fill(
                self.messages, topic, generation, spare.first, spare.span, spare.publish_time, self.writer_id
            )
            self.spares_released += 1
        except HBaseUnavailable as exc:  # readers fill it after H
            log.info("could not release offsets %d+%d of %s: %s", spare.first, spare.span, topic, exc)
