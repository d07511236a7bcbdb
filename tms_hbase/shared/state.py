"""The stored state of a shared subscription: its settings, range cells and claim cells (no I/O).

A shared subscription is an ordinary subscription row (so listing, deleting and the sweeper's
old-generation rule cover it) with one more cell, ``d:w``, holding its :class:`Settings`. Its work
state lives in rows of the same table whose keys extend the subscription's row key::

    <subscription key> 0x00 <incarnation, 8 bytes> b"c"            d:n  ranges handed out (a counter)
                                                                    d:a, d:x, d:r, d:l  acknowledged, dead-lettered,
                                                                                   redelivered and late-settlement
                                                                                   totals
    <subscription key> 0x00 <incarnation> b"f"                      d:f  the floor: every range below it is done
                                                                    d:c  how far clearing the ranges below it went
                                                                         (:class:`Cleared`)
    <subscription key> 0x00 <incarnation> b"r" <range u64>          d:r  a range cell (JSON)
    <subscription key> 0x00 <incarnation> b"m" <message id>         d:m  a claim cell (JSON)
    <subscription key> 0x00 <incarnation> b"b" <consumer>           d:b  an idle consumer's doorbell (JSON)
    <subscription key> 0x00 <incarnation> b"s" <due u64> <message id>  d:s  a scheduled message the floor passed
                                                                    (:mod:`.schedule`)

Names are ``[A-Za-z0-9_-]+``, so the 0x00 keeps one subscription's state rows apart from any other
name's. The **incarnation** is random per creation and per reset: a reset or a re-created subscription
starts on fresh rows, and an acknowledgement that names an old incarnation is refused.

**Ranges.** The topic's positions from ``base`` on are cut into ranges of ``claim_size`` positions;
range k (from 1) is ``base + (k-1)·claim_size`` .. ``base + k·claim_size - 1``. A message belongs to
the range holding its id's position (a sequencer row spanning several offsets belongs where its key
is), so every message is in exactly one range. Ranges are handed out by an atomic increment of the
counter, so consumers do not queue on one compare-and-set to find new work.

**Claims.** A message is delivered by writing its claim cell: created if absent (first delivery) or
compare-and-set from the exact bytes read (a redelivery, an acknowledgement, a nack, a deadline
extension). Every time in these cells is HBase's clock (:mod:`~tms_hbase.installation.hbase_clock`).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum
from functools import cached_property, lru_cache

from tms_hbase.errors import CorruptData, InvalidArgument
from tms_hbase.model.message_id import ID_LENGTH
from tms_hbase.model.tables import FAMILY
from tms_hbase.model.topic import TopicId, as_topic

SETTINGS_COLUMN = f"{FAMILY}:w".encode()
COUNTER_COLUMN = f"{FAMILY}:n".encode()
ACKED_COLUMN = f"{FAMILY}:a".encode()
DEAD_COLUMN = f"{FAMILY}:x".encode()
REDELIVERED_COLUMN = f"{FAMILY}:r".encode()
LATE_COLUMN = f"{FAMILY}:l".encode()
FLOOR_COLUMN = f"{FAMILY}:f".encode()
CLEARED_COLUMN = f"{FAMILY}:c".encode()  # in the floor row
RANGE_COLUMN = f"{FAMILY}:r".encode()
CLAIM_COLUMN = f"{FAMILY}:m".encode()
BELL_COLUMN = f"{FAMILY}:b".encode()
SCHEDULE_COLUMN = f"{FAMILY}:s".encode()

_U64 = struct.Struct(">Q")
_CLEARED = struct.Struct(">4Q")
_SCHEDULED_ROW = 8 + ID_LENGTH  # a schedule row in the clearing mark: its due time and message id
MAX_DELIVERIES_LIMIT = 1000
MAX_CLAIM_SIZE = 100_000
MIN_ACK_TIMEOUT_MS = 100
MAX_HOLD_SECONDS = 7 * 86400  # the longest a message is held or kept back: ack timeout, extension, nack delay
ORDERINGS = ("key",)  # a shared subscription's ``ordering``: None (none) or one of these


@dataclass(frozen=True)
class Settings:
    """What makes a subscription shared, fixed at creation (a reset keeps them, with a new incarnation
    and base). ``ack_timeout_ms``: how long a delivery is held before it goes to another consumer;
    ``max_deliveries``: deliveries after which a message is dead-lettered; ``dead_letter``: the topic
    dead letters go to (None: they are only counted); ``claim_size``: positions per range; ``base``:
    the first position of range 1; ``ordering``: "key" for messages of one key delivered one at a time
    in topic order (:mod:`.key_order`), None for no order."""

    incarnation: bytes
    base: int
    ack_timeout_ms: int
    max_deliveries: int
    dead_letter: TopicId | None
    claim_size: int
    ordering: str | None = None

    def encode(self) -> bytes:
        data: dict[str, object] = {
            "incarnation": self.incarnation.hex(),
            "base": self.base,
            "ack_timeout_ms": self.ack_timeout_ms,
            "max_deliveries": self.max_deliveries,
            "dead_letter": None if self.dead_letter is None else str(self.dead_letter),
            "claim_size": self.claim_size,
        }
        if self.ordering is not None:  # (absent: as the settings of subscriptions made before ordering existed)
            data["ordering"] = self.ordering
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Settings:
        try:
            d = json.loads(data)
            return cls(
                bytes.fromhex(d["incarnation"]),
                int(d["base"]),
                int(d["ack_timeout_ms"]),
                int(d["max_deliveries"]),
                None if d["dead_letter"] is None else as_topic(d["dead_letter"]),
                int(d["claim_size"]),
                check_ordering(d.get("ordering")),
            )
        except (ValueError, KeyError, TypeError, AttributeError, InvalidArgument) as exc:
            raise CorruptData(f"corrupt shared-subscription settings: {exc}") from None

    def range_of(self, position: int) -> int:
        """The range holding ``position`` (0: before range 1)."""
        if position < self.base:
            return 0
        return (position - self.base) // self.claim_size + 1

    def first_position(self, k: int) -> int:
        return self.base + (k - 1) * self.claim_size

    def last_position(self, k: int) -> int:
        return self.base + k * self.claim_size - 1

    def renewed(self, base: int) -> Settings:
        """The settings after a reset: a fresh incarnation starting at ``base``."""
        return replace(self, incarnation=new_incarnation(), base=base)


def new_incarnation() -> bytes:
    return os.urandom(8)


def check_settings(ack_timeout_seconds: object, max_deliveries: object, claim_size: object) -> tuple[int, int, int]:
    """Validated ``(ack_timeout_ms, max_deliveries, claim_size)``; InvalidArgument names the bad one."""
    ack_timeout_ms = hold_ms("ack_timeout_seconds", ack_timeout_seconds, minimum=MIN_ACK_TIMEOUT_MS / 1000)
    if (
        isinstance(max_deliveries, bool)
        or not isinstance(max_deliveries, int)
        or not 1 <= max_deliveries <= MAX_DELIVERIES_LIMIT
    ):
        raise InvalidArgument(f"bad max_deliveries {max_deliveries!r}: expected 1..{MAX_DELIVERIES_LIMIT}")
    if isinstance(claim_size, bool) or not isinstance(claim_size, int) or not 1 <= claim_size <= MAX_CLAIM_SIZE:
        raise InvalidArgument(f"bad claim_size {claim_size!r}: expected 1..{MAX_CLAIM_SIZE} positions")
    return ack_timeout_ms, max_deliveries, claim_size


def check_ordering(ordering: object) -> str | None:
    """A shared subscription's ``ordering``: None or "key"; InvalidArgument otherwise."""
    if ordering is not None and ordering not in ORDERINGS:
        raise InvalidArgument(f"bad ordering {ordering!r}: expected None or one of {', '.join(map(repr, ORDERINGS))}")
    return ordering


def key_of(key: bytes | None) -> str | None:
    """What a claim of a key-ordered subscription records of its message's key: a 64-bit hash, in hex
    (a key is up to 4 KiB; two keys of one hash are only ordered together, never apart). None: no key."""
    return None if key is None else hashlib.blake2b(key, digest_size=8).hexdigest()


def hold_ms(name: str, seconds: object, *, minimum: float = 0.0) -> int:
    """``seconds`` a message is held or kept back (an ack timeout, an extension, a nack's delay), in ms:
    InvalidArgument unless it is a number from ``minimum`` to a week (a longer time, once its holder dies,
    would keep the message from every consumer)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not minimum <= seconds <= MAX_HOLD_SECONDS:
        raise InvalidArgument(f"bad {name} {seconds!r}: expected {minimum:g} to {MAX_HOLD_SECONDS} seconds (a week)")
    return int(seconds * 1000)


class ClaimState(Enum):
    HELD = "h"  # delivered to ``owner`` until ``deadline``; once past it, free for another delivery
    FREE = "f"  # released or nacked: deliverable again from ``deadline`` on (no owner)
    ACKED = "a"  # settled: acknowledged
    DEAD = "d"  # settled: dead-lettered after ``deliveries`` deliveries

    @property
    def settled(self) -> bool:
        return self in (ClaimState.ACKED, ClaimState.DEAD)


@dataclass(frozen=True)
class Claim:
    """One message's claim cell. ``deliveries`` counts the deliveries made so far; ``publish_time``
    (ms) is kept for the age of the oldest unacknowledged message; ``tx`` is a transaction's write
    pointer when the acknowledgement is pending in a transaction; ``incarnation`` names the delivery
    that holds it (:func:`new_delivery`, fresh for every delivery, kept by an extension): a settlement
    that names another delivery is refused (a fenced acknowledgement). 0 in a cell written before
    deliveries were named. ``key``: its message's key (:func:`key_of`) in a key-ordered subscription,
    else None."""

    state: ClaimState
    owner: str | None
    deadline: int  # HBase ms
    deliveries: int
    publish_time: int
    tx: int | None = None
    incarnation: int = 0
    key: str | None = None

    def encode(self) -> bytes:
        """JSON with sorted keys and no spaces (what the reap's filter and :func:`decode` expect), written
        out rather than through ``json.dumps`` of a dict: one is made for every delivery and settlement."""
        owner = "null" if self.owner is None else _json_string(self.owner)
        tx = "" if self.tx is None else f',"tx":{int(self.tx)}'
        incarnation = f',"i":{int(self.incarnation)}' if self.incarnation else ""
        key = "" if self.key is None else f',"k":"{self.key}"'
        return (
            f'{{"d":{int(self.deadline)}{incarnation}{key},"n":{int(self.deliveries)},"o":{owner},'
            f'"s":"{self.state.value}","t":{int(self.publish_time)}{tx}}}'
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> Claim:
        """The claim in a cell's bytes (the same bytes, the same claim: a reap reads the claims in play again
        and again, so the latest few thousand are kept decoded)."""
        return _claim_of(data)

    @classmethod
    def _parse(cls, data: bytes) -> Claim:
        try:
            d = json.loads(data)
            tx, key = d.get("tx"), d.get("k")
            if key is not None and not isinstance(key, str):
                raise TypeError(f"key {key!r}")
            return cls(
                ClaimState(d["s"]),
                d["o"],
                int(d["d"]),
                int(d["n"]),
                int(d["t"]),
                None if tx is None else int(tx),
                int(d.get("i", 0)),
                key,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptData(f"corrupt claim cell: {exc}") from None

    def acked(self) -> Claim:
        """This claim acknowledged (what an ``ack`` writes; made on every one, without ``replace``'s cost)."""
        return Claim(
            ClaimState.ACKED,
            self.owner,
            self.deadline,
            self.deliveries,
            self.publish_time,
            self.tx,
            self.incarnation,
            self.key,
        )

    def available(self, now: int) -> bool:
        """True if another delivery may take it now (held past its deadline, or free and due)."""
        return not self.state.settled and self.tx is None and self.deadline <= now

    def scheduled(self, now: int) -> bool:
        """A scheduled message not due at ``now``: never delivered, free from its delivery time on (the only
        claims written free with a deadline ahead; given back ones are due at once, nacked ones counted)."""
        return self.state is ClaimState.FREE and self.deliveries == 0 and self.deadline > now

    @property
    def waiting(self) -> bool:
        """Never delivered: a key-ordered subscription's message waiting for its turn (or a claim given
        back before its delivery)."""
        return self.state is ClaimState.FREE and self.deliveries == 0

    def held_by(self, owner: str, now: int, incarnation: int | None = None) -> bool:
        """Held by ``owner`` before its deadline, not pending in a transaction, and (unless
        ``incarnation`` is None: not known to the caller) by that delivery."""
        return (
            self.state is ClaimState.HELD
            and self.owner == owner
            and self.deadline > now
            and self.tx is None
            and (incarnation is None or incarnation == self.incarnation)
        )


@lru_cache(maxsize=16_384)
def _claim_of(data: bytes) -> Claim:
    return Claim._parse(data)


def new_delivery() -> int:
    """A fresh delivery incarnation: random, 52 bits (exact in JSON numbers everywhere), never 0 (which
    stands for a delivery not named). A consumer that took the same message again, another process of
    the same owner, or a subscription reset and delivering again are told apart by it."""
    return random.getrandbits(52) or 1


@lru_cache(maxsize=256)
def _json_string(text: str) -> str:
    """``text`` as a JSON string: an owner's, written into every claim it makes (the few names of a process's
    consumers, encoded once)."""
    return json.dumps(text)


@dataclass(frozen=True)
class RangeCell:
    """Who reads a range of positions, until when, how far (``progress``: the last message id whose
    claim was written, or None), and whether it was read to its end (``read``)."""

    owner: str | None
    deadline: int
    progress: bytes | None
    read: bool = False

    def encode(self) -> bytes:
        data = {
            "o": self.owner,
            "d": self.deadline,
            "p": None if self.progress is None else self.progress.hex(),
            "r": self.read,
        }
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> RangeCell:
        try:
            d = json.loads(data)
            return cls(d["o"], int(d["d"]), None if d["p"] is None else bytes.fromhex(d["p"]), bool(d["r"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptData(f"corrupt range cell: {exc}") from None

    def takeable(self, now: int) -> bool:
        """Not read to its end, and nobody reads it (released, or its reader's deadline passed)."""
        return not self.read and (self.owner is None or self.deadline <= now)


@dataclass(frozen=True)
class Cleared:
    """How far the clearing of the ranges the floor passed went (:mod:`.clearing`): ranges below ``counted``
    had their settled claims counted, into ``acked`` and ``dead`` here, so that a count and the mark move
    in one compare-and-set of one cell (never twice, never lost); ranges below ``deleted`` had their range
    cells and those claims deleted. ``deleted <= counted <= floor``. A subscription whose floor was last
    raised before the mark existed has none: its raises cleared what they passed (:meth:`at`).

    ``scheduled``: the schedule rows (due time, message id) whose settled claims were counted here by the
    same compare-and-set, and whose rows and claims are being deleted (:mod:`.schedule`); empty once they
    are."""

    deleted: int
    counted: int
    acked: int = 0
    dead: int = 0
    scheduled: tuple[tuple[int, bytes], ...] = ()

    @classmethod
    def at(cls, floor: int) -> Cleared:
        """The mark of a floor with everything below it cleared (where a subscription without one starts)."""
        return cls(floor, floor)

    def encode(self) -> bytes:
        rows = b"".join(_U64.pack(due) + message_id for due, message_id in self.scheduled)
        return _CLEARED.pack(self.deleted, self.counted, self.acked, self.dead) + rows

    @classmethod
    def decode(cls, data: bytes) -> Cleared:
        rows = len(data) - _CLEARED.size
        if rows < 0 or rows % _SCHEDULED_ROW != 0:
            raise CorruptData(f"corrupt clearing mark {data!r}")
        deleted, counted, acked, dead = _CLEARED.unpack_from(data)
        if deleted > counted:
            raise CorruptData(f"corrupt clearing mark: deleted up to range {deleted}, counted up to {counted}")
        scheduled = tuple(
            (_U64.unpack_from(data, at)[0], data[at + 8 : at + _SCHEDULED_ROW])
            for at in range(_CLEARED.size, len(data), _SCHEDULED_ROW)
        )
        return cls(deleted, counted, acked, dead, scheduled)

    def counting(self, stop: int, acked: int, dead: int) -> Cleared:
        """The mark once the ranges from ``counted`` up to ``stop`` are counted, with their claims' numbers."""
        if stop <= self.counted:
            raise ValueError(f"ranges up to {stop} counted already (up to {self.counted})")
        return replace(self, counted=stop, acked=self.acked + acked, dead=self.dead + dead)

    def deleting(self) -> Cleared:
        """The mark once the ranges counted are deleted too."""
        return replace(self, deleted=self.counted)

    def counting_scheduled(self, rows: Sequence[tuple[int, bytes]], acked: int, dead: int) -> Cleared:
        """The mark once the settled claims of schedule ``rows`` (due time, message id) are counted, with
        their numbers; their deletion pending."""
        if self.scheduled:
            raise ValueError(f"the deletion of {len(self.scheduled)} counted schedule rows is not done")
        return replace(self, acked=self.acked + acked, dead=self.dead + dead, scheduled=tuple(rows))

    def deleting_scheduled(self) -> Cleared:
        """The mark once the schedule rows counted are deleted, with their claims."""
        return replace(self, scheduled=())


@dataclass(frozen=True)
class Keys:
    """Row keys of one incarnation of one shared subscription."""

    subscription: bytes
    incarnation: bytes

    @cached_property
    def prefix(self) -> bytes:
        return self.subscription + b"\x00" + self.incarnation

    @property
    def counter(self) -> bytes:
        return self.prefix + b"c"

    @property
    def floor(self) -> bytes:
        return self.prefix + b"f"

    def range(self, k: int) -> bytes:
        return self.prefix + b"r" + _U64.pack(k)

    @property
    def ranges(self) -> bytes:
        return self.prefix + b"r"

    def claim(self, message_id: bytes) -> bytes:
        return self.claims + message_id

    @cached_property
    def claims(self) -> bytes:
        return self.prefix + b"m"

    def bell(self, owner: str) -> bytes:
        return self.prefix + b"b" + owner.encode()

    @property
    def bells(self) -> bytes:
        return self.prefix + b"b"

    @cached_property
    def schedule(self) -> bytes:
        return self.prefix + b"s"

    def scheduled(self, due: int, message_id: bytes = b"") -> bytes:
        """The schedule row of a message due at ``due`` (HBase ms); with no id, where rows due then begin."""
        return self.schedule + _U64.pack(due) + message_id

    def due_and_id(self, key: bytes) -> tuple[int, bytes]:
        return _U64.unpack_from(key, len(self.schedule))[0], key[len(self.schedule) + 8 :]

    def range_number(self, key: bytes) -> int:
        return _U64.unpack_from(key, len(self.ranges))[0]

    def bell_owner(self, key: bytes) -> str:
        return key[len(self.bells) :].decode(errors="replace")

    def message_id(self, key: bytes) -> bytes:
        return key[len(self.claims) :]


def state_prefix(subscription_key: bytes) -> bytes:
    """The prefix of every incarnation's state rows of one subscription."""
    return subscription_key + b"\x00"


def position_of_id(message_id: bytes) -> int:
    """The position of a stored message id (a claim's row key: a reap reads thousands, so no checks)."""
    return int(_U64.unpack_from(message_id, 4)[0])


def encode_u64(value: int) -> bytes:
    return _U64.pack(value)


def decode_u64(data: bytes | None) -> int:
    if data is None:
        return 0
    if len(data) != 8:
        raise CorruptData(f"corrupt 64-bit cell {data!r}")
    return int(_U64.unpack(data)[0])
