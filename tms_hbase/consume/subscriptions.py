"""Subscriptions: a durable consume mark per topic generation and name, with the lease of the consumer
that holds it (Hedwig's subscriber nodes with their consume marks, kept in HBase).

Table ``<prefix>_subscriptions``, one row per subscription::

    key   = topic key (b"ns:topic:") | generation u32 | name           (name: [A-Za-z0-9_-]+)
    d:s   = the whole subscription as compact JSON with sorted keys (one cell)

Everything about a subscription is that one cell, because Thrift1's checkAndPut compares one cell and
applies one mutation: a commit, a lease renewal, a takeover and a reset are each one compare-and-set
on the exact bytes last read, so no two of them can interleave. The generation in the key makes a
topic's subscriptions go with it when it is deleted: a re-created topic starts with none.

A **mark** is the id of the last consumed message; every message whose id sorts after it is still to
be consumed. Marks that do not name a real message (the start of a subscription created at a time, or
at "latest") use index ``END``, which covers a whole batch row.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tms_hbase.errors import CorruptData, HBaseUnavailable, InvalidArgument, SubscriptionAlreadyExists
from tms_hbase.isolation.fate import TxFate
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.rows import generation_prefix
from tms_hbase.model.subscription import END, Pending
from tms_hbase.model.tables import FAMILY
from tms_hbase.model.topic import TopicId
from tms_hbase.storage.hbase import Table

COLUMN = f"{FAMILY}:s".encode()
TOMBSTONE = b"{}"
"""The cell of a subscription being deleted: compare-and-set to this first, so a deletion never races
a consumer taking the lease, then the row is removed."""


def row_key(topic: TopicId, generation: int, name: str) -> bytes:
    return generation_prefix(topic, generation) + name.encode()


def mark_before(generation: int, position: int, index: int) -> bytes | None:
    """The mark under which the next message to consume is ``(position, index)``; None: from the start."""
    if index > 0:
        return bytes(MessageId(generation, position, index - 1))
    if position > 1:
        return bytes(MessageId(generation, position - 1, END))
    return None


def check_mark(topic: TopicId, generation: int, mark: object) -> bytes:
    """A message id given as a mark or start point: 20 bytes of this generation, else InvalidArgument."""
    mid = MessageId.decode(mark)
    if mid.generation != generation:
        raise InvalidArgument(
            f"message id {bytes(mid).hex()} is from generation {mid.generation} of {topic}, "
            f"which is at generation {generation}"
        )
    return bytes(mid)


@dataclass(frozen=True)
class Record:
    """The stored cell of one subscription."""

    position: bytes | None  # the committed mark (None: nothing consumed yet)
    created_at: int  # ms
    updated_at: int  # ms of the last commit or reset
    owner: str | None = None  # the consumer holding the lease
    expires: int = 0  # ms (wall clock of the owner's host) when the lease runs out
    bell: str | None = None  # the owner's doorbell, "host:port" (UDP)
    pending: Pending | None = None
    bell_key: str | None = None  # the doorbell's ring key, hex: rings carrying a row are MACed with it

    def encode(self) -> bytes:
        data = {
            "position": None if self.position is None else self.position.hex(),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "owner": self.owner,
            "expires": self.expires,
            "bell": self.bell,
            "bell_key": self.bell_key,
            "pending": None if self.pending is None else self.pending.as_json(),
        }
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Record:
        try:
            d = json.loads(data)
            pending = d.get("pending")
            return cls(
                None if d["position"] is None else bytes.fromhex(d["position"]),
                int(d["created_at"]),
                int(d["updated_at"]),
                d.get("owner"),
                int(d.get("expires", 0)),
                d.get("bell"),
                None
                if pending is None
                else Pending(int(pending["tx"]), int(pending["wp"]), bytes.fromhex(pending["position"])),
                d.get("bell_key"),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptData(f"corrupt subscription cell: {exc}") from None

    def held_by_other(self, owner: str | None, now_ms: int) -> bool:
        """True while another consumer's lease has not run out."""
        return self.owner is not None and self.owner != owner and self.expires > now_ms

    def released(self) -> Record:
        return replace(self, owner=None, expires=0, bell=None, bell_key=None)


def later(current: bytes | None, mark: bytes) -> bytes:
    """The later of two marks (a mark never moves backwards)."""
    return mark if current is None or mark > current else current


def folded(record: Record, pending: Pending) -> Record:
    """The record with the committed mark ``pending`` adopted (if it is still the pending one)."""
    if record.pending != pending:
        return record
    return replace(record, position=later(record.position, pending.position), pending=None)


def resolved(record: Record, fate_of: Callable[[Pending], TxFate]) -> Record:
    """The record with its pending mark settled by its transaction's fate: committed → adopted,
    invalid → dropped, in progress → left pending (it does not count yet)."""
    if record.pending is None:
        return record
    outcome = fate_of(record.pending)
    if outcome is TxFate.COMMITTED:
        return folded(record, record.pending)
    if outcome is TxFate.INVALID:
        return replace(record, pending=None)
    return record


@dataclass(frozen=True)
class Stored:
    """A subscription's cell as read: its exact bytes (what a compare-and-set must name) and decoded."""

    key: bytes
    data: bytes
    record: Record


class SubscriptionStore:
    """Reads and compare-and-sets subscription cells in one subscriptions table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def read(self, key: bytes) -> Stored | None:
        """The subscription's cell, or None if there is none (or it is being deleted)."""
        data = self.table.get_cell(key, COLUMN)
        if data is None or data == TOMBSTONE:
            return None
        return Stored(key, data, _decode(key, data))

    def list(self, topic: TopicId, generation: int) -> list[Stored]:
        """Every subscription of one topic generation, in name order."""
        return [stored for stored, _ in self.list_many([(topic, generation)], ())[0]]

    def list_many(
        self, generations: Sequence[tuple[TopicId, int]], columns: Sequence[bytes]
    ) -> builtins.list[builtins.list[tuple[Stored, dict[bytes, bytes]]]]:  # builtins: ``list`` is the method above
        """:meth:`list` of each of ``generations`` (topic, generation), each subscription with the cells of
        ``columns`` its row holds (cells other layers keep in a subscription's row, such as a shared
        subscription's settings), in the order given: one scan, from the first generation's rows in key order
        to the last one's (a page of a topic list: the rows of topics in between that are not asked for are
        passed over), where a scan for each topic, or each column, would be a round trip each."""
        prefixes = [generation_prefix(topic, generation) for topic, generation in generations]
        if not prefixes:
            return []
        found: dict[bytes, builtins.list[tuple[Stored, dict[bytes, bytes]]]] = {prefix: [] for prefix in prefixes}
        # a name is [A-Za-z0-9_-]+: every row of a generation sorts before its prefix + 0xff
        rows = self.table.scan(min(prefixes), max(prefixes) + b"\xff", columns=[COLUMN, *columns])
        for key, d in rows:
            listed = found.get(_generation_prefix_of(key))
            if listed is not None and _is_subscription_row(key) and d.get(COLUMN, TOMBSTONE) != TOMBSTONE:
                listed.append((Stored(key, d[COLUMN], _decode(key, d[COLUMN])), d))
        return [found[prefix] for prefix in prefixes]

    def names(self) -> builtins.list[tuple[TopicId, int, str]]:  # builtins: ``list`` is the method above
        """Every subscription of every topic generation as (topic, generation, name), in key order: one scan
        of the whole table (a subscription's row key is ``ns:topic:``, its generation and its name)."""
        rows = self.table.scan(columns=[COLUMN])
        return [
            _parse_key(key)
            for key, data in rows
            if _is_subscription_row(key) and data.get(COLUMN, TOMBSTONE) != TOMBSTONE
        ]

    def create(self, topic: TopicId, name: str, key: bytes, record: Record) -> Stored:
        """Store a new subscription; SubscriptionAlreadyExists if one has that name (left unchanged)."""
        data = record.encode()
        for _ in range(3):
            if self.swap(key, None, data):
                return Stored(key, data, record)
            if self.table.get_cell(key, COLUMN) != TOMBSTONE:
                raise SubscriptionAlreadyExists(topic, name)
            if self.swap(key, TOMBSTONE, data):  # a deletion that did not finish: take its place
                return Stored(key, data, record)
        raise SubscriptionAlreadyExists(topic, name)

    def swap(self, key: bytes, old: bytes | None, new: bytes) -> bool:
        """Compare-and-set the cell from exactly ``old`` (None: no cell) to ``new``. If the answer is lost,
        the cell is read back: finding ``new`` means it was written (every new value carries a fresh time
        or lease owner, so nobody else writes the same bytes)."""
        try:
            return self.table.compare_and_set(key, COLUMN, old, new)
        except HBaseUnavailable:
            current = self.table.get_cell(key, COLUMN)
            if current == new:
                return True
            if current == old:
                return self.table.compare_and_set(key, COLUMN, old, new)
            return False

    def delete(self, stored: Stored) -> bool:
        """Delete the subscription if its cell is still exactly as read; False if it changed since."""
        if not self.swap(stored.key, stored.data, TOMBSTONE):
            return False
        self.table.delete_many([stored.key])
        return True


def _decode(key: bytes, data: bytes) -> Record:
    try:
        return Record.decode(data)
    except CorruptData as exc:
        raise CorruptData(f"{exc} (row {key!r})") from None


def _parse_key(key: bytes) -> tuple[TopicId, int, str]:
    """The topic, generation and name of a subscription's row key."""
    namespace, topic, rest = key.split(b":", 2)
    return TopicId(namespace.decode(), topic.decode()), int.from_bytes(rest[:4], "big"), rest[4:].decode()


def _generation_prefix_of(key: bytes) -> bytes:
    """The topic generation's prefix of a row key of the table (``ns:topic:`` and the generation)."""
    return key[: key.index(b":", key.index(b":") + 1) + 5]


def _is_subscription_row(key: bytes) -> bool:
    """Whether a row key of the table is a subscription's: other rows share the table, under a subscription's key
    and a 0 byte (a shared subscription's state rows, :mod:`tms_hbase.shared.state`), and one kind of them keeps
    its cell in this column too (a parked scheduled message's row); a name never holds a 0 byte."""
    return b"\x00" not in key[len(_generation_prefix_of(key)) :]


def name_of(key: bytes, topic: TopicId) -> str:
    """The subscription name at the end of a row key of ``topic``."""
    return key[len(topic.key) + 4 :].decode()
