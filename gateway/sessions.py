"""Consumer sessions kept open in one worker between their calls, so that a session's next page served by
the same worker neither opens the consumer again from HBase (a lease read and compare-and-set) nor reads
again what it had read ahead.

This is only a cache: the lease in HBase stays the truth. A parked consumer does not renew its lease, so
the lease runs out ``consumer_lease`` after the session's last call exactly as without the cache, and
taking the consumer up again renews it with a compare-and-set (LeaseLost if another consumer took it over,
or the subscription was reset or deleted with force). A consumer is taken up only for the same session at
the same last delivered message; any other call of the session (one another worker served meanwhile, or a
client that sends an older ``TMS-Consumer`` header) opens the consumer from HBase as before. Bounded: the
least recently parked are dropped first, and one idle longer than its lease is dropped on the next park.

Used on the worker's event loop only; the calls that reach HBase or a consumer's renewal task run inside
the gateway's library calls (``Gateway.run``). No lock: the parked consumers change only between waits.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from tms_hbase import TopicId
from tms_hbase.consume.consumer import Consumer
from tms_hbase.shared import SharedConsumer

Key = tuple[TopicId, str, str]  # topic, subscription, lease owner (a hash of the session's secret and principal)


class Sessions:
    """At most ``size`` parked consumers, each dropped once idle for ``idle`` seconds; ``count(n)`` is told
    how many are parked after every change (a gauge)."""

    def __init__(self, size: int, idle: float, count: Callable[[int], None] = lambda _n: None) -> None:
        self.size, self.idle, self._count = size, idle, count
        self._parked: OrderedDict[Key, tuple[Consumer, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._parked)

    def take(self, key: Key, delivered: bytes | None) -> Consumer | None:
        """The session's parked consumer, renewed and renewing again, if it stopped at ``delivered``;
        else None (the caller opens it from HBase). LeaseLost if the lease was taken over."""
        entry = self._parked.pop(key, None)
        self._count(len(self._parked))
        if entry is None:
            return None
        consumer, _ = entry
        try:
            if consumer.delivered == delivered and consumer.unpark():
                return consumer
        except BaseException:
            consumer.detach()
            raise
        consumer.detach()
        return None

    def park(self, key: Key, consumer: Consumer) -> None:
        """Keep ``consumer`` (open, its lease no longer renewed) for the session's next call."""
        consumer.park()
        now = time.monotonic()
        dropped = []
        previous = self._parked.pop(key, None)  # two calls of one session at once: keep the last
        if previous is not None:
            dropped.append(previous[0])
        self._parked[key] = (consumer, now)
        while len(self._parked) > self.size or now - next(iter(self._parked.values()))[1] > self.idle:
            dropped.append(self._parked.popitem(last=False)[1][0])
        self._count(len(self._parked))
        for old in dropped:
            old.detach()

    def drop_owner(self, owner: str) -> None:
        """Drop the consumers parked for the sessions of lease ``owner`` (their lease is being released)."""
        keys = [key for key in self._parked if key[2] == owner]
        dropped = [self._parked.pop(key)[0] for key in keys]
        self._count(len(self._parked))
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

    def __init__(self, size: int, open: Callable[[TopicId, str, str], SharedConsumer]) -> None:
        self.size, self._open = size, open
        self._parked: OrderedDict[Key, SharedConsumer] = OrderedDict()

    def take(self, key: Key) -> SharedConsumer:
        """The session's consumer: the one parked, else a new one (SubscriptionNotFound; InvalidArgument
        for an exclusive subscription)."""
        consumer = self._parked.pop(key, None)
        return consumer if consumer is not None else self._open(*key)

    def park(self, key: Key, consumer: SharedConsumer) -> None:
        self._parked.pop(key, None)
        self._parked[key] = consumer
        while len(self._parked) > self.size:
            self._parked.popitem(last=False)

    def __len__(self) -> int:
        return len(self._parked)
