"""A consumer of a shared subscription: one of any number, in any processes, each message delivered
to one of them at a time (a work queue; docs/shared.md).

* **New messages.** A consumer reads one range of positions at a time (:mod:`.state`), taking it by
  compare-and-set. After a read it keeps the range (its progress written with a hold of KEEP_SECONDS) while
  the counter has ranges left for the others, so consumers read ranges of their own; once none is left
  it gives the range back with its progress after each read (so a batch row of many messages, which is
  one range's, is shared too). It goes on in the range it kept, or takes the range it read last if
  nobody took it since, or a range given back or whose reader's deadline passed, or one the counter
  handed out that nobody wrote down, else the next range from the counter's atomic increment, but only
  while that range starts at or below the topic's newest row. It reads the range with the reader's
  ``fetch`` (which never passes a hole), writes each message's claim cell if absent (holder, deadline,
  delivery 1), then moves the range cell's progress by compare-and-set, and only then delivers: a
  consumer that lost its range delivers nothing it claimed meanwhile (it gives those claims back at
  once). A range is read to its end once a message beyond it shows up.
* **Committed only.** The range reads judge transactional rows as an exclusive consumer does
  (``committed``, :mod:`~tms_hbase.isolation.committed`): rolled-back and invalid rows are skipped; a row still in
  progress stops its range's read there, so the rest of that range (at most ``claim_size`` positions) waits
  for the transaction to end while the other ranges go on: committed messages in other ranges are not
  held up behind it, and a message is never delivered before the ones in progress before it in its range.
* **The reaper.** Every consumer, every ``reap_interval`` and whenever it is idle, scans the claims of
  the ranges not done yet: a claim past its deadline (holder dead, hung, or slow) or released and due
  is delivered again, **before** new messages, by compare-and-set on its exact bytes with the delivery
  count raised; past ``max_deliveries`` it goes to the dead-letter topic instead. The scan also raises
  the floor over ranges read to their end whose messages are all settled, and clears their rows
  (:mod:`.clearing`: counted into the totals once, then deleted; a reap finishes a clearing cut short).
* **Scheduled.** A message whose delivery time (:mod:`~tms_hbase.model.schedule`) is ahead gets its claim
  written free from that time on, undelivered, outside key order: a reap delivers it once due. The floor
  passes one due far ahead once a schedule row leads reaps to it (:mod:`.schedule`).
* **Idle.** A consumer that finds nothing waits on its doorbell (:mod:`~tms_hbase.consume.doorbell`),
  whose address it writes into a cell of the subscription's state: publishers ring it, and so do other
  consumers that give a message back (or a range with more to read: they ring one idle consumer); it
  also wakes at the next deadline its last reap saw, and after ``poll_interval_seconds`` regardless (a
  ring is only a hint). A ring or a deadline makes it reap at once; a wake after
  ``poll_interval_seconds`` alone reaps only once ``reap_interval`` passed, and reads the topic's newest
  row again only once TAIL_SECONDS passed in the same ``receive``.
* **Settling.** ``ack``, ``nack(delay_seconds=)``, ``release`` and ``extend`` are each a compare-and-set on the
  claim as this consumer holds it, refused (:class:`~tms_hbase.errors.NotHeld`, nothing changed) once the
  deadline passed, another consumer holds it, or the subscription was reset or deleted.

Every deadline is HBase's clock (``clock``), never a host's. Not thread-safe: one thread per consumer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import socket
import time
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from tms_hbase import tracing
from tms_hbase.consume.doorbell import DEFAULT_HOST, Bell, parse_address, ring_local
from tms_hbase.consume.subscriptions import mark_before
from tms_hbase.errors import InvalidArgument, NotHeld, SubscriptionNotFound, TmsError, TopicFull, TopicNotFound
from tms_hbase.fetch.reader import MessageReader
from tms_hbase.installation.metadata import MetadataCache
from tms_hbase.isolation.committed import CommittedReads
from tms_hbase.model import checks
from tms_hbase.model.dead_letter import DeadLetter
from tms_hbase.model.message import Delivery, DeliveryRef, Message
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.record import Record
from tms_hbase.model.topic import TopicId
from tms_hbase.model.transaction import Transaction
from tms_hbase.shared.clearing import clear
from tms_hbase.shared.key_order import REAP_CLAIMS, WINDOW, KeyView, heads, view_of
from tms_hbase.shared.schedule import Schedule, parked
from tms_hbase.shared.state import (
    Claim,
    ClaimState,
    Keys,
    RangeCell,
    Settings,
    hold_ms,
    key_of,
    new_delivery,
    position_of_id,
)
from tms_hbase.shared.store import SCAN_LIMIT, SharedStore, StoredClaim, StoredRange
from tms_hbase.shared.tx_acks import TransactionalAcks

log = logging.getLogger(__name__)

_MAX_ROUNDS = 20  # increments in a row that all lost their range cell: something is badly wrong
BELL_SECONDS = 30.0  # an idle consumer's doorbell cell holds this long; renewed while it keeps waiting
AHEAD_MESSAGES = 256  # messages read at once from a range (the rest serve its next reads)
AHEAD_SECONDS = 1.0  # how long messages read ahead are used
_MIN_WAIT = 0.01  # seconds: the shortest idle wait
RING_GAP = 0.05  # seconds between rings for ranges given back with more to read
# a range kept between reads is held this long (at most the ack timeout): a consumer that went away without
# close() (killed, hung, or a gateway session no longer called) holds up the rest of its range no longer
KEEP_SECONDS = 2.0
TAIL_SECONDS = 1.0  # within a receive, a look after a wait without a ring reads the newest row after this long
PEERS_SECONDS = 1.0  # how long the other idle consumers' doorbells read once are rung without reading again
DELIVERED_KEPT = 16_384  # deliveries whose incarnation a consumer keeps for settlements by bare id
BODIES_BYTES = 16 << 20  # key order: payloads of messages registered waiting kept to deliver them without a read
MAX_OWNER_LENGTH = 300  # an owner's name is written into every claim it makes and keys its doorbell's row
DEFERRED_MAX = 1024  # acknowledgements noted with wait=False are written at the latest once this many wait


Publish = Callable[[TopicId, Sequence[bytes | Record]], object]
Settled = Delivery | DeliveryRef | bytes  # what settles a delivery: the delivery, a reference to it, or a message id


class SharedConsumer(TransactionalAcks):
    """One consumer of a shared subscription (create it with ``MessagingClient.shared_consumer``)."""

    def __init__(
        self,
        *,
        topic: TopicId,
        name: str,
        generation: int,
        subscription_key: bytes,
        store: SharedStore,
        reader: MessageReader,
        topics: MetadataCache,
        clock: Callable[[], int],
        publish: Publish,
        owner: str | None = None,
        max_wait_seconds: float = 5.0,
        poll_interval_seconds: float = 0.5,
        reap_interval: float | None = None,
        tx_state: Callable[[], Transaction] | None = None,
        prefix: str = "",
        doorbell: str | None = DEFAULT_HOST,
        committed: CommittedReads | None = None,
    ) -> None:
        for what, value in (("max_wait_seconds", max_wait_seconds), ("poll_interval_seconds", poll_interval_seconds)):
            checks.seconds(what, value)
        if owner is not None and (not isinstance(owner, str) or not 0 < len(owner) <= MAX_OWNER_LENGTH):
            shown = owner if not isinstance(owner, str) or len(owner) <= 40 else f"{owner[:40]}... ({len(owner)} chars)"
            raise InvalidArgument(f"bad owner {shown!r}: a non-empty name of at most {MAX_OWNER_LENGTH} characters")
        self.topic, self.name, self.generation = topic, name, generation
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.max_wait_seconds, self.poll_interval_seconds = max_wait_seconds, max(poll_interval_seconds, 0.01)
        self._key, self._store, self._reader, self._topics = subscription_key, store, reader, topics
        self._schedule = Schedule(store)
        self._clock, self._publish = clock, publish
        self._committed_reads = committed  # committed messages only (None: every row as stored)
        self._use_settings(*self._read_settings())
        if reap_interval is not None:
            checks.seconds("reap_interval", reap_interval)
        self._reap_interval = reap_interval
        self._held: dict[bytes, StoredClaim] = {}  # what this consumer holds, as it last wrote it
        # the incarnation of this consumer's last delivery of each message (the latest DELIVERED_KEPT), held or
        # not: a settlement by bare id names that delivery, not one another process of the same owner holds now
        self._delivered: dict[bytes, int] = {}
        self._range: StoredRange | None = None  # the range it read last, kept or given back
        self._expired: deque[StoredClaim] = deque()  # claims the last reap found deliverable again
        self._next_due: int | None = None  # the earliest later deadline the last reap saw (HBase ms)
        self._tail = 0  # the topic's newest row position, as last read
        self._handed = 0  # ranges the counter had handed out, as last read
        self._tail_read = float("-inf")  # when the newest row was last read (monotonic)
        self._checked = False  # whether the settings were read in this look of receive()
        self._ahead: _Ahead | None = None  # messages read past the last delivered ones of a range
        self._takeable: list[int] = []  # ranges the last reap found nobody reading
        # key order (ordering="key", :mod:`.key_order`): the keys in play as the last reap saw them, the
        # messages this consumer registered waiting (delivered from here when their turn comes), and
        # whether the last look registered some
        self._view = KeyView()
        self._bodies: dict[bytes, Message] = {}
        self._bodies_bytes = 0
        self._registered = 0
        self._next_reap = 0.0
        self._closed = False
        self._deferred: list[DeliveryRef] = []  # acknowledgements noted with wait=False, not written yet
        self._deferred_failures: list[str] = []  # why those written since the last flush() were refused
        self._metric = CLIENT_METRICS.consumed_messages.labels(str(topic), name)
        self._init_tx(tx_state)
        # the doorbell, opened when this consumer first waits: this process's publishers and consumers
        # ring it directly, others' through its cell (with ``doorbell``'s address; None: no cell)
        self._prefix, self._doorbell = prefix, doorbell
        self._bell: Bell | None = None
        self._bell_expires = 0  # HBase ms until which its cell holds; 0: not written
        self._peers: list[tuple] = []  # other idle consumers' doorbells, read at ``_peers_read`` (monotonic)
        self._peers_read = float("-inf")
        self._rang = 0.0
        self._senders: dict[int, socket.socket] = {}  # by address family: ring other processes' consumers

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> SharedConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Give back what this consumer holds (its messages go to others at once). A message whose
        release fails is delivered again after its deadline. Idempotent."""
        if self._closed:
            return
        self._closed = True
        gave_back = False
        try:
            self._write_deferred()  # first: what was acknowledged is not given back
            now = self._clock()
            holding = [i for i, c in self._held.items() if c.claim.deadline > now]  # (past it: not a late release)
            gave_back = bool(holding)
            for message_id in holding:
                self._settle(
                    DeliveryRef(message_id, 0),
                    lambda c, now: replace(
                        c, state=ClaimState.FREE, owner=None, deadline=now, deliveries=c.deliveries - 1
                    ),
                )
            kept = self._range
            if kept is not None and kept.cell.owner == self.owner:  # the range it kept: others go on with it
                free = replace(kept.cell, owner=None, deadline=0)
                given = self._store.swap_range(self._keys, kept.k, kept.data, free)
                gave_back = gave_back or given is not None
            if self._bell_expires:
                self._store.drop_bell(self._keys, self.owner)
        except TmsError as exc:
            log.warning("%r: could not give everything back (%s); it runs out by itself", self, exc)
        finally:
            if self._bell is not None:
                self._bell.close()
        if gave_back:
            self._ring_peers()
        for sender in self._senders.values():
            sender.close()

    def __repr__(self) -> str:
        return f"SharedConsumer({self.topic}, {self.name!r}, owner={self.owner!r})"

    @property
    def held(self) -> list[bytes]:
        """Ids of the messages this consumer holds now (delivered, not settled)."""
        return list(self._held)

    # -- receiving ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Delivery]:
        """Deliveries one by one; the iteration ends after ``max_wait_seconds`` seconds without one."""
        while True:
            got = self.receive(1, self.max_wait_seconds)
            if not got:
                return
            yield got[0]

    def receive(self, max_messages: int = 10, timeout_seconds: float = 1.0) -> list[Delivery]:
        """Up to ``max_messages`` deliveries, redeliveries first, as soon as there is one; ``[]`` after
        ``timeout_seconds``. Each is held until its ``deadline``: settle it before then."""
        checks.positive_int("max_messages", max_messages)
        checks.seconds("timeout_seconds", timeout_seconds)
        if self._closed:
            raise TmsError(f"{self!r} is closed")
        end = time.monotonic() + timeout_seconds
        reaped = False
        self._write_deferred()
        self._tail_read = float("-inf")  # a ring while the caller worked was cleared unseen: read it again
        while True:
            if self._bell is not None:
                self._bell.clear()  # before looking: a ring after the look ends the wait below
            self._checked = False
            # (a busy consumer reaps too when a deadline the last reap saw has come: a scheduled message's time)
            reaping = time.monotonic() >= self._next_reap or (
                self._next_due is not None and self._next_due <= self._clock()
            )
            if reaping:
                self._check()
                self._reap()
                reaped = True
            got = self._redeliver(max_messages)
            if len(got) < max_messages:
                got += self._claim_new(max_messages - len(got), looked=reaping)
            if got:
                self._metric.inc(len(got))
                return tracing.received(self.topic, self.name, got)
            if self._registered:  # key order: messages registered waiting may go out now; look at once
                self._next_reap, reaped = 0.0, True
                continue
            if not reaped:  # found nothing since the last reap: look again now (a range given back meanwhile)
                self._next_reap, reaped = 0.0, True
                continue
            left = end - time.monotonic()
            if left <= 0:
                return []
            wait = min(left, self.poll_interval_seconds)
            if self._next_due is not None:
                wait = min(wait, max(_MIN_WAIT, (self._next_due - self._clock()) / 1000))
            rung = self._await_ring(wait)
            if rung:
                self._tail_read = float("-inf")  # a publish rings: read the newest row again
            if rung or (self._next_due is not None and self._next_due <= self._clock()):
                # something was published or given back, or a deadline the last reap saw has come: reap
                # now; else at the next reap time (which also covers a ring that got lost)
                self._next_reap = 0.0

    # -- doorbells ------------------------------------------------------------------------------

    def _await_ring(self, seconds: float) -> bool:
        """Wait idle until a ring (a publish, or a message or range given back by another consumer)
        or ``seconds``; True if it rang. The doorbell's cell is written first, so other processes can
        ring it."""
        if self._bell is None:
            self._bell = Bell(self._prefix, self.topic, self._doorbell or DEFAULT_HOST)
            weakref.finalize(self, self._bell.close)  # a consumer dropped without close() (the gateway's)
        if self._doorbell is not None and self._bell_expires - self._clock() < BELL_SECONDS * 500:
            expires = self._clock() + int(BELL_SECONDS * 1000)
            self._store.put_bell(self._keys, self.owner, self._bell.address, expires)
            self._bell_expires = expires
        return self._bell.wait(seconds)

    def _ring_peers(self, *, fresh: bool = True, one: bool = False) -> None:
        """Wake the other idle consumers, or ``one`` of them at random (a range given back is read by one
        at a time: waking them all has them all look for it at once): something was given back
        (best-effort, as every ring). Their doorbells are read again unless ``fresh`` is False and they
        were read within PEERS_SECONDS."""
        ring_local(self._prefix, self.topic)
        now = time.monotonic()
        if fresh or now - self._peers_read >= PEERS_SECONDS:
            self._peers_read = now
            try:
                found = self._store.bells(self._keys, self._clock())
            except TmsError as exc:
                log.debug("%r: doorbells not read: %s", self, exc)
                found = {}
            found.pop(self.owner, None)
            self._peers = [t for a in found.values() if (t := parse_address(a)) is not None]
        for target in random.sample(self._peers, min(1, len(self._peers))) if one else self._peers:
            family = socket.AF_INET6 if len(target) == 4 else socket.AF_INET
            if family not in self._senders:
                self._senders[family] = sender = socket.socket(family, socket.SOCK_DGRAM)
                weakref.finalize(self, sender.close)
            with contextlib.suppress(OSError):  # best-effort: the idle consumer's poll covers a lost ring
                self._senders[family].sendto(self.topic.key, target)

    # -- settling -------------------------------------------------------------------------------

    def ack(self, *deliveries: Settled, transaction: Transaction | None = None, wait: bool = True) -> None:
        """Acknowledge: the messages are done and never delivered again. NotHeld (after settling the
        others) for any this consumer does not hold: unknown, another's, past its deadline, delivered
        again since (the :class:`Delivery` given, or the one this consumer holds, names another delivery
        than the one holding it now), settled, or of a subscription reset or deleted since
        (SubscriptionNotFound). Many at once are written together: one round trip.

        With ``wait=False`` the acknowledgements are only noted, and written all together (one round trip)
        when the next :meth:`receive` begins, by :meth:`flush` or by :meth:`close`, as Kafka's share
        consumers send theirs with the next poll: a round trip saved per message, but a message is
        acknowledged only once written (a consumer that dies first has it delivered again), and a NotHeld
        comes from :meth:`flush` (receive and close log it).

        Inside a TransactionContext the acknowledgement is part of the running transaction (written at
        its commit, :mod:`.tx_acks`). With ``transaction`` it is written now as pending in that
        transaction: commit it through the transaction client, then call :meth:`post_tx_commit` (or
        leave it to the reapers); to abort it, call :meth:`rollback_tx` first (or invalidate it)."""
        refs = self.refs_of(deliveries)
        if transaction is not None and not isinstance(transaction, Transaction):
            raise InvalidArgument(f"transaction must be a tms_hbase.tx.Transaction, not {type(transaction).__name__}")
        if transaction is not None or (self._tx is not None and self._in_context):
            if not wait:
                raise InvalidArgument("a transactional acknowledgement is written with its transaction: not wait=False")
            if transaction is not None:
                self._refresh(settling=True)
            self._ack_in(transaction, refs)
            return
        if not wait:
            if self._closed:
                raise TmsError(f"{self!r} is closed")
            self._deferred.extend(refs)
            if len(self._deferred) >= DEFERRED_MAX:  # bounded: written now, failures kept for flush()
                self._write_deferred()
            return
        self._ack_now(refs)

    def flush(self) -> None:
        """Write the acknowledgements noted with ``wait=False`` (one round trip); NotHeld lists every one
        refused since the last flush, here or by a receive that wrote them."""
        self._write_deferred()
        failed, self._deferred_failures = self._deferred_failures, []
        if failed:
            raise NotHeld("; ".join(failed))

    def _write_deferred(self) -> None:
        """Write the noted acknowledgements, keeping what is refused for :meth:`flush` (logged)."""
        refs, self._deferred = self._deferred, []
        if not refs:
            return
        try:
            self._ack_now(refs)
        except NotHeld as exc:
            log.warning("%r: acknowledgements noted with wait=False were refused: %s", self, exc)
            self._deferred_failures.append(str(exc))

    def _ack_now(self, refs: list[DeliveryRef]) -> None:
        """Acknowledge ``refs`` now: those held here as last written in one pipelined round of
        compare-and-sets, the rest (and any that lost) one by one as :meth:`_settle` settles them."""
        self._before_settling(refs)
        now = self._clock()
        fast, slow = [], []
        for ref in dict.fromkeys(refs):
            stored = self._held.get(ref.id)
            fence = ref.incarnation or self._delivered.get(ref.id) or (stored.claim.incarnation if stored else 0)
            if stored is not None and stored.claim.held_by(self.owner, now, fence):
                fast.append((ref, stored))
            else:
                slow.append(ref)
        done: list[StoredClaim] = []
        if fast:
            won = self._store.swap_claims(
                self._keys, [(stored.message_id, stored.data, _acked(stored.claim, now)) for _, stored in fast]
            )
            for (ref, _), w in zip(fast, won, strict=True):
                if w is None:
                    slow.append(ref)
                else:
                    self._held.pop(ref.id, None)
                    done.append(w)
        failed = []
        for ref in slow:
            try:
                done.append(self._settle(ref, _acked))
            except NotHeld as exc:
                failed.append(str(exc))
        for settled in done:
            self._next_of_key(settled)
        if failed:
            raise NotHeld("; ".join(failed))

    def _next_of_key(self, settled: StoredClaim) -> None:
        """Key order: after this consumer settled a claim, the next of its key goes out from here first
        (when the view knows it), or the key is free again in the view (:meth:`KeyView.settled`)."""
        following = self._view.settled(settled.message_id, settled.claim.key)
        if following is not None:
            self._expired.appendleft(following)

    def nack(self, delivery: Settled, delay_seconds: float = 0.0) -> None:
        """Give the message back to be delivered again (to any consumer) after ``delay_seconds``; the
        delivery counts towards ``max_deliveries``. ``delay_seconds``: 0 to a week."""
        delay_ms = hold_ms("delay_seconds", delay_seconds)
        (ref,) = self.refs_of([delivery])
        self._before_settling([ref])
        self._settle(
            ref,
            lambda c, now: replace(c, state=ClaimState.FREE, owner=None, deadline=now + delay_ms),
        )
        if not delay_ms:
            self._ring_peers()

    def release(self, delivery: Settled) -> None:
        """Give the message back at once without counting this delivery (a consumer shutting down)."""
        (ref,) = self.refs_of([delivery])
        self._before_settling([ref])
        self._settle(
            ref,
            lambda c, now: replace(c, state=ClaimState.FREE, owner=None, deadline=now, deliveries=c.deliveries - 1),
        )
        self._ring_peers()

    def extend(self, delivery: Settled, timeout_seconds: float | None = None) -> int:
        """Hold the message until ``timeout_seconds`` from now (default: the subscription's ack timeout)
        while slow work goes on (0 to a week); returns the new deadline (HBase ms)."""
        extra = None if timeout_seconds is None else hold_ms("timeout_seconds", timeout_seconds)
        (ref,) = self.refs_of([delivery])
        self._before_settling([ref])
        hold = self.settings.ack_timeout_ms if extra is None else extra
        return self._settle(ref, lambda c, now: replace(c, deadline=now + hold)).claim.deadline

    def _before_settling(self, refs: list[DeliveryRef]) -> None:
        """Check the subscription before settling: its settings are read again (SubscriptionNotFound
        after a deletion, NotHeld after a reset) unless every message is held here as last written and
        before its deadline, when the compare-and-set itself tells (a reset or deletion removes the
        claim cells: a failed one reads the settings then, :meth:`_settle`). The topic's generation is
        checked always (the metadata cache)."""
        now = self._clock()
        if all(r.id in self._held and self._held[r.id].claim.held_by(self.owner, now, r.incarnation) for r in refs):
            if self._topics.get(self.topic).generation != self.generation:
                raise SubscriptionNotFound(self.topic, self.name)
            return
        self._refresh(settling=True)

    def _settle(self, ref: DeliveryRef, step: Callable[[Claim, int], Claim]) -> StoredClaim:
        """Apply ``step`` to a claim this consumer holds, by compare-and-set, if it is still the delivery
        ``ref`` names (its incarnation; 0: the one this consumer holds, else whichever holds it now);
        NotHeld (counted as a late settlement once the message was delivered) if it is not."""
        message_id = ref.id
        stored = self._held.get(message_id) or self._store.read_claim(self._keys, message_id)
        now = self._clock()
        if stored is None:
            raise NotHeld(
                f"message {message_id.hex()} was never delivered by subscription {self.name!r} of {self.topic}"
            )
        fence = ref.incarnation or self._delivered.get(message_id) or stored.claim.incarnation  # the one settled
        if not stored.claim.held_by(self.owner, now, fence):
            if self._held.pop(message_id, None) is not None:  # as last written here: say what it is now
                stored = self._store.read_claim(self._keys, message_id) or stored
            raise self._late(message_id, stored.claim, fence, now)
        new = step(stored.claim, now)
        won = self._store.swap_claim(self._keys, message_id, stored.data, new)
        if won is None:
            self._held.pop(message_id, None)
            current = self._store.read_claim(self._keys, message_id)
            now = self._clock()
            if current is not None and current.data != stored.data and current.claim.held_by(self.owner, now, fence):
                # still this delivery, changed by another consumer of the same owner (a gateway's other
                # worker extended it): settle it from what is there now
                new = step(current.claim, now)
                won = self._store.swap_claim(self._keys, message_id, current.data, new)
            if won is None:
                if current is None:
                    self._refresh(settling=True)  # gone with a reset (NotHeld) or deletion (SubscriptionNotFound)?
                    raise NotHeld(_why_not(message_id, None, self.owner, fence, now))
                raise self._late(message_id, current.claim, fence, now)
        if new.state is ClaimState.HELD and new.tx is None:
            self._held[message_id] = won
        else:
            self._held.pop(message_id, None)
        return won

    def _note_delivered(self, stored: StoredClaim) -> None:
        """Remember the incarnation of a delivery made here (the latest DELIVERED_KEPT)."""
        self._delivered.pop(stored.message_id, None)
        self._delivered[stored.message_id] = stored.claim.incarnation
        if len(self._delivered) > DELIVERED_KEPT:
            del self._delivered[next(iter(self._delivered))]

    def _late(self, message_id: bytes, claim: Claim, fence: int, now: int) -> NotHeld:
        """The NotHeld for a settlement of a delivered message this delivery no longer holds (its deadline
        passed, it was delivered again or settled), counted in the subscription's late settlements
        (best-effort: the count never decides anything)."""
        try:
            self._store.count(self._keys, late=1)
        except TmsError as exc:
            log.debug("%r: late settlement not counted: %s", self, exc)
        return NotHeld(_why_not(message_id, claim, self.owner, fence, now))

    def refs_of(self, deliveries: Iterable[Settled]) -> list[DeliveryRef]:
        """The deliveries named by ``deliveries`` (a :class:`Delivery` or :class:`DeliveryRef` names its
        incarnation; a bare message id the one this consumer holds, or whichever holds it), checked
        (InvalidArgument for anything that is not an id of the topic's generation, or none at all) before
        anything is changed."""
        refs = []
        for d in deliveries:
            raw, incarnation = (d.id, d.incarnation) if isinstance(d, (Delivery, DeliveryRef)) else (d, 0)
            mid = MessageId.decode(raw)  # InvalidArgument for anything that is not an id
            if mid.generation != self.generation:
                raise InvalidArgument(
                    f"message id {bytes(mid).hex()} is from generation {mid.generation} of {self.topic}, "
                    f"which is at generation {self.generation}"
                )
            refs.append(DeliveryRef(raw if type(raw) is bytes else bytes(mid), incarnation))
        if not refs:
            raise InvalidArgument("nothing to settle: give one or more deliveries or message ids")
        return refs

    # -- the subscription's settings ------------------------------------------------------------

    @property
    def _keys(self) -> Keys:
        return self._keys_now

    def _use_settings(self, data: bytes, settings: Settings) -> None:
        """Go on with ``settings`` (read as ``data``), and the row keys of their incarnation."""
        self._settings_data, self.settings = data, settings
        self._keys_now = Keys(self._key, settings.incarnation)

    def _read_settings(self) -> tuple[bytes, Settings]:
        found = self._store.settings(self._key)
        if found is None:
            raise SubscriptionNotFound(self.topic, self.name)
        return found

    def _check(self) -> None:
        """:meth:`_refresh` once per look of :meth:`receive`: before a reap or taking a range other than
        the one this consumer kept, so that it never writes a range cell of a subscription reset or
        deleted (reading on in the kept one needs no check: a reset or deletion removes its cell, so the
        compare-and-set after the read fails and refreshes). An idle look that finds nothing to take
        reads no settings."""
        if not self._checked:
            self._refresh()
            self._checked = True

    def _refresh(self, *, settling: bool = False) -> None:
        """Re-read the settings: SubscriptionNotFound once the subscription or its topic is gone; after a
        reset, NotHeld for a settlement (what was held belongs to the old start), else start afresh."""
        if self._topics.get(self.topic).generation != self.generation:
            raise SubscriptionNotFound(self.topic, self.name)
        data, settings = self._read_settings()
        if data == self._settings_data:
            return
        if settings.incarnation != self.settings.incarnation:
            self._held.clear()
            self._delivered.clear()
            self._range, self._expired, self._takeable, self._next_reap = None, deque(), [], 0.0
            self._view, self._bodies, self._bodies_bytes = KeyView(), {}, 0
            self._next_due, self._ahead, self._handed, self._tail = None, None, 0, 0
            self._tail_read = float("-inf")
        self._use_settings(data, settings)
        if settling:
            raise NotHeld(f"subscription {self.name!r} of {self.topic} was reset: what was delivered before is void")

    # -- redeliveries ---------------------------------------------------------------------------

    def _reap(self) -> None:
        """Find claims past their deadline (or released and due) and ranges nobody reads; raise the floor."""
        keys, s = self._keys, self.settings
        interval = self._reap_interval
        self._next_reap = time.monotonic() + (min(1.0, s.ack_timeout_ms / 4000) if interval is None else interval)
        floor_row, handed = self._store.floor_and_handed_out(keys)
        floor = floor_row.value
        ranges = self._store.ranges(keys, floor)  # before the claims: a range read to its end has them all
        most = REAP_CLAIMS if s.ordering == "key" else SCAN_LIMIT  # (key order: the first, :mod:`.key_order`)
        claims = self._store.claims(keys, self._first_id(floor), most, unsettled=True)
        truncated = len(claims) >= most
        edge = claims[-1].message_id if truncated else None  # claims past it were not read
        now = self._clock()
        due = self._schedule.due(keys, now, floor_row)  # scheduled messages the floor passed, due by now
        above = {c.message_id for c in claims}
        claims = [c for c in due.claims if c.message_id not in above] + claims  # (in id order: below the floor)
        self._held = {k: c for k, c in self._held.items() if c.claim.deadline > now}  # past it: not held any more
        claims = self._resolve(claims, now)  # acknowledgements pending in transactions that ended
        if s.ordering == "key":
            in_play = [c for c in claims if not c.claim.state.settled]
            self._view = view_of(s, floor, ranges, in_play, complete=not truncated)
            waiting = {c.message_id for c in in_play}
            self._bodies = {i: m for i, m in self._bodies.items() if i in waiting or (edge is not None and i > edge)}
            self._bodies_bytes = sum(len(m.payload) for m in self._bodies.values())
            # those this consumer registered first (it has their messages: no read to deliver them), then the
            # others from a point of its own, so that consumers that reap at once do not all try the same heads
            found = heads(s, self._view, in_play, now)
            others = [c for c in found if c.message_id not in self._bodies]
            turn = random.randrange(len(others)) if others else 0
            ready = [c for c in found if c.message_id in self._bodies] + others[turn:] + others[:turn]
        else:
            ready = [c for c in claims if c.claim.available(now)]
        self._expired = deque(c for c in ready if c.message_id not in self._held)
        # the next deadline of another's claim: an idle consumer looks again then (a message given back
        # elsewhere is due from the deadline its consumer read on its own reading of HBase's clock)
        later = [
            c.claim.deadline
            for c in claims
            if not c.claim.state.settled and c.claim.tx is None and c.message_id not in self._held
        ]
        self._next_due = min((d for d in [*later, due.next_due or 0] if d > now), default=None)
        by_k = {r.k: r for r in ranges}
        self._takeable = [k for k in range(floor, handed + 1) if k not in by_k or by_k[k].cell.takeable(now)][:1000]
        # the floor passes parked claims (scheduled far ahead), once their schedule rows are written
        open_claims = [c for c in claims if not c.claim.state.settled and not parked(c.claim, now)]
        unsettled = {s.range_of(position_of_id(c.message_id)) for c in open_claims}
        # a truncated scan says nothing about the ranges past its last claim
        limit = handed + 1 if not truncated else s.range_of(position_of_id(claims[-1].message_id))
        new_floor = floor
        while new_floor < limit and new_floor in by_k and by_k[new_floor].cell.read and new_floor not in unsettled:
            new_floor += 1
        passed = [c for c in claims if floor <= s.range_of(position_of_id(c.message_id)) < new_floor]
        if passed:
            self._schedule.park(keys, [c for c in passed if not c.claim.state.settled])
        raised = self._store.raise_floor(keys, floor_row, new_floor) if new_floor > floor else None
        if raised is not None or floor_row.cleared.deleted < floor:  # (behind: its raiser died or hung clearing)
            clear(self._store, keys, raised or floor_row, self._first_id, self._clock)

    def _first_id(self, k: int) -> bytes:
        """The first message id of range ``k``."""
        return bytes(MessageId(self.generation, self.settings.first_position(k), 0))

    def _redeliver(self, wanted: int) -> list[Delivery]:
        """Deliver again what the last reap found deliverable (and, key order, the next of a key just
        settled here): up to ``wanted``, their claims taken by compare-and-set, pipelined; past
        ``max_deliveries`` to the dead letters instead."""
        out: list[Delivery] = []
        while self._expired and len(out) < wanted:
            takes: list[tuple[bytes, bytes | None, Claim]] = []
            while self._expired and len(takes) < wanted - len(out):
                stored = self._expired.popleft()
                claim, now = stored.claim, self._clock()
                if not claim.available(now):
                    continue
                if claim.deliveries >= self.settings.max_deliveries:
                    self._dead_letter(stored, now)
                    continue
                held = Claim(
                    ClaimState.HELD,
                    self.owner,
                    now + self.settings.ack_timeout_ms,
                    claim.deliveries + 1,
                    claim.publish_time,
                    incarnation=new_delivery(),
                    key=claim.key,
                )
                takes.append((stored.message_id, stored.data, held))
            swapped = self._store.swap_claims(self._keys, takes) if takes else []
            taken = [won for won in swapped if won is not None]
            read = self._read_many([won.message_id for won in taken if won.message_id not in self._bodies])
            for won in taken:  # (those not taken: another consumer was first)
                delivery = self._deliver_again(won, read)
                if delivery is not None:
                    out.append(delivery)
        return out

    def _deliver_again(self, won: StoredClaim, read: dict[bytes, Message]) -> Delivery | None:
        """The delivery of a message whose claim this consumer just took (None: it expired meanwhile), from
        the messages kept or ``read``."""
        body = self._bodies.pop(won.message_id, None)
        self._bodies_bytes -= 0 if body is None else len(body.payload)
        message = body or read.get(won.message_id)
        held = won.claim
        if message is None:  # expired (TTL) or swept meanwhile: nothing left to deliver
            self._store.swap_claim(self._keys, won.message_id, won.data, replace(held, state=ClaimState.DEAD))
            return None
        if held.deliveries > 1:
            self._store.count(self._keys, redelivered=1)
        self._held[won.message_id] = won
        self._note_delivered(won)
        m = message
        return Delivery(
            m.id, m.payload, m.publish_time, held.deliveries, held.deadline, m.key, m.headers, held.incarnation
        )

    def _dead_letter(self, stored: StoredClaim, now: int) -> None:
        """Past ``max_deliveries``: hold it (so no other reaper does the same), publish it to the
        dead-letter topic, then mark it dead. A crash in between publishes it again after the deadline
        (dead letters are at least once). If the dead-letter topic cannot take it (deleted, full), the
        message is kept, held by no consumer for an ack timeout, and tried again then; receive() goes on."""
        hold = replace(  # a hold of its own: no late settlement of the last delivery applies to it
            stored.claim,
            state=ClaimState.HELD,
            owner=self.owner,
            deadline=now + self.settings.ack_timeout_ms,
            incarnation=new_delivery(),
        )
        won = self._store.swap_claim(self._keys, stored.message_id, stored.data, hold)
        if won is None:
            return
        target = self.settings.dead_letter
        message = self._read_many([stored.message_id]).get(stored.message_id)
        if target is not None and message is not None:
            letter = DeadLetter(
                self.topic,
                self.name,
                message.id,
                hold.deliveries,
                message.publish_time,
                message.payload,
                message.key,
                message.headers,
            )
            try:
                self._publish(target, [letter.record()])
            except (TopicNotFound, TopicFull, InvalidArgument) as exc:  # (the last: headers at their limits)
                self._store.swap_claim(self._keys, stored.message_id, won.data, replace(hold, owner=None))
                CLIENT_METRICS.dead_letters_held.labels(str(self.topic), self.name).inc()
                log.warning(
                    "%r: message %s kept, not dead-lettered: %s (tried again in %.1f s)",
                    self,
                    stored.message_id.hex(),
                    exc,
                    self.settings.ack_timeout_ms / 1000,
                )
                return
        dead = self._store.swap_claim(self._keys, stored.message_id, won.data, replace(hold, state=ClaimState.DEAD))
        if dead is not None:
            self._next_of_key(dead)
        log.info("%r: message %s dead-lettered after %d deliveries", self, stored.message_id.hex(), hold.deliveries)

    def _read_many(self, message_ids: Sequence[bytes]) -> dict[bytes, Message]:
        """The messages of these ids that are still there, by id: one read per row they are in (messages due
        together, such as those of one batch scheduled for one time, are often of one row)."""
        by_row: dict[int, list[MessageId]] = {}
        for message_id in message_ids:
            mid = MessageId.decode(message_id)
            by_row.setdefault(mid.position, []).append(mid)
        wanted, out = set(message_ids), dict[bytes, Message]()
        for position, mids in by_row.items():
            first, last = min(m.index for m in mids), max(m.index for m in mids)
            start, end = MessageId(self.generation, position, first), MessageId(self.generation, position, last + 1)
            out.update((m.id, m) for m in self._reader.fetch_range(self.topic, start, end) if m.id in wanted)
        return out

    # -- new messages ---------------------------------------------------------------------------

    def _claim_new(self, wanted: int, *, looked: bool) -> list[Delivery]:
        """New messages from the ranges; ``looked``: a reap just read the range cells (so there is no
        need to read them again before giving up)."""
        out: list[Delivery] = []
        skip_own = False
        self._registered = 0
        while len(out) < wanted:
            if self.settings.ordering == "key" and (self._registered >= AHEAD_MESSAGES or self._view.in_play >= WINDOW):
                # key order: enough registered waiting for their turn (they go out first); but a frontier nobody
                # reads is read on (once a look)
                if not self._registered and (frontier := self._take_frontier()) is not None:
                    out += self._read_range(frontier, wanted - len(out))[0]
                break
            r = (None if skip_own else self._retake()) or self._take_range()
            if r is None and not looked:
                # no range of its own, none known free, none new: another consumer may have given one
                # back since the last reap (a small backlog is a few ranges shared by many consumers).
                # Not a new one: _take_range read the counter and the newest row just now (a publish
                # since rings the doorbell, so the next wait ends at once)
                looked = True
                self._look_for_ranges()
                r = self._take_free()
            if r is None:
                break
            got, finished = self._read_range(r, wanted - len(out))
            out += got
            if not finished:
                if got or skip_own:
                    break  # at the tail (or a hole not due yet) inside this range
                skip_own = True  # nothing more at the tail: a range given back below it may have messages
        return out

    def _look_for_ranges(self) -> None:
        """The ranges nobody reads now (a read of the floor, the counter and the range cells: a reap
        without its scan of the claims)."""
        keys = self._keys
        floor_row, handed = self._store.floor_and_handed_out(keys)
        floor = floor_row.value
        by_k = {r.k: r for r in self._store.ranges(keys, floor)}
        now = self._clock()
        self._takeable = [k for k in range(floor, handed + 1) if k not in by_k or by_k[k].cell.takeable(now)][:1000]

    def _retake(self) -> StoredRange | None:
        """The range this consumer read last: as it kept it (the compare-and-set after the next read
        tells whether it still holds it) while at least half of its hold (KEEP_SECONDS) is left, else
        taken again by compare-and-set, for an ack timeout, if nobody took it since."""
        r, self._range = self._range, None
        if r is None:
            return None
        now = self._clock()
        if (
            r.cell.owner == self.owner
            and r.cell.deadline - now > min(self.settings.ack_timeout_ms, KEEP_SECONDS * 1000) / 2
        ):
            return r
        return self._store.swap_range(
            self._keys, r.k, r.data, replace(r.cell, owner=self.owner, deadline=now + self.settings.ack_timeout_ms)
        )

    def _take_range(self) -> StoredRange | None:
        """A range to read: one nobody reads (:meth:`_take_free`), else a new one from the counter (only
        if it starts at or below the newest row), else None."""
        taken = self._take_free()
        if taken is not None:
            return taken
        keys, s = self._keys, self.settings
        fresh = time.monotonic() - self._tail_read < TAIL_SECONDS
        if fresh and s.first_position(self._handed + 1) > self._tail:
            return None  # nothing new since the last look (the counter only grows; a publish rings)
        self._handed = self._store.handed_out(keys)
        following = s.first_position(self._handed + 1)
        if following > self._tail:  # the newest row only moves on: read it when the last reading is passed
            self._tail, self._tail_read = self._reader.tail(self.topic, self.generation), time.monotonic()
            if following > self._tail:
                return None
        self._check()
        if self._keys != keys:  # reset meanwhile: the next look starts afresh
            return None
        for _ in range(_MAX_ROUNDS):
            k = self._handed = self._store.hand_out(keys)
            taken = self._store.swap_range(keys, k, None, RangeCell(self.owner, self._clock() + s.ack_timeout_ms, None))
            if taken is not None:
                return taken
        raise TmsError(f"{self!r}: lost {_MAX_ROUNDS} new ranges in a row")

    def _take_free(self) -> StoredRange | None:
        """A range the last look found nobody reading (given back, its reader's deadline passed, or handed
        out and never written down), taken by compare-and-set; None when none is left."""
        if self._takeable:
            self._check()  # (a reset forgets them)
        while self._takeable:
            taken = self._take_one(self._takeable.pop(0))
            if taken is not None:
                return taken
        return None

    def _take_frontier(self) -> StoredRange | None:
        """Key order: the frontier's range (:mod:`.key_order`), if the last reap found nobody reading it, taken
        as :meth:`_take_free` takes one. Read even when the claims in play fill the window: until it is, no
        claim past it may go out, and those may be what fills it."""
        k = self._view.frontier
        if k not in self._takeable:
            return None
        self._check()
        self._takeable.remove(k)
        return self._take_one(k)

    def _take_one(self, k: int) -> StoredRange | None:
        """Range ``k`` by compare-and-set if nobody reads it now; None if it is read or another took it."""
        keys, s = self._keys, self.settings
        found = self._store.read_range(keys, k)
        now = self._clock()
        if found is None:  # handed out, never written down: its taker died (or is just writing it)
            taken = self._store.swap_range(keys, k, None, RangeCell(self.owner, now + s.ack_timeout_ms, None))
            if taken is not None and self._store.floor(keys).value > k:
                self._store.drop_range(keys, k)  # it was done and cleared after the reap looked
                return None
            return taken
        if found.cell.takeable(now):
            return self._store.swap_range(
                keys, k, found.data, replace(found.cell, owner=self.owner, deadline=now + s.ack_timeout_ms)
            )
        return None

    def _read_range(self, r: StoredRange, wanted: int) -> tuple[list[Delivery], bool]:
        """Claim up to ``wanted`` messages of range ``r`` after its progress; deliver them only once the
        range cell, still ours, records the progress. Returns the deliveries and whether the range was
        read to its end."""
        s = self.settings
        ahead, self._ahead = self._ahead, None
        if ahead is None or not ahead.serves(r, wanted):
            ahead = self._read_ahead(r, max(wanted, AHEAD_MESSAGES))
        plan, ready = self._plan(r, ahead.messages, wanted)
        batch, rest = [m for m, _ in plan], ahead.messages[len(plan) :]
        finished = ahead.finished and not rest
        progress = batch[-1].id if batch else r.cell.progress
        # each claim is written if absent (one already there: another consumer's, left to it), several
        # at once: they are cells of rows of their own, and nothing is delivered before the range's
        # progress below records them all
        written = self._store.create_claims(self._keys, [(m.id, claim) for m, claim in plan])
        claimed, found = self._keyed_claims(plan, written, ready)
        # kept with its progress while the counter has ranges left for the others (no two consumers then
        # take turns on one range, each reading it again); else given back, so that another consumer may
        # go on with it (a batch row of many messages is one range's) and this one takes it again next
        # time if nobody did
        share = finished or self._ranges_run_out()
        lease = self._clock() + min(s.ack_timeout_ms, int(KEEP_SECONDS * 1000))
        cell = RangeCell(None, 0, progress, finished) if share else RangeCell(self.owner, lease, progress)
        kept = self._store.swap_range(self._keys, r.k, r.data, cell)
        if kept is None:
            # another consumer took the range (this one held it past its deadline), or a reset or deletion
            # removed it: deliver nothing, and give back at once what was claimed here, which the other
            # skipped as someone else's; then read the settings again before taking another range
            self._give_back_undelivered([won for _, won in claimed])
            self._refresh()
            return [], False
        self._range = None if finished else kept
        if s.ordering == "key":
            self._view.registered(r, progress, finished, found)
        if not finished and (rest or ahead.finished):
            self._ahead = replace(ahead, k=r.k, after=progress, messages=rest)
        if share and len(batch) >= wanted and not finished and time.monotonic() - self._rang >= RING_GAP:
            self._rang = time.monotonic()
            self._ring_peers(fresh=False, one=True)  # more may be there: an idle consumer can go on with it
        out = []
        for m, won in claimed:
            if won.claim.state is ClaimState.HELD:
                self._held[won.message_id] = won
                self._note_delivered(won)
                c = won.claim
                out.append(Delivery(m.id, m.payload, m.publish_time, 1, c.deadline, m.key, m.headers, c.incarnation))
            elif won.claim.key is not None or won.message_id in ready:  # delivered from here when its turn comes
                self._registered += 1
                self._keep_body(m)
            # (else scheduled: delivered by a reap once due)
        # those ready go out next, before anything a reap found (no read: their messages are kept)
        self._expired.extendleft(reversed([won for _, won in claimed if won.message_id in ready]))
        return out, finished

    def _keep_body(self, message: Message) -> None:
        """Keep a message registered waiting, to deliver it without reading it again when its turn comes
        here (at most BODIES_BYTES of payloads: the oldest go first; a reap forgets those settled)."""
        self._bodies[message.id] = message
        self._bodies_bytes += len(message.payload)
        while self._bodies_bytes > BODIES_BYTES:
            self._bodies_bytes -= len(self._bodies.pop(next(iter(self._bodies))).payload)

    def _plan(
        self, r: StoredRange, messages: Sequence[Message], wanted: int
    ) -> tuple[list[tuple[Message, Claim]], set[bytes]]:
        """The claims to write for the first messages of range ``r``, up to ``wanted`` deliveries: held by
        this consumer (delivered), or, in a key-ordered subscription, waiting for their key's turn when the
        view cannot tell that no earlier message of their key is in play (:mod:`.key_order`). A key-ordered
        subscription registers every message read, not only up to ``wanted``: the range is then read to its
        end in one go (its claims complete, so the frontier moves past it for every consumer, not when this
        one has worked through it), and those past ``wanted`` that may go now are written waiting and
        returned as *ready* (their ids): this consumer delivers them next, from the messages it read."""
        s = self.settings
        now = self._clock()
        deadline = now + s.ack_timeout_ms
        ordered = s.ordering == "key"
        vouched = ordered and self._view.direct(r)
        blocked: set[str] = set()
        plan: list[tuple[Message, Claim]] = []
        ready: set[bytes] = set()
        delivered = 0
        for m in messages:
            if delivered >= wanted and not ordered:
                break
            due = m.deliver_at_ms
            if due is not None and due > now:  # scheduled: free from its time on, out of key order (docs/shared.md)
                plan.append((m, Claim(ClaimState.FREE, None, due, 0, m.publish_time)))
                continue
            key = key_of(m.key) if ordered else None
            free = key is None or (vouched and key not in self._view.blocked and key not in blocked)
            if free and delivered < wanted:
                held = Claim(
                    ClaimState.HELD, self.owner, deadline, 1, m.publish_time, incarnation=new_delivery(), key=key
                )
                plan.append((m, held))
                delivered += 1
            else:
                plan.append((m, Claim(ClaimState.FREE, None, 0, 0, m.publish_time, key=key)))
                if free:
                    ready.add(m.id)
            if key is not None:
                blocked.add(key)
        return plan, ready

    def _keyed_claims(
        self, plan: list[tuple[Message, Claim]], written: list[StoredClaim | None], ready: set[bytes]
    ) -> tuple[list[tuple[Message, StoredClaim]], list[tuple[str, StoredClaim | None]]]:
        """The claims this consumer wrote, and (key order) each keyed message's key and claim (None: a
        claim was there already, someone else's). A message held here for delivery whose key has such a
        claim before it in the batch (a consumer that lost this range meanwhile wrote it) waits instead, and
        one ``ready`` stops being so (taken out of the set)."""
        claimed: list[tuple[Message, StoredClaim]] = []
        found: list[tuple[str, StoredClaim | None]] = []
        others: set[str] = set()
        for (m, claim), won in zip(plan, written, strict=True):
            if claim.key is not None:
                if won is None:
                    others.add(claim.key)
                elif claim.key in others:
                    ready.discard(m.id)
                    if claim.state is ClaimState.HELD:
                        wait = replace(
                            claim, state=ClaimState.FREE, owner=None, deadline=0, deliveries=0, incarnation=0
                        )
                        won = self._store.swap_claim(self._keys, m.id, won.data, wait)
                found.append((claim.key, won))
            if won is not None:
                claimed.append((m, won))
        return claimed, found

    def _ranges_run_out(self) -> bool:
        """Whether the counter's next range starts past the topic's newest row as last read (then the other
        consumers find no new range: the ranges in play are shared). The counter is read only while the
        last reading of it left ranges to hand out (it only grows)."""
        s = self.settings
        if s.first_position(self._handed + 1) > self._tail:
            return True
        self._handed = self._store.handed_out(self._keys)
        return s.first_position(self._handed + 1) > self._tail

    def _give_back_undelivered(self, claims: list[StoredClaim]) -> None:
        """Make claims written but not delivered deliverable again now (free, this delivery not counted),
        instead of when their deadline passes: that wait, an ack timeout long, would hold up every
        consumer once they are the last messages. Best-effort: one that fails runs out by itself."""
        now = self._clock()
        claims = [c for c in claims if c.claim.state is ClaimState.HELD]  # (not those scheduled or waiting)
        for stored in claims:
            free = replace(stored.claim, state=ClaimState.FREE, owner=None, deadline=now, deliveries=0)
            try:
                self._store.swap_claim(self._keys, stored.message_id, stored.data, free)
            except TmsError as exc:
                log.warning("%r: %s not given back (%s); it runs out by itself", self, stored.message_id.hex(), exc)
                return
        if claims:
            self._ring_peers()

    def _read_ahead(self, r: StoredRange, count: int) -> _Ahead:
        """Up to ``count`` messages of range ``r`` after its progress, with the reader's ``fetch`` (which
        passes no hole), and whether a message beyond the range showed up (then it was read to its end)."""
        last = self.settings.last_position(r.k)
        start = r.cell.progress or mark_before(self.generation, self.settings.first_position(r.k), 0)
        messages: list[Message] = []
        fetched = self._reader.fetch(
            self.topic, start_message=start, inclusive=False, limit=count + 1, committed=self._committed_reads
        )
        for message in fetched:
            if MessageId.decode(message.id).position > last:
                return _Ahead(r.k, r.cell.progress, messages, True, time.monotonic())
            messages.append(message)
        return _Ahead(r.k, r.cell.progress, messages, False, time.monotonic())


@dataclass(frozen=True)
class _Ahead:
    """Messages of range ``k`` read past those delivered from it (after its progress ``after``): the next
    read of the range, if its progress is still ``after``, takes them from here instead of reading the
    same batch row again. Messages never change, but they expire: kept for AHEAD_SECONDS only."""

    k: int
    after: bytes | None
    messages: list[Message]
    finished: bool  # a message beyond the range followed them
    read_at: float  # monotonic

    def serves(self, r: StoredRange, wanted: int) -> bool:
        return (
            self.k == r.k
            and self.after == r.cell.progress
            and (len(self.messages) >= wanted or self.finished)
            and time.monotonic() - self.read_at < AHEAD_SECONDS
        )


def _acked(claim: Claim, _now: int) -> Claim:
    return claim.acked()


def _why_not(message_id: bytes, claim: Claim | None, owner: str, fence: int, now: int) -> str:
    what = f"message {message_id.hex()}"
    if claim is None:
        return f"{what} was never delivered (unknown id, or its subscription was reset or deleted)"
    if claim.state is ClaimState.ACKED:
        return f"{what} is acknowledged already"
    if claim.state is ClaimState.DEAD:
        return f"{what} was dead-lettered"
    if claim.tx is not None:
        return f"{what}: its acknowledgement is pending in the transaction with write pointer {claim.tx}"
    if claim.owner != owner:
        return f"{what} is not held by this consumer ({owner}) but by {claim.owner or 'nobody (given back)'}"
    if fence and claim.incarnation != fence:
        return (
            f"{what}: this delivery of it ended and it was delivered again (delivery {claim.deliveries}, "
            f"incarnation {claim.incarnation}); only that delivery settles it"
        )
    return f"{what}: its deadline passed {(now - claim.deadline) / 1000:.3f} s ago; it goes to another consumer"
