"""A consumer's lease on its subscription: one active consumer per subscription, and failover.

The lease is the ``owner`` and ``expires`` fields of the subscription's one cell, so taking it,
renewing it, and every commit made under it are compare-and-sets of that cell: a consumer whose lease
was taken over fails its next write (LeaseLost) instead of overwriting the new owner's mark.

While the lease is held a background thread renews it every third of its length (like Kafka's
heartbeat), so slow processing does not lose it, while a killed or hung process stops renewing and
loses it after at most one lease length; a standby consumer then takes over. Every write under the
lease (a commit) renews it too, so the thread renews only a third of a length after the last write.

**Clocks.** ``expires`` is written and compared on HBase's clock (a client's ``clock``,
:mod:`.hbase_clock`), not the hosts' own, so a contender whose host clock is minutes off does not take a
lease early. The owner itself measures its lease with a monotonic clock and stops yielding messages once
a renewal is overdue, a margin before the lease runs out (and commits are compare-and-sets, so a
consumer that lost its lease can never overwrite the new owner's mark).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from tms_hbase.consume.subscriptions import Record, Stored, SubscriptionStore
from tms_hbase.errors import LeaseLost, SubscriptionBusy, SubscriptionNotFound, TmsError
from tms_hbase.model.clock import now_ms
from tms_hbase.model.topic import TopicId
from tms_hbase.runtime import green

log = logging.getLogger(__name__)

MIN_LEASE_SECONDS = 0.5
# A compare-and-set that keeps losing to our own cell's changes means something is badly wrong.
_MAX_ROUNDS = 20


class Lease:
    """The lease one consumer holds on one subscription; every change to the cell goes through it."""

    def __init__(
        self,
        store: SubscriptionStore,
        stored: Stored,
        topic: TopicId,
        name: str,
        owner: str,
        seconds: float,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.store = store
        self.clock = clock  # ms, the clock ``expires`` is on (HBase's in a client)
        self.key = stored.key
        self.topic, self.name, self.owner, self.seconds = topic, name, owner, seconds
        self._data, self._record = stored.data, stored.record
        self._lock = green.rlock()
        self._valid_until = 0.0
        self._written = 0.0  # monotonic time the last write under the lease started (it renewed the lease)
        self._lost: str | None = None
        self._stop = green.event()
        self._thread: green.Joinable | None = None

    @classmethod
    def acquire(
        cls,
        store: SubscriptionStore,
        key: bytes,
        topic: TopicId,
        name: str,
        owner: str,
        seconds: float,
        bell: str | None,
        wait: float | None = 0.0,
        *,
        bell_key: str | None = None,
        resume: bool = False,
        clock: Callable[[], int] = now_ms,
    ) -> Lease:
        """Take the subscription's lease: SubscriptionBusy if another consumer holds it and it does not
        run out within ``wait`` seconds (None: wait as long as it takes); SubscriptionNotFound.
        ``resume``: take back a lease ``owner`` still holds (a detached consumer, see
        :meth:`Consumer.detach`); LeaseLost if it ran out or was taken over meanwhile."""
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            stored = store.read(key)
            if stored is None:
                raise SubscriptionNotFound(topic, name)
            record, now = stored.record, clock()
            if resume and (record.owner != owner or record.expires <= now):
                raise LeaseLost(
                    f"consumer {owner} no longer holds subscription {name!r} of {topic} (its lease ran out "
                    "or was taken over): start a new consumer, which resumes after the committed mark"
                )
            if record.held_by_other(owner, now):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise SubscriptionBusy(
                        f"subscription {name!r} of {topic} is held by consumer {record.owner} for "
                        f"{(record.expires - now) / 1000:.1f} s more (one active consumer per subscription; "
                        "a standby takes over when that lease runs out)"
                    )
                pause = min(max(0.05, (record.expires - now) / 1000), seconds / 4)
                green.sleep(pause if left is None else min(pause, left))
                continue
            lease = cls(store, stored, topic, name, owner, seconds, clock)
            started = time.monotonic()
            new = replace(record, owner=owner, expires=now + int(seconds * 1000), bell=bell, bell_key=bell_key)
            if lease._write(new):
                lease._renewed(started)
                log.info("consumer %s took the lease on %s/%s", owner, topic, name)
                return lease

    # -- state ----------------------------------------------------------------------------------

    @property
    def record(self) -> Record:
        """The cell as this consumer last wrote or read it."""
        with self._lock:
            return self._record

    def valid(self) -> bool:
        """True while the lease is surely held (no lock: cheap enough to ask per message)."""
        return self._lost is None and time.monotonic() < self._valid_until

    def check(self) -> None:
        """Raise LeaseLost if the lease was taken over; renew now if a renewal is overdue. Takes no
        lock while the lease is surely held, so a renewal in flight never holds up the consumer."""
        if self.valid():
            return
        with self._lock:
            if self._lost is not None:
                raise LeaseLost(self._lost)
            if time.monotonic() >= self._valid_until:
                self.renew()

    def change(self, step: Callable[[Record], Record]) -> Record:
        """Apply ``step`` to the cell under the lease (renewing it too): compare-and-set on the exact
        bytes last seen; LeaseLost if another consumer took the lease or the subscription was deleted."""
        with self._lock:
            if self._lost is not None:
                raise LeaseLost(self._lost)
            for _ in range(_MAX_ROUNDS):
                started = time.monotonic()
                new = replace(step(self._record), owner=self.owner, expires=self.clock() + int(self.seconds * 1000))
                if self._write(new):
                    self._renewed(started)
                    return new
                self._reload()
            raise TmsError(f"subscription {self.name!r} of {self.topic}: lost {_MAX_ROUNDS} compare-and-sets in a row")

    def renew(self) -> None:
        """Extend the lease by its length from now."""
        self.change(lambda record: record)

    def left(self) -> float:
        """Seconds the lease surely runs on as last written (its length since the last write began, which
        can be negative): a caller renews only when this falls short of what it needs."""
        return self._written + self.seconds - time.monotonic()

    def confirm(self) -> None:
        """Read the cell and raise LeaseLost unless this consumer still holds the lease (it was taken
        over, released or reset with force, or the subscription deleted): one read, no write."""
        with self._lock:
            if self._lost is not None:
                raise LeaseLost(self._lost)
            stored = self.store.read(self.key)
            if stored is None or stored.data != self._data:
                self._adopt(stored)

    def release(self) -> None:
        """Stop renewing and give the lease back (a standby takes over at once). Never raises."""
        self.stop_renewing()
        with self._lock:
            if self._lost is not None:
                return
            try:
                if self._write(self._record.released()):
                    self._lost = "the consumer was closed"
            except TmsError as exc:
                log.warning(
                    "could not release the lease on %s/%s (%s); it runs out by itself", self.topic, self.name, exc
                )

    # -- renewing in the background -------------------------------------------------------------

    def start_renewing(self) -> None:
        self._stop.clear()  # again after stop_renewing: a parked consumer taken up again
        self._thread = green.start_thread(self._renew_loop, f"tms-lease-{self.name}")

    def abandon(self) -> None:
        """Stop renewing without waiting (the consumer was dropped unclosed): the lease runs out."""
        self._stop.set()

    def stop_renewing(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _renew_loop(self) -> None:
        interval = self.seconds / 3
        wait = max(0.0, interval - (time.monotonic() - self._written))  # a third of a length after the last write
        while not self._stop.wait(wait):
            try:
                self.renew()
                wait = interval
            except LeaseLost as exc:
                log.warning("consumer %s: %s", self.owner, exc)
                return
            except TmsError as exc:  # HBase unreachable: try again soon; check() stops the consumer if it lasts
                log.warning(
                    "consumer %s could not renew its lease on %s/%s: %s", self.owner, self.topic, self.name, exc
                )
                wait = interval / 3

    # -- plumbing -------------------------------------------------------------------------------

    def _trusted(self) -> float:
        """How long after a successful write this consumer counts on its lease (a margin under its length)."""
        return self.seconds - min(1.0, self.seconds / 4)

    def _renewed(self, started: float) -> None:
        """A write that began at ``started`` (monotonic) went through: the lease runs a length from then."""
        self._written = started
        self._valid_until = started + self._trusted()

    def _write(self, new: Record) -> bool:
        data = new.encode()
        won = self.store.swap(self.key, self._data, data)
        if won:
            self._data, self._record = data, new
        return won

    def _reload(self) -> None:
        """After a lost compare-and-set: adopt the cell if it is still ours, else the lease is lost."""
        self._adopt(self.store.read(self.key))

    def _adopt(self, stored: Stored | None) -> None:
        """Take ``stored`` (the cell as just read) as this consumer's if it still holds the lease there,
        else the lease is lost (LeaseLost)."""
        if stored is None:
            self._lost = f"subscription {self.name!r} of {self.topic} was deleted"
        elif stored.record.owner != self.owner:
            holder = stored.record.owner or "nobody (it was reset or released)"
            self._lost = f"lost the lease on subscription {self.name!r} of {self.topic}: it is now held by {holder}"
        else:
            self._data, self._record = stored.data, stored.record
            return
        raise LeaseLost(self._lost)
