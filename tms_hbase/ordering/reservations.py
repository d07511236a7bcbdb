"""Offsets for one writer's publishes to sequencer generations: one increment per queue, and blocks.

* **One increment per queue.** Publishes of one writer to one generation queue up; the thread that finds
  nobody reserving reserves for the whole queue (a round) by the total span, hands each publish its
  offsets, and passes the lead to the first publish that queued meanwhile. So k threads publishing at
  once cost about one increment per round instead of k.
* **Blocks.** While a writer is busy (a round begins within ``IDLE_SECONDS`` of the previous publish's
  end), its increment reserves a block of ``k`` rounds' worth of offsets, ``k`` chosen from the
  writer's recent round rate so that a block lasts about ``BLOCK_SECONDS`` (at most ``MAX_ROUNDS``, and
  at most ``MAX_BLOCK_OFFSETS`` offsets: readers fill a killed writer's block one offset at a time).
  While the writer is **alone** on the generation (its increments continue each other: nobody else
  reserved in between, or gave back) nobody's rows wait behind its block, so a pause does not make it
  idle: its rate is kept across pauses, its block is sized for ``LONE_BLOCK_SECONDS`` of publishing
  (well inside the W/2 for which a block may be carved) and kept until it is too old to carve, so a
  writer publishing one message every few milliseconds pays one conditional put per publish and no
  increment on the way. Being alone only sizes and keeps blocks; every rule that keeps order and
  exactly-once is the same for it. A writer that joins has its rows wait behind the lone writer's block
  for at most W/2 plus the keeper's period, once: the lone writer's next increment sees it and goes back
  to blocks released when it is idle.
  The next rounds carve their offsets off the front of the block with no increment. A block is carved
  only while younger than half the window W (W counts from the monotonic time taken before its
  increment, like any reservation; a carved publish is dated when it is carved, so never before its
  call); its unused remainder is released with ONE skip marker of this
  writer over exactly that span once the writer is idle, once the block is too old, when a round does
  not fit in it, and on close. So readers wait on it for milliseconds at most, and never longer than W/2
  plus the keeper's period.
* **The next block ahead.** Once a busy queue has carved half of its block, the keeper thread reserves
  the next block (same size, its clock read and ``started`` taken before its increment, like any
  reservation) while the publishes go on. So a lone busy writer's publishes wait for one conditional put
  each and never for an increment: the increment's round trip overlaps the puts. A round that finds its
  block used up (or too old) while that increment is in flight waits for it (at most W) rather than sending
  a second one. The block ahead is carved only after the current one, is released like a block (one skip
  marker; one for both when they are contiguous), and is subject to the same W/2 age.
* **A writer's own rows stay in offset order.** Offsets are handed out in the order of the rounds, each
  above the last one handed out (``handed_to``): a publish begun after another was acknowledged is stored
  after it. A block at or below that offset is never carved but released: the keeper's block ahead whose
  increment returned before the one of a round that gave up waiting for it (a starved keeper) lies below
  that round's offsets.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tms_hbase.errors import HBaseError, TmsError
from tms_hbase.model.clock import now_ms
from tms_hbase.model.topic import TopicId
from tms_hbase.ordering import sequencer
from tms_hbase.runtime import green
from tms_hbase.storage.hbase import Table

log = logging.getLogger(__name__)

IDLE_SECONDS = 0.005  # a round beginning within this of the previous publish's end: the writer is busy
BLOCK_SECONDS = 0.01  # a block should be used up within this much publishing
# ... or this much while alone: well inside the W/2 a block may be carved (0.25 s at most), so that the block
# reserved ahead once half of it is carved is used up before it is too old
LONE_BLOCK_SECONDS = 0.1
MAX_ROUNDS = 64  # a block holds at most this many rounds' offsets
MAX_BLOCK_OFFSETS = 1024  # and at most this many offsets: a killed writer's block is filled by readers one by one


@dataclass
class Ticket:
    """Offsets for one publish: ``first`` and ``span``, the publish time read before they were reserved,
    and ``started`` (time.monotonic() before the clock was read and the increment sent: W counts from it)."""

    span: int
    done: green.Event | None = None  # set when the lead handed it offsets (made only if it had to wait)
    first: int = 0
    publish_time: int = 0
    started: float = 0.0
    error: HBaseError | None = None
    lead: bool = False  # woken to reserve for the queue
    queue: _Queue | None = None  # the queue it took its offsets from (for :meth:`Reservations.published`)


@dataclass
class Block:
    """Offsets reserved ahead and not handed out yet: ``span`` offsets from ``first``, with the clock
    read and the monotonic time taken before their increment (every publish carved from it shares them),
    and ``until``, the monotonic time after which it is too old to carve (``started`` + W/2)."""

    first: int
    span: int
    publish_time: int
    started: float
    until: float = 0.0


@dataclass
class _Queue:
    lock: green.Lock = field(default_factory=green.lock)
    waiting: list[Ticket] = field(default_factory=list)
    busy: bool = False  # a thread is reserving for the queue
    block: Block | None = None
    ahead: Block | None = None  # the next block, reserved while ``block`` was being carved
    reserving_ahead: int = 0  # offsets the keeper is reserving for ``ahead`` (0: nothing in flight)
    ahead_done: green.Condition = field(init=False)  # notified when that reservation ended
    writing: int = 0  # publishes holding offsets and not yet ended
    last_end: float = -1.0  # time.monotonic() when the last publish of this queue ended
    last_round: float = -1.0  # time.monotonic() when the last round began
    interval: float | None = None  # recent seconds between busy rounds (None: not busy)
    reserved_to: int = 0  # the last offset this queue's latest increment reserved
    handed_to: int = 0  # the last offset handed out to a publish: no block at or below it is carved
    lone: bool = False  # that increment continued the one before it: no other writer reserved in between

    def __post_init__(self) -> None:
        self.ahead_done = green.condition(self.lock)


class Reservations:
    """Hands out offsets of sequencer generations to one writer's publishes (thread-safe)."""

    def __init__(
        self, messages: Table, writer_id: bytes, window: Callable[[], float], clock: Callable[[], int] = now_ms
    ) -> None:
        self.messages = messages
        self.clock = clock  # ms: what publishes are dated with
        self.writer_id = writer_id
        self.window = window  # W in seconds, now
        self._queues: dict[tuple[TopicId, int], _Queue] = {}
        self._lock = green.lock()
        self._last_time = 0  # publish times handed out never go back
        self._keeper: green.Joinable | None = None
        self._closed = green.event()
        self._wake = green.event()  # the keeper has a block ahead to reserve (or must stop)
        self._wanted: list[tuple[TopicId, int, _Queue]] = []  # queues whose next block the keeper reserves
        # rounds reserved, rounds carved, remainders released (skip markers) and given back, blocks reserved ahead
        self.increments = self.carved = self.released = self.given_back = self.ahead = 0

    def take(self, topic: TopicId, generation: int, ticket: Ticket) -> None:
        """Fill in the ticket's offsets: from the queue's round (carved off the block, or one increment);
        raises the HBaseError of a failed increment (nothing written; HBaseUnavailable: the caller may try again).

        A publish that finds nobody reserving leads a round of itself at once, in one turn of the queue's
        lock (nobody waits while the queue is not busy: the lead hands over or clears ``busy`` under it)."""
        queue = ticket.queue = self._queue(topic, generation)
        with queue.lock:
            if queue.busy:
                queue.waiting.append(ticket)
                done = ticket.done = green.event()
            else:
                queue.busy = True
                round_ = [ticket]
                piece, stale, rounds = self._plan(topic, generation, queue, round_)
                done = None
        if done is not None:
            done.wait()
            if not ticket.lead:
                if ticket.error is not None:
                    raise ticket.error
                return
            with queue.lock:
                round_, queue.waiting = queue.waiting, []
                piece, stale, rounds = self._plan(topic, generation, queue, round_)
        try:
            for block in stale:  # too old to carve, or the round does not fit: release what is left
                self._release(topic, generation, queue, block)
            if piece is None:
                self._reserve(topic, generation, queue, round_, rounds)
            else:
                self.carved += 1
                # dated when carved, not when the block was reserved: a publish is never dated before its call
                # (which makes D = W + W/2 + E: docs/ordering.md, "Blocks")
                self._hand_out(round_, piece.first, self._clock(), piece.started)
        finally:
            with queue.lock:  # hand the lead to the first publish that queued meanwhile
                if queue.waiting:  # queued while this round was reserved, so it has its event and waits on it
                    following = queue.waiting[0]
                    following.lead = True
                    if following.done is not None:
                        following.done.set()
                else:
                    queue.busy = False
                if ticket.error is None:  # (a failed increment fails the whole round)
                    queue.writing += len(round_)
            for waiting in round_:
                if waiting.done is not None:
                    waiting.lead = False
                    waiting.done.set()
        if ticket.error is not None:
            raise ticket.error

    def published(self, ticket: Ticket) -> None:
        """A publish that got offsets (``ticket``, filled in by :meth:`take`) ended (idleness is measured
        from here)."""
        queue = ticket.queue
        assert queue is not None
        with queue.lock:
            queue.last_end = time.monotonic()
            queue.writing -= 1

    def close(self) -> None:
        """Release every block's remainder and stop the keeper."""
        self._closed.set()
        self._wake.set()
        if self._keeper is not None:
            self._keeper.join(5)
        self._release_idle(force=True)

    # -- inside -----------------------------------------------------------------------------------

    def _queue(self, topic: TopicId, generation: int) -> _Queue:
        queue = self._queues.get((topic, generation))  # a dict read is atomic: no lock on the hot path
        if queue is None:
            with self._lock:
                queue = self._queues.setdefault((topic, generation), _Queue())
        return queue

    def _clock(self) -> int:
        now = self.clock()  # (may read HBase's clock: not under the lock)
        with self._lock:
            self._last_time = max(now, self._last_time)
            return self._last_time

    def _plan(
        self, topic: TopicId, generation: int, queue: _Queue, round_: list[Ticket]
    ) -> tuple[Block | None, list[Block], int]:
        """Under the queue's lock, for the round a lead took: its offsets carved off the block (None: an
        increment is needed), the blocks to release first, and how many rounds' offsets that increment
        reserves; asks for the next block ahead once half of the block is carved."""
        span = round_[0].span if len(round_) == 1 else sum(t.span for t in round_)
        now = time.monotonic()
        rounds = max(1, min(self._rounds_ahead(queue, now), MAX_BLOCK_OFFSETS // span))
        if queue.reserving_ahead:
            self._await_ahead(queue, span, now)
            now = time.monotonic()  # (it may have waited: a block's age is judged after)
        piece, stale = self._carve(queue, span, now)
        if piece is not None and rounds > 1 and queue.ahead is None and not queue.reserving_ahead:
            self._maybe_reserve_ahead(topic, generation, queue, span * rounds)  # (nothing ahead yet)
        return piece, stale, rounds

    @staticmethod
    def _rounds_ahead(queue: _Queue, now: float) -> int:
        """How many rounds' offsets the next increment of the queue reserves (under its lock; ``now``:
        time.monotonic()): 1 when the writer is idle and not alone, else enough for about BLOCK_SECONDS
        (LONE_BLOCK_SECONDS alone) at its recent round rate, pauses included (MAX_ROUNDS at most)."""
        gap, queue.last_round = now - queue.last_round, now
        if not queue.lone and not queue.writing and now - queue.last_end >= IDLE_SECONDS:
            queue.interval = None
            return 1
        queue.interval = gap if queue.interval is None else (queue.interval + gap) / 2
        budget = LONE_BLOCK_SECONDS if queue.lone else BLOCK_SECONDS
        return max(1, min(MAX_ROUNDS, int(budget / max(queue.interval, 1e-6))))

    @staticmethod
    def _reserved(queue: _Queue, first: int, span: int) -> None:
        """Under the queue's lock: note an increment's offsets; contiguous with the queue's previous
        ones means no other writer reserved in between (the writer is alone on the generation)."""
        queue.lone = first == queue.reserved_to + 1
        queue.reserved_to = max(queue.reserved_to, first + span - 1)

    def _await_ahead(self, queue: _Queue, span: int, now: float) -> None:
        """Under the queue's lock, while the next block is being reserved (the caller checks): when its
        block cannot serve a round of ``span`` (used up, too small or too old), wait for that increment
        (at most W) instead of sending another one."""
        block = queue.block
        if block is None or block.span < span or _spent(queue, block, now):
            deadline = time.monotonic() + self.window()
            while queue.reserving_ahead and (left := deadline - time.monotonic()) > 0:
                queue.ahead_done.wait(left)

    @staticmethod
    def _carve(queue: _Queue, span: int, now: float) -> tuple[Block | None, list[Block]]:
        """Under the queue's lock (``now``: time.monotonic()): ``span`` offsets off the front of its block
        (the block ahead once the block is gone), or None; and the blocks to release, spent or too small
        for the round. What is left of a block stays the queue's (shortened in place)."""
        stale: list[Block] = []
        while True:
            block = queue.block or queue.ahead  # the block ahead only once the block is gone
            if block is None:
                return None, stale
            if queue.block is None:
                queue.ahead = None
            queue.block = None
            if _spent(queue, block, now) or block.span < span:
                stale.append(block)
                continue
            piece = Block(block.first, span, block.publish_time, block.started)
            queue.handed_to = block.first + span - 1
            if block.span > span:
                block.first += span
                block.span -= span
                queue.block = block
            return piece, stale

    def _maybe_reserve_ahead(self, topic: TopicId, generation: int, queue: _Queue, span: int) -> None:
        """Under the queue's lock, after a carve, with no block ahead nor one being reserved (the caller
        checks): once at most half a block of ``span`` offsets is left, ask the keeper to reserve the next
        block of ``span`` offsets."""
        left = 0 if queue.block is None else queue.block.span
        if 2 * left > span or self._closed.is_set():
            return
        queue.reserving_ahead = span
        with self._lock:
            self._wanted.append((topic, generation, queue))
        self._start_keeper()
        self._wake.set()

    def _reserve_ahead(self, topic: TopicId, generation: int, queue: _Queue) -> None:
        """The keeper: one increment for the queue's next block; a failure only means the next round
        reserves for itself (a lost answer's offsets are a hole readers fill)."""
        with queue.lock:
            span = queue.reserving_ahead
        started = time.monotonic()
        publish_time = self._clock()
        block = None
        try:
            max_age = self.window() / 2
            first = sequencer.reserve(self.messages, topic, generation, span)
            block = Block(first, span, publish_time, started, started + max_age)
            self.ahead += 1
        except HBaseError as exc:
            log.info("could not reserve offsets ahead for %s: %s", topic, exc)
        with queue.lock:
            queue.reserving_ahead = 0
            queue.ahead_done.notify_all()
            if block is not None:
                self._reserved(queue, block.first, block.span)
            # (a round that gave up waiting for it reserved for itself meanwhile: then it lies below
            # offsets handed out, is spent, and is released at once)
            if block is not None and queue.ahead is None and not _spent(queue, block, time.monotonic()):
                queue.ahead, block = block, None
        if block is not None:
            self._release(topic, generation, queue, block)
        if self._closed.is_set():  # closed meanwhile: release it now (with the block's rest if contiguous)
            self._release_idle(force=True)

    def _reserve(
        self,
        topic: TopicId,
        generation: int,
        queue: _Queue,
        round_: list[Ticket],
        rounds: int,
    ) -> None:
        """One increment for the round and, when ``rounds`` > 1, a block of the next rounds' offsets."""
        span = sum(t.span for t in round_)
        started = time.monotonic()
        publish_time = self._clock()
        try:
            max_age = self.window() / 2  # it may read the setting from HBase
            first = sequencer.reserve(self.messages, topic, generation, span * rounds)
        except HBaseError as exc:
            for waiting in round_:
                waiting.error = exc
            return
        self.increments += 1
        self._hand_out(round_, first, publish_time, started)
        with queue.lock:
            self._reserved(queue, first, span * rounds)
            queue.handed_to = max(queue.handed_to, first + span - 1)
        if rounds == 1:
            return
        block = Block(first + span, span * (rounds - 1), publish_time, started, started + max_age)
        with queue.lock:
            closed = self._closed.is_set()
            if not closed:
                queue.block = block  # only the lead carves, and it took the old block: none is there
        if closed:
            self._release(topic, generation, queue, block)
            return
        self._start_keeper()

    def _start_keeper(self) -> None:
        with self._lock:
            if self._keeper is None:
                self._keeper = green.start_thread(self._keep, "tms-block-keeper")

    @staticmethod
    def _hand_out(round_: list[Ticket], first: int, publish_time: int, started: float) -> None:
        """Consecutive offsets from ``first`` to the round's tickets, in order, all dated ``publish_time``
        and started at ``started``."""
        for waiting in round_:
            waiting.first, waiting.publish_time, waiting.started = first, publish_time, started
            first += waiting.span

    def _keep(self) -> None:
        """Reserve the blocks ahead that busy queues ask for, at once; release the blocks of idle queues
        and blocks too old to carve, every few milliseconds."""
        while not self._closed.is_set():
            self._wake.wait(IDLE_SECONDS)
            self._wake.clear()
            with self._lock:
                wanted, self._wanted = self._wanted, []
            for topic, generation, queue in wanted:
                self._reserve_ahead(topic, generation, queue)
            self._release_idle()
        with self._lock:
            wanted, self._wanted = self._wanted, []
        for _, _, queue in wanted:  # closed before the keeper got to them: nothing is reserved
            with queue.lock:
                queue.reserving_ahead = 0
                queue.ahead_done.notify_all()

    def _release_idle(self, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            queues = list(self._queues.items())
        for (topic, generation), queue in queues:
            with queue.lock:
                blocks = [b for b in (queue.block, queue.ahead) if b is not None]
                if not blocks:
                    continue
                # a lone writer's block holds nobody's rows up: it is kept through pauses until too old
                idle = not queue.lone and not queue.busy and not queue.writing and now - queue.last_end >= IDLE_SECONDS
                if not (force or idle):
                    if not any(_spent(queue, b, now) for b in blocks):
                        continue
                    block = queue.block
                    if queue.busy or queue.writing or (block is not None and not _spent(queue, block, now)):
                        # carving goes on (or its block still serves): release only what cannot be carved
                        blocks = [b for b in blocks if _spent(queue, b, now)]
                    # else a lone writer paused past its block's age: the block ahead goes with it, so that
                    # both are given back to the counter at once rather than the older one filled with a skip
                    # marker because the block ahead sits after it
                if any(b is queue.block for b in blocks):
                    queue.block = None
                if any(b is queue.ahead for b in blocks):
                    queue.ahead = None
            for block in _joined(blocks):
                self._release(topic, generation, queue, block)

    def _release(self, topic: TopicId, generation: int, queue: _Queue, block: Block) -> None:
        """Give a block's unused offsets back to the counter when nobody reserved after them (so they
        never exist for readers, counts or lag, and the queue's next increment continuing before them
        still finds the writer alone); else fill them with ONE skip marker of this writer over
        exactly their span (if-absent: a reader that filled the first of them already is as good), which
        the skip index records before the marker is put (:func:`.sequencer.release`). A lost answer to the give-back
        leaves them as a hole that readers fill."""
        try:
            if sequencer.give_back(self.messages, topic, generation, block.first, block.span):
                self.given_back += 1
                with queue.lock:
                    if queue.reserved_to == block.first + block.span - 1:
                        queue.reserved_to = block.first - 1
                return
            sequencer.release(
                self.messages, topic, generation, block.first, block.span, block.publish_time, self.writer_id
            )
            self.released += 1
        except TmsError as exc:  # readers fill it after H
            log.info("could not release offsets %d+%d of %s: %s", block.first, block.span, topic, exc)


def _spent(queue: _Queue, block: Block, now: float) -> bool:
    """Under the queue's lock (``now``: time.monotonic()): the block may no longer be carved, because it is
    too old, or because it lies at or below an offset already handed out to one of the queue's publishes
    (a block ahead whose increment came before a round's own: carved after that round, a later publish
    would be stored before an earlier one)."""
    return now >= block.until or block.first <= queue.handed_to


def _joined(blocks: list[Block]) -> list[Block]:
    """A block and the block ahead as one when their offsets are contiguous (one skip marker for both)."""
    if len(blocks) == 2 and blocks[0].first + blocks[0].span == blocks[1].first:
        first, second = blocks
        return [Block(first.first, first.span + second.span, first.publish_time, first.started, first.until)]
    return blocks
