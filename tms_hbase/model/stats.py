"""The numbers the library reports: a subscription's lag, what a topic holds, a shared subscription's
numbers and what a background publisher did. Values only: :mod:`tms_hbase.fetch.stats`,
:mod:`tms_hbase.shared.admin` and :mod:`tms_hbase.publish.background` compute them."""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field

from tms_hbase.model.topic import TopicId


@dataclass(frozen=True)
class Lag:
    """How far a subscription is behind, counting what a committed-only reader will receive (rolled-back
    messages and those of invalid transactions are left out). ``messages``: what it can receive now, up to
    the first message of a transaction still in progress (Kafka's lag up to the last stable offset);
    ``held``: the messages from there on, held until that transaction ends (its own are left out if it
    rolls back); ``seconds``: the age of the oldest of them all (0 when there is none). ``exact`` is False
    where rows without totals were involved or the transaction state could not be read."""

    messages: int
    seconds: float
    exact: bool = True
    held: int = 0


@dataclass(frozen=True)
class TopicStats:
    """What a topic holds now (its current generation, readable messages only)."""

    topic: TopicId
    generation: int
    ttl: int
    first_position: int | None  # first readable batch row (None: the topic has no readable message)
    first_publish_time: int | None
    last_position: int | None  # the tail row
    last_publish_time: int | None
    messages: int  # committed ones: not rolled back, of no invalid transaction and of none in progress
    bytes: int
    rates: dict[int, float] = field(default_factory=dict)  # window seconds -> messages per second (all published)
    subscriptions: list[tuple[str, builtins.bytes | None, Lag]] = field(default_factory=list)  # (name, mark, lag)
    exact: bool = True  # the message counts (and every subscription's lag) are exact
    # messages ever published to this generation (None: rows without totals); on a sequencer generation the offsets
    # handed out up to the newest row, skip markers included (an upper bound: the swept markers' spans are not kept)
    published: int | None = None
    bytes_exact: bool = True  # ``bytes`` is exact (False: estimated, as in sequencer generations)
    uncommitted: int = 0  # readable messages of transactions still in progress (not in ``messages``)


@dataclass(frozen=True)
class SharedStats:
    """A shared subscription's numbers. ``waiting``: not delivered yet; ``in_flight``: held by a
    consumer before its deadline; ``due``: given back or past their deadline, to be delivered again;
    ``acknowledged``, ``dead_lettered``, ``redelivered``: totals since creation or the last reset;
    ``oldest_unacked_seconds``: age of the oldest message not settled (0 when none);
    ``consumers``: distinct holders of in-flight messages; ``late_acks``: settlements (ack, nack, release,
    extend, transactional ack) refused because their delivery no longer held the message (its deadline
    passed, it was delivered again, or it was settled already), since creation or the last reset;
    ``ordering``: "key" for a key-ordered subscription (messages of a key waiting for their turn count as
    ``waiting``), else None; ``scheduled``: messages not due yet (docs/shared.md, "Scheduled delivery",
    counted up to 10,000 past the ranges in play), ``next_scheduled_ms``: the first one's time (HBase ms).

    ``acknowledged`` and ``dead_lettered`` are exact whatever step a consumer is killed at; ``redelivered``
    and ``late_acks`` are lower bounds, never over: each is counted by an increment after the write it counts,
    so a consumer killed (or an HBase call failing) in between loses at most the ``max_messages`` of that
    receive's redeliveries, or that one refusal."""

    waiting: int
    in_flight: int
    due: int
    acknowledged: int
    dead_lettered: int
    redelivered: int
    oldest_unacked_seconds: float
    consumers: int
    ack_timeout_seconds: float
    max_deliveries: int
    dead_letter: TopicId | None
    late_acks: int = 0
    ordering: str | None = None
    scheduled: int = 0
    next_scheduled_ms: int | None = None


@dataclass
class PublisherStats:
    """What the publisher did so far (read it any time; the numbers only grow)."""

    published: int = 0  # messages stored
    batches: int = 0  # batch rows written
    retries: int = 0  # publish attempts repeated after an HBase failure
    dropped_full: int = 0  # messages dropped because the queue was full (on_full="drop")
    dropped_failed: int = 0  # messages dropped after retries ran out (on_give_up="drop")
    failed: int = 0  # messages whose future got an error (abandoned ones included)
    abandoned: int = 0  # messages not sent because close()'s deadline passed (their futures: PublisherClosed)
