"""Administration of shared subscriptions: create, read their numbers and in-flight messages, reset
and delete (behind ``MessagingClient`` and ``tms-admin sub``).

A shared subscription is created as an ordinary subscription (its mark says where it starts) plus its
settings cell; a reset moves that mark and starts a fresh incarnation at it, a deletion removes the
row and then the state rows of every incarnation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import replace

from tms_hbase.consume.subscription_admin import EARLIEST, SubscriptionAdmin
from tms_hbase.consume.subscriptions import mark_before, row_key
from tms_hbase.errors import InvalidArgument, SubscriptionNotFound
from tms_hbase.fetch.reader import MessageReader
from tms_hbase.fetch.stats import TopicStatistics
from tms_hbase.model import checks
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.rows import generation_prefix
from tms_hbase.model.stats import SharedStats
from tms_hbase.model.subscription import END, PendingMessage, Subscription, check_name
from tms_hbase.model.topic import TopicId, TopicMetadata, as_topic
from tms_hbase.shared.schedule import Schedule
from tms_hbase.shared.state import (
    SETTINGS_COLUMN,
    ClaimState,
    Keys,
    Settings,
    check_ordering,
    check_settings,
    new_incarnation,
)
from tms_hbase.shared.store import SharedStore, iter_pages


def start_position(mark: bytes | None) -> int:
    """The first position after a subscription's mark (where range 1 of a new incarnation starts)."""
    if mark is None:
        return 1
    mid = MessageId.decode(mark)
    return mid.position + 1 if mid.index == END else mid.position


class SharedAdmin:
    """Shared subscriptions of one installation."""

    def __init__(
        self,
        subscriptions: SubscriptionAdmin,
        store: SharedStore,
        reader: MessageReader,
        stats: TopicStatistics,
        topic_exists: Callable[[TopicId], object],
        clock: Callable[[], int],
    ) -> None:
        self.subscriptions = subscriptions
        self.store = store
        self.reader = reader
        self.stats_reader = stats
        self.topic_exists = topic_exists
        self.clock = clock

    def create(
        self,
        meta: TopicMetadata,
        name: str,
        start: object = EARLIEST,
        *,
        ack_timeout_seconds: object = 30.0,
        max_deliveries: object = 5,
        dead_letter: object = None,
        claim_size: object = 16,
        ordering: object = None,
    ) -> Subscription:
        """A new shared subscription (checked whole before anything is written); ``ordering="key"``: messages
        of one key one at a time, in topic order (docs/shared.md)."""
        name = check_name(name)
        ack_ms, deliveries, size = check_settings(ack_timeout_seconds, max_deliveries, claim_size)
        order = check_ordering(ordering)
        target = None if dead_letter is None else as_topic(dead_letter)
        if target == meta.topic:
            raise InvalidArgument(f"the dead-letter topic of {meta.topic} cannot be the topic itself")
        if target is not None:
            self.topic_exists(target)  # TopicNotFound
        created = self.subscriptions.create(meta, name, start)
        base = self._first_readable(meta) if created.position is None else start_position(created.position)
        settings = Settings(new_incarnation(), base, ack_ms, deliveries, target, size, order)
        self.store.swap_settings(row_key(meta.topic, meta.generation, name), None, settings)
        return created

    def settings(self, meta: TopicMetadata, name: str) -> Settings | None:
        """The settings of a shared subscription; None for an exclusive one (SubscriptionNotFound)."""
        found = self.store.settings(row_key(meta.topic, meta.generation, check_name(name)))
        if found is None:
            self.subscriptions.get(meta, name)  # SubscriptionNotFound if there is none at all
            return None
        return found[1]

    def bells(self, meta: TopicMetadata) -> list[str]:
        """Doorbell addresses of the idle consumers of the topic's shared subscriptions (publishers ring
        them, as they ring exclusive consumers)."""
        return self.store.topic_bells(generation_prefix(meta.topic, meta.generation), self.clock())

    def reset(self, meta: TopicMetadata, name: str, start_message: object, start_time: object) -> Subscription:
        """Start again at a new point with a fresh incarnation: what was in flight is void (acks of it
        are refused) and the old state rows are deleted."""
        key = row_key(meta.topic, meta.generation, check_name(name))
        found = self.store.settings(key)
        if found is None:
            raise SubscriptionNotFound(meta.topic, name)
        moved = self.subscriptions.reset(meta, name, start_message, start_time, force=True)
        renewed = found[1].renewed(start_position(moved.position) if moved.position else self._first_readable(meta))
        self.store.swap_settings(key, found[0], renewed)  # lost: a concurrent reset won, whose rows stay
        self.store.drop(key, keep=renewed.incarnation)
        return moved

    def delete(self, meta: TopicMetadata, name: str) -> None:
        """Delete it; consumers fail with SubscriptionNotFound on their next call."""
        self.subscriptions.delete(meta, name, force=True)
        self.store.drop(row_key(meta.topic, meta.generation, name))

    def listed(self, meta: TopicMetadata) -> list[Subscription]:
        """The topic's subscriptions in name order (:meth:`listed_many`)."""
        return self.listed_many([meta])[0]

    def listed_many(self, metas: Sequence[TopicMetadata]) -> list[list[Subscription]]:
        """The subscriptions of each topic of ``metas`` in name order, each shared one with its numbers
        (:meth:`stats`): their settings come from the same scan of the topics' subscription rows as the
        subscriptions, not a read (and, for an exclusive one, a second read to tell it exists) per subscription,
        nor a scan of their own."""
        found = self.subscriptions.list_many(metas, [SETTINGS_COLUMN])
        return [
            [self._with_settings(meta, subscription, cells.get(SETTINGS_COLUMN)) for subscription, cells in listed]
            for meta, listed in zip(metas, found, strict=True)
        ]

    def _with_settings(self, meta: TopicMetadata, subscription: Subscription, data: bytes | None) -> Subscription:
        """``subscription`` (as listed), with its numbers if ``data`` (its row's settings cell) makes it shared."""
        if data is None:
            return subscription
        settings = Settings.decode(data)
        keys = Keys(row_key(meta.topic, meta.generation, subscription.name), settings.incarnation)
        return replace(subscription, shared=self._stats(meta, keys, settings))

    def stats(self, meta: TopicMetadata, name: str) -> SharedStats:
        """The numbers of a shared subscription: a scan of the claims not cleared yet, plus a lag read."""
        return self._stats(meta, *self._keys(meta, name))

    def _stats(self, meta: TopicMetadata, keys: Keys, settings: Settings) -> SharedStats:
        totals, floor = self.store.totals(keys)
        first = settings.first_position(floor.value)
        first_id = bytes(MessageId(meta.generation, first, 0))
        # from the ranges not counted yet (a clearing cut short below the floor: :mod:`.clearing`) on
        counting_id = bytes(MessageId(meta.generation, settings.first_position(floor.cleared.counted), 0))
        counted = {message_id for _, message_id in floor.cleared.scheduled}  # in the totals (:mod:`.schedule`)
        uncounted = [c for c in iter_pages(self.store, keys, counting_id) if c.message_id not in counted]
        claims = [c.claim for c in uncounted if c.message_id >= first_id]
        now = self.clock()
        lag = self.stats_reader.lag(meta.topic, meta.generation, meta.ttl, mark_before(meta.generation, first, 0))
        # a shared subscription goes on past a transaction in progress: what that holds back waits too
        ahead = lag.messages + lag.held
        unsettled = [c for c in claims if not c.state.settled]
        in_flight = [c for c in unsettled if c.state is ClaimState.HELD and (c.deadline > now or c.tx is not None)]
        queued = sum(c.key is not None and c.waiting for c in unsettled)  # key order: waiting for their turn
        scheduled = [c.deadline for c in unsettled if c.scheduled(now)]
        schedule = Schedule(self.store)
        parked = schedule.later(keys, now, first_id)  # those the floor passed
        # settled: the claims not counted in the totals, those of schedule rows below the ranges not counted too
        settled = [c.claim for c in uncounted] + schedule.uncounted(keys, counting_id, floor.cleared)
        if unsettled:
            oldest = max(0.0, (now - min(c.publish_time for c in unsettled)) / 1000)
        else:
            oldest = lag.seconds if ahead > len(claims) else 0.0
        return SharedStats(
            waiting=max(0, ahead - len(claims)) + queued,
            in_flight=len(in_flight),
            due=len(unsettled) - len(in_flight) - queued - len(scheduled),
            acknowledged=totals.acked + sum(c.state is ClaimState.ACKED for c in settled),
            dead_lettered=totals.dead_lettered + sum(c.state is ClaimState.DEAD for c in settled),
            redelivered=totals.redelivered,
            oldest_unacked_seconds=oldest,
            consumers=len({c.owner for c in in_flight if c.owner is not None}),
            ack_timeout_seconds=settings.ack_timeout_ms / 1000,
            max_deliveries=settings.max_deliveries,
            dead_letter=settings.dead_letter,
            late_acks=totals.late,
            ordering=settings.ordering,
            scheduled=len(scheduled) + len(parked),
            next_scheduled_ms=min(scheduled + parked[:1], default=None),
        )

    def pending(self, meta: TopicMetadata, name: str, limit: int | None = None) -> list[PendingMessage]:
        """The messages in play (delivered, waiting or scheduled) and not settled, in id order (at most
        ``limit``): the claims from the floor on, after those of scheduled messages the floor passed."""
        checks.positive_int("limit", limit, optional=True)
        keys, settings = self._keys(meta, name)
        floor = self.store.floor(keys).value
        now = self.clock()
        out = []
        first_id = bytes(MessageId(meta.generation, settings.first_position(floor), 0))
        parked = Schedule(self.store).parked(keys, first_id)
        for stored in itertools.chain(parked, iter_pages(self.store, keys, first_id)):
            c = stored.claim
            if c.state.settled:
                continue
            state = "released" if c.state is ClaimState.FREE else ("held" if c.deadline > now else "expired")
            state = "acking" if c.tx is not None else state
            state = "undeliverable" if c.state is ClaimState.HELD and c.owner is None else state
            state = "waiting" if c.key is not None and c.waiting else state
            state = "scheduled" if c.scheduled(now) else state
            out.append(PendingMessage(stored.message_id, c.owner, c.deadline, c.deliveries, c.publish_time, state))
            if limit is not None and len(out) >= limit:
                break
        return out

    def _keys(self, meta: TopicMetadata, name: str) -> tuple[Keys, Settings]:
        key = row_key(meta.topic, meta.generation, check_name(name))
        found = self.store.settings(key)
        if found is None:
            self.subscriptions.get(meta, name)  # SubscriptionNotFound if there is none at all
            raise InvalidArgument(f"subscription {name!r} of {meta.topic} is not shared")
        return Keys(key, found[1].incarnation), found[1]

    def _first_readable(self, meta: TopicMetadata) -> int:
        """Where an "earliest" start begins: the first row not expired (not position 1 of a topic whose
        head was swept long ago, which would hand out empty ranges for every swept position)."""
        return max(1, self.reader.seek(meta.topic, meta.generation, self.clock() - meta.ttl * 1000, exact=False))
