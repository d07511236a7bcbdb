"""Subscriptions as users see them: the name check, a subscription with its committed and pending marks,
one message in flight in a shared subscription, and a detached exclusive consumer's session. Values only:
:mod:`tms_hbase.consume.subscriptions` stores them and :mod:`tms_hbase.shared.admin` lists the messages in
flight."""

from __future__ import annotations

from dataclasses import dataclass

from tms_hbase.errors import InvalidArgument
from tms_hbase.model.stats import SharedStats
from tms_hbase.model.topic import MAX_NAME_LENGTH, NAME, TopicId

END = 2**64 - 1
"""Index of a mark that covers a whole batch row."""


def check_name(name: object) -> str:
    """A subscription name is ``[A-Za-z0-9_-]+`` like topic names; anything else is InvalidArgument."""
    if not isinstance(name, str) or not NAME.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        raise InvalidArgument(
            f"bad subscription name {name!r}: use 1-{MAX_NAME_LENGTH} of the characters A-Z a-z 0-9 _ -"
        )
    return name


@dataclass(frozen=True)
class Pending:
    """A mark committed inside a transaction: it counts once that transaction has committed, never if it
    was invalidated, and not yet while it is in progress."""

    tx_id: int
    write_pointer: int
    position: bytes

    def as_json(self) -> dict:
        return {"tx": self.tx_id, "wp": self.write_pointer, "position": self.position.hex()}


@dataclass(frozen=True)
class Subscription:
    """A subscription as users see it. ``position`` is the committed mark: the id of the last consumed
    message (every message with a greater id is still to be consumed), None if nothing was consumed.
    ``owner`` and ``lease_expires`` name the active consumer, if any; ``pending`` is a mark committed
    in a transaction that has not finished yet. ``shared``: a shared subscription's numbers (None for
    an exclusive one), whose mark stays where it started."""

    topic: TopicId
    name: str
    position: bytes | None
    updated_at: int
    created_at: int = 0
    generation: int = 0
    owner: str | None = None
    lease_expires: int | None = None
    pending: Pending | None = None
    shared: SharedStats | None = None


@dataclass(frozen=True)
class ConsumerSession:
    """What a detached consumer hands on so that a later call, possibly in another process, goes on as the
    same consumer: its lease owner and the last message it delivered (the gateway passes it to its HTTP
    client between requests). See :meth:`tms_hbase.consume.consumer.Consumer.detach`."""

    owner: str
    delivered: bytes | None


@dataclass(frozen=True)
class PendingMessage:
    """One message delivered and not settled (``tms-admin sub pending``, like Redis's XPENDING)."""

    id: bytes
    owner: str | None
    deadline: int  # HBase ms
    deliveries: int
    publish_time: int
    state: str  # "held", "expired" (held past its deadline), "released" (given back, due at deadline),
    # "acking" (acknowledged in a transaction not finished yet) or "undeliverable" (past max_deliveries and
    # kept: its dead-letter topic could not take it; tried again after ``deadline``)
