"""Consumer sessions kept open in one worker between their calls, so that a session's next page served by
the same worker neither opens the consumer again from HBase (a lease read and compare-and-set) nor reads
again what it had read ahead.

This is only a cache: the lease in HBase stays the truth. A session's consumer takes a lease a third
longer than ``consumer_lease`` (:func:`lease_length`) and a call renews it only once it has less than
``consumer_lease`` left, as a running consumer renews its lease only every third of it rather than on
every poll: most calls then write nothing, yet the lease still runs ``consumer_lease`` at least after the
session's last call (and at most a third longer); a commit renews it too. A parked consumer does not
renew its lease. Taking it up again for a call that does not write under the lease (a page) checks the
lease cell with one read, so a session whose lease was taken over (another consumer after it ran out,
or a release, reset or delete with force) gets LeaseLost at once; a commit is a compare-and-set of that
cell, refused (LeaseLost) and changing nothing if the lease is gone. A consumer is taken up only for the
same session at the same last delivered message; any other call of the session (one another worker
served meanwhile, or a client that sends an older ``TMS-Consumer`` header) opens the consumer from HBase
as before. Bounded: the least recently parked are dropped first, and one idle longer than its lease is
dropped on the next park.

**Read-ahead.** A page call that delivered messages hands its consumer to :meth:`Sessions.read_ahead`
instead of parking it: once the page is sent, a library call fills the consumer's buffer up to one batch
(the messages that page asked for) while the client reads the page, and parks the consumer when it is
done. The session's next call waits for that (:meth:`Sessions.settle`) before it takes
the consumer up; a call of the same session that comes meanwhile some other way (two at once) finds nothing
parked and opens the consumer from HBase, as a call served by another worker does. Reading ahead delivers
nothing: a read-ahead message goes out only in a later page of the same session at the same last delivered
message, and what a session's commit stores is what it was delivered.

Used on the worker's event loop only; the calls that reach HBase or a consumer's renewal task run inside
the gateway's library calls (``Gateway.run``). No lock: the parked consumers change only between waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from tms_hbase import TopicId
from tms_hbase.consume.consumer import Consumer
from tms_hbase.errors import TmsError
from tms_hbase.model.isolation import COMMITTED
from tms_hbase.shared import SharedConsumer

log = logging.getLogger(__name__)
SEND_WAIT = 5.0  # seconds a read-ahead waits at most for its page to be sent before it reads anyway
Key = tuple[TopicId, str, str]  # topic, subscription, lease owner (a hash of the session's secret and principal)


def lease_length(consumer_lease: float) -> float:
    """The lease a session's consumer takes: a third longer than ``consumer_lease``, so that renewing it
    only when less than ``consumer_lease`` is left still keeps it that long after the session's last call."""
    return consumer_lease * 4 / 3


class Sessions:
    """At most ``size`` parked consumers, each dropped once idle for ``lease`` seconds (``consumer_lease``, the
    time a session's lease is kept after its last call); ``count(n)`` is told how many are kept (parked or
    reading ahead) after every change (a gauge)."""

    def __init__(self, size: int, lease: float, count: Callable[[int], None] = lambda _n: None) -> None:
        self.size, self.lease, self._count = size, lease, count
        self._parked: OrderedDict[Key, tuple[Consumer, float]] = OrderedDict()
        self._reading: dict[Key, asyncio.Task[None]] = {}  # the sessions whose next batch is being read

    def __len__(self) -> int:
        return len(self._parked) + len(self._reading)

    def _counted(self) -> None:
        self._count(len(self))

    def take(self, key: Key, delivered: bytes | None, *, confirm: bool) -> Consumer | None:
        """The session's parked consumer, its lease held ``lease`` seconds at least and renewing again, if
        it stopped at ``delivered``; else None (the caller opens it from HBase). ``confirm``: check the
        lease with a read when it needs no renewal (False for a call that writes under it). LeaseLost if
        the lease was taken over."""
        entry = self._parked.pop(key, None)
        self._counted()
        if entry is None:
            return None
        consumer, _ = entry
        try:
            if consumer.delivered == delivered and consumer.unpark(self.lease, confirm=confirm):
                return consumer
        except BaseException:
            consumer.detach()
            raise
        consumer.detach()
        return None

    def park(self, key: Key, consumer: Consumer) -> None:
        """Keep ``consumer`` (open, its lease no longer renewed) for the session's next call."""
        consumer.park()
        self._keep(key, consumer)

    def _keep(self, key: Key, consumer: Consumer) -> None:
        now = time.monotonic()
        dropped = []
        previous = self._parked.pop(key, None)  # two calls of one session at once: keep the last
        if previous is not None:
            dropped.append(previous[0])
        self._parked[key] = (consumer, now)
        while len(self._parked) > self.size or now - next(iter(self._parked.values()))[1] > self.lease:
            dropped.append(self._parked.popitem(last=False)[1][0])
        self._counted()
        for old in dropped:
            old.detach()

    def read_ahead(
        self, key: Key, consumer: Consumer, run: Callable[[Callable[[], None]], Awaitable[None]]
    ) -> Callable[[], None]:
        """Park ``consumer`` once ``run(consumer.read_ahead)`` (a library call) has read its next batch; until
        then the session's next call waits in :meth:`settle`. The read starts when the function returned is
        called (once this page is sent: reading first would hold the answer up), or after :data:`SEND_WAIT`
        seconds. A read that fails only logs: the session's next page reads again and reports the error.
        Called on the event loop, in a library call."""
        consumer.park()  # no renewal from here on, as parked: a read that never ends leaves nothing running
        sent = asyncio.Event()

        def read() -> None:
            try:
                consumer.read_ahead()
            except TmsError as exc:
                log.debug("reading ahead for %s failed (its next page reads again): %s", consumer, exc)

        async def reading() -> None:
            done = False
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(sent.wait(), SEND_WAIT)
                await run(read)
                done = True
            except Exception:
                log.exception("reading ahead for %s failed; the consumer is dropped", consumer)
            finally:
                mine = self._reading.get(key) is task
                if mine:
                    del self._reading[key]
                if mine and done:
                    self._keep(key, consumer)
                else:  # failed, the session was dropped meanwhile, or the worker stops
                    self._counted()
                    consumer.detach()

        previous = self._reading.pop(key, None)
        if previous is not None:  # two calls of one session at once: the last one's consumer is kept
            previous.cancel()
        task = asyncio.ensure_future(reading())
        self._reading[key] = task
        self._counted()
        return sent.set

    async def settle(self, key: Key) -> None:
        """Wait until the session's read-ahead (if one runs) has parked its consumer."""
        task = self._reading.get(key)
        if task is not None:
            await asyncio.wait((task,))

    async def stop_reading(self) -> None:
        """End every read-ahead (its consumer is detached, not parked)."""
        tasks, self._reading = list(self._reading.values()), {}
        self._counted()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    def drop_owner(self, owner: str) -> None:
        """Drop the consumers parked (or reading ahead) for the sessions of lease ``owner`` (their lease is
        being released)."""
        for key in [key for key in self._reading if key[2] == owner]:
            del self._reading[key]  # its consumer is detached when the read ends (and no longer counted)
        keys = [key for key in self._parked if key[2] == owner]
        dropped = [self._parked.pop(key)[0] for key in keys]
        self._counted()
        for consumer in dropped:
            consumer.detach()

    def close(self) -> None:
        """Drop every parked consumer (their leases run out by themselves, as the sessions' would)."""
        parked, self._parked = list(self._parked.values()), OrderedDict()
        self._count(0)
        for consumer, _ in parked:
            consumer.detach()


class SharedSessions:
    """The library consumers of shared-subscription sessions between their calls, at most ``size``
    (the least recently used go first); ``open(topic, name, owner)`` makes a missing one. Only a cache:
    a shared consumer's deliveries are held in HBase under its owner name, whichever object settles
    them. A consumer is taken out for one call at a time: two calls of one session at once each get
    their own. Parked consumers are never closed (that would give back what
    the session holds)."""

    def __init__(self, size: int, open: Callable[[TopicId, str, str, str], SharedConsumer]) -> None:
        self.size, self._open = size, open
        self._parked: OrderedDict[tuple[Key, str], SharedConsumer] = OrderedDict()

    def take(self, key: Key, isolation: str = COMMITTED) -> SharedConsumer:
        """The session's consumer reading with ``isolation``: the one parked, else a new one
        (SubscriptionNotFound; InvalidArgument for an exclusive subscription)."""
        consumer = self._parked.pop((key, isolation), None)
        return consumer if consumer is not None else self._open(*key, isolation)

    def park(self, key: Key, consumer: SharedConsumer, isolation: str = COMMITTED) -> None:
        self._parked.pop((key, isolation), None)
        self._parked[(key, isolation)] = consumer
        while len(self._parked) > self.size:
            self._parked.popitem(last=False)

    def __len__(self) -> int:
        return len(self._parked)
