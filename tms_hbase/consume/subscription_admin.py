"""Subscription administration: create at a start point, read with pending marks resolved, list,
reset and delete (the operations behind ``MessagingClient``'s subscription methods and ``tms-admin sub``).

Reset and delete refuse a subscription whose lease an active consumer holds (SubscriptionBusy), as
Kafka refuses to reset an active group; with ``force`` they go ahead and clear the lease too, so that
consumer fails its next write with LeaseLost instead of committing over the change.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import replace

from tms_hbase.consume.doorbell import Address, ring_key
from tms_hbase.consume.subscriptions import (
    Record,
    Stored,
    SubscriptionStore,
    check_mark,
    mark_before,
    name_of,
    resolved,
    row_key,
)
from tms_hbase.errors import ConcurrentModification, InvalidArgument, SubscriptionBusy, SubscriptionNotFound
from tms_hbase.fetch.reader import MessageReader
from tms_hbase.isolation.fate import TxFate, fate
from tms_hbase.model import checks
from tms_hbase.model.clock import check_time_ms, now_ms
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.rows import MESSAGE_COLUMN, generation_prefix, position_of
from tms_hbase.model.subscription import END, Pending, Subscription, check_name
from tms_hbase.model.topic import TopicMetadata
from tms_hbase.model.transaction import Transaction
from tms_hbase.storage.hbase import Table

EARLIEST = "earliest"
LATEST = "latest"
_MAX_ROUNDS = 100


class SubscriptionAdmin:
    """Subscriptions of one installation. ``tx_state`` gives the transaction state used to resolve
    pending marks (rebuilt from HBase: no transaction server is needed to read a subscription)."""

    def __init__(
        self, store: SubscriptionStore, messages: Table, reader: MessageReader, tx_state: Callable[[], Transaction]
    ) -> None:
        self.store = store
        self.messages = messages
        self.reader = reader
        self.tx_state = tx_state

    def create(self, meta: TopicMetadata, name: str, start: object = EARLIEST) -> Subscription:
        """A new subscription that consumes from ``start``: "earliest" (every readable message),
        "latest" (only messages published from now on) or a publish time in ms (messages published then
        or later). SubscriptionAlreadyExists if the name is taken."""
        name = check_name(name)
        mark = self._start_mark(meta, start)
        now = now_ms()
        key = row_key(meta.topic, meta.generation, name)
        stored = self.store.create(meta.topic, name, key, Record(mark, now, now))
        return _public(meta, name, stored.record, self.reader.hbase_now())

    def get(self, meta: TopicMetadata, name: str) -> Subscription:
        stored = self._read(meta, name)
        return _public(meta, name, resolved(stored.record, self._fate_reader()), self.reader.hbase_now())

    def list(self, meta: TopicMetadata) -> list[Subscription]:
        return [subscription for subscription, _ in self.list_many([meta], ())[0]]

    def list_many(
        self, metas: Sequence[TopicMetadata], columns: Sequence[bytes]
    ) -> builtins.list[builtins.list[tuple[Subscription, dict[bytes, bytes]]]]:  # builtins: the method above
        """:meth:`list` of each topic of ``metas`` (in their generations), each subscription with the cells of
        ``columns`` its row holds: one scan (:meth:`SubscriptionStore.list_many`)."""
        fate_of = self._fate_reader()
        now = self.reader.hbase_now()
        found = self.store.list_many([(meta.topic, meta.generation) for meta in metas], columns)
        return [
            [
                (_public(meta, name_of(s.key, meta.topic), resolved(s.record, fate_of), now), cells)
                for s, cells in listed
            ]
            for meta, listed in zip(metas, found, strict=True)
        ]

    def bells(self, meta: TopicMetadata) -> builtins.list[Address]:  # list: the method above
        """Doorbells of the topic's consumers whose lease has not run out, with their ring keys."""
        now = self.reader.hbase_now()
        return [
            Address(s.record.bell, ring_key(s.record.bell_key))
            for s in self.store.list(meta.topic, meta.generation)
            if s.record.bell and s.record.expires > now
        ]

    def reset(
        self,
        meta: TopicMetadata,
        name: str,
        start_message: object = None,
        start_time: object = None,
        *,
        force: bool = False,
    ) -> Subscription:
        """Move the mark so the next message delivered is ``start_message`` (an id; or "earliest" /
        "latest"), or the first published at ``start_time`` (ms) or later. Any pending mark is dropped."""
        checks.reset_start(start_message, start_time)
        if start_time is not None:
            mark = self._start_mark(meta, start_time)
        elif start_message in (EARLIEST, LATEST):
            mark = self._start_mark(meta, start_message)
        else:
            mid = MessageId.decode(check_mark(meta.topic, meta.generation, start_message))
            if mid.position > self._tail(meta):
                raise InvalidArgument(f"message id {bytes(mid).hex()} is past the end of {meta.topic}")
            mark = mark_before(mid.generation, mid.position, mid.index)

        def step(record: Record) -> Record:
            new = replace(record, position=mark, pending=None, updated_at=now_ms())
            return new.released() if force else new

        return _public(meta, name, self._change(meta, name, step, force), self.reader.hbase_now())

    def release(self, meta: TopicMetadata, name: str) -> Subscription:
        """Clear the lease, whoever holds it; the mark and any pending mark stay."""
        return _public(meta, name, self._change(meta, name, Record.released, True), self.reader.hbase_now())

    def delete(self, meta: TopicMetadata, name: str, *, force: bool = False) -> None:
        """Delete the subscription (SubscriptionNotFound if there is none)."""
        for _ in range(_MAX_ROUNDS):
            stored = self._read(meta, name)
            _check_free(meta, name, stored.record, force, self.reader.hbase_now())
            if self.store.delete(stored):
                return
        raise ConcurrentModification(f"delete subscription {name!r} of {meta.topic}: it kept changing")

    # -- helpers --------------------------------------------------------------------------------

    def _read(self, meta: TopicMetadata, name: str) -> Stored:
        stored = self.store.read(row_key(meta.topic, meta.generation, check_name(name)))
        if stored is None:
            raise SubscriptionNotFound(meta.topic, name)
        return stored

    def _change(self, meta: TopicMetadata, name: str, step: Callable[[Record], Record], force: bool) -> Record:
        for _ in range(_MAX_ROUNDS):
            stored = self._read(meta, name)
            _check_free(meta, name, stored.record, force, self.reader.hbase_now())
            new = step(stored.record)
            if self.store.swap(stored.key, stored.data, new.encode()):
                return new
        raise ConcurrentModification(f"change subscription {name!r} of {meta.topic}: it kept changing")

    def _start_mark(self, meta: TopicMetadata, start: object) -> bytes | None:
        """The mark before the first message to consume from ``start``."""
        if start == EARLIEST:
            return None
        if start == LATEST:
            tail = self._tail(meta)
            return None if tail == 0 else bytes(MessageId(meta.generation, tail, END))
        if isinstance(start, str):
            raise InvalidArgument(f"bad start {start!r}: expected 'earliest', 'latest' or a publish time in ms")
        position = self.reader.seek(meta.topic, meta.generation, check_time_ms("start", start))
        return mark_before(meta.generation, position, 0)

    def _tail(self, meta: TopicMetadata) -> int:
        """The position of the topic's last batch row (0 if it has none)."""
        found = self.messages.last_row(generation_prefix(meta.topic, meta.generation), [MESSAGE_COLUMN])
        return 0 if found is None else position_of(found[0])

    def _fate_reader(self) -> Callable[[Pending], TxFate]:
        """Resolves pending marks with one transaction-state read, made only if a mark is pending."""
        state: list[Transaction] = []

        def fate_of(pending: Pending) -> TxFate:
            if not state:
                state.append(self.tx_state())
            return fate(state[0], pending.write_pointer)

        return fate_of


def _check_free(meta: TopicMetadata, name: str, record: Record, force: bool, now: int) -> None:
    if not force and record.held_by_other(None, now):
        raise SubscriptionBusy(
            f"subscription {name!r} of {meta.topic} has an active consumer ({record.owner}, lease for "
            f"{(record.expires - now) / 1000:.1f} s more); stop it first, or force the change"
        )


def _public(meta: TopicMetadata, name: str, record: Record, now: int) -> Subscription:
    held = record.owner is not None and record.expires > now
    return Subscription(
        meta.topic,
        name,
        record.position,
        record.updated_at,
        record.created_at,
        meta.generation,
        record.owner if held else None,
        record.expires if held else None,
        record.pending,
    )
