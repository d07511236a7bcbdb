"""Reads and writes of a shared subscription's state rows (:mod:`.state`) in the subscriptions table.

Every change of a range or claim cell is one compare-and-set on the exact bytes last read (or
create-if-absent); a lost answer is settled by reading the cell back, as the subscription store does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tms_hbase.errors import HBaseUnavailable
from tms_hbase.shared.state import (
    ACKED_COLUMN,
    BELL_COLUMN,
    CLAIM_COLUMN,
    CLEARED_COLUMN,
    COUNTER_COLUMN,
    DEAD_COLUMN,
    FLOOR_COLUMN,
    LATE_COLUMN,
    RANGE_COLUMN,
    REDELIVERED_COLUMN,
    SETTINGS_COLUMN,
    Claim,
    Cleared,
    Keys,
    RangeCell,
    Settings,
    decode_u64,
    encode_u64,
    state_prefix,
)
from tms_hbase.storage.hbase import KEYS_ONLY, Table

SCAN_LIMIT = 10_000  # rows per scan of one subscription's open ranges or claims
# the region servers pass only claims not settled (held or given back): a claim cell is JSON with sorted
# keys, its state in "s" (ClaimState's values)
UNSETTLED = 'ValueFilter(=, \'regexstring:"s":"[hf]"\')'
SETTLED = 'ValueFilter(=, \'regexstring:"s":"[ad]"\')'  # acknowledged or dead-lettered
CLAIM_WAYS = 4  # connections a read's claims are written over at once (a client's pool has 8 by default)
CLAIMS_PER_WAY = 8  # claims a connection gets at least, before another is used


@dataclass(frozen=True)
class StoredClaim:
    message_id: bytes
    data: bytes
    claim: Claim


@dataclass(frozen=True)
class StoredRange:
    k: int
    data: bytes
    cell: RangeCell


@dataclass(frozen=True)
class Floor:
    """The floor row as one read saw it: the floor cell's bytes and value (every range below it is done; 1
    when none is), and the clearing mark's bytes (None: not written yet) and value."""

    data: bytes | None
    value: int
    mark: bytes | None
    cleared: Cleared

    @classmethod
    def of(cls, cells: dict[bytes, bytes]) -> Floor:
        data, mark = cells.get(FLOOR_COLUMN), cells.get(CLEARED_COLUMN)
        value = max(1, decode_u64(data))
        return cls(data, value, mark, Cleared.at(value) if mark is None else Cleared.decode(mark))


@dataclass(frozen=True)
class Totals:
    acked: int
    dead_lettered: int
    redelivered: int
    late: int  # settlements refused because their delivery no longer held the message


class SharedStore:
    """The state rows of shared subscriptions in one subscriptions table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    # -- settings -------------------------------------------------------------------------------

    def settings(self, subscription_key: bytes) -> tuple[bytes, Settings] | None:
        """The settings cell (exact bytes and decoded), None for an exclusive or missing subscription."""
        data = self.table.get_cell(subscription_key, SETTINGS_COLUMN)
        return None if data is None else (data, Settings.decode(data))

    def swap_settings(self, subscription_key: bytes, old: bytes | None, new: Settings) -> bool:
        return self._swap(subscription_key, SETTINGS_COLUMN, old, new.encode())

    # -- counters -------------------------------------------------------------------------------

    def handed_out(self, keys: Keys) -> int:
        """How many ranges the counter has handed out."""
        return decode_u64(self.table.get_cell(keys.counter, COUNTER_COLUMN))

    def hand_out(self, keys: Keys) -> int:
        """The next range number (an atomic increment: many consumers, no compare-and-set queue)."""
        return self.table.increment(keys.counter, COUNTER_COLUMN)

    def totals(self, keys: Keys) -> tuple[Totals, Floor]:
        """The totals (the counters' and the clearing mark's counts) and the floor row they were read with
        (one scan: their rows are neighbours): the claims from the mark's ``counted`` on are not in them."""
        columns = [ACKED_COLUMN, DEAD_COLUMN, REDELIVERED_COLUMN, LATE_COLUMN]
        rows = dict(
            self.table.scan(keys.counter, keys.floor + b"\x00", columns=[*columns, FLOOR_COLUMN, CLEARED_COLUMN])
        )
        acked, dead, redelivered, late = (decode_u64(rows.get(keys.counter, {}).get(column)) for column in columns)
        floor = Floor.of(rows.get(keys.floor, {}))
        cleared = floor.cleared
        return Totals(acked + cleared.acked, dead + cleared.dead, redelivered, late), floor

    def count(self, keys: Keys, *, acked: int = 0, dead: int = 0, redelivered: int = 0, late: int = 0) -> None:
        for column, amount in (
            (ACKED_COLUMN, acked),
            (DEAD_COLUMN, dead),
            (REDELIVERED_COLUMN, redelivered),
            (LATE_COLUMN, late),
        ):
            if amount:
                self.table.increment(keys.counter, column, amount)

    def floor(self, keys: Keys) -> Floor:
        """The floor row: the floor and the clearing mark, as one read of a row sees them together."""
        return Floor.of(self.table.get(keys.floor, [FLOOR_COLUMN, CLEARED_COLUMN]))

    def floor_and_handed_out(self, keys: Keys) -> tuple[Floor, int]:
        """:meth:`floor` and :meth:`handed_out` in one scan (their rows are neighbours)."""
        columns = [COUNTER_COLUMN, FLOOR_COLUMN, CLEARED_COLUMN]
        rows = dict(self.table.scan(keys.counter, keys.floor + b"\x00", columns=columns))
        return Floor.of(rows.get(keys.floor, {})), decode_u64(rows.get(keys.counter, {}).get(COUNTER_COLUMN))

    def raise_floor(self, keys: Keys, floor: Floor, new: int) -> Floor | None:
        """Raise the floor from ``floor`` (as read) to range ``new`` by compare-and-set: the floor row as
        raised, None if it lost. The clearing mark is written first if it is not there yet (a subscription
        made before it: the raises that passed the floor cleared what they passed), so that no raise passes
        ranges without one."""
        mark = self.mark(keys, floor)
        data = encode_u64(new)
        won = self._swap(keys.floor, FLOOR_COLUMN, floor.data, data)
        return Floor(data, new, mark, floor.cleared) if won else None

    def mark(self, keys: Keys, floor: Floor) -> bytes:
        """The clearing mark's bytes in ``floor`` (the floor row as read), written first if it is not there
        yet (a subscription made before it)."""
        if floor.mark is not None:
            return floor.mark
        mark = floor.cleared.encode()
        self._swap(keys.floor, CLEARED_COLUMN, None, mark)  # (lost: another consumer wrote one: a swap from it fails)
        return mark

    def swap_mark(self, keys: Keys, old: bytes, new: Cleared) -> bool:
        """Compare-and-set the clearing mark from the exact bytes read (:mod:`.clearing`)."""
        return self._swap(keys.floor, CLEARED_COLUMN, old, new.encode())

    # -- ranges ---------------------------------------------------------------------------------

    def read_range(self, keys: Keys, k: int) -> StoredRange | None:
        data = self.table.get_cell(keys.range(k), RANGE_COLUMN)
        return None if data is None else StoredRange(k, data, RangeCell.decode(data))

    def swap_range(self, keys: Keys, k: int, old: bytes | None, new: RangeCell) -> StoredRange | None:
        """Compare-and-set range ``k`` from ``old`` (None: absent); the stored range, or None if it lost."""
        data = new.encode()
        return StoredRange(k, data, new) if self._swap(keys.range(k), RANGE_COLUMN, old, data) else None

    def drop_range(self, keys: Keys, k: int) -> None:
        """Delete range ``k``'s cell (one written below the floor, after the range was done and cleared)."""
        self.table.delete_many([keys.range(k)])

    def ranges(self, keys: Keys, first: int) -> list[StoredRange]:
        """The range cells from range ``first`` on, in order."""
        rows = self.table.scan(keys.range(first), past(keys.ranges), columns=[RANGE_COLUMN], limit=SCAN_LIMIT)
        return [
            StoredRange(keys.range_number(key), d[RANGE_COLUMN], RangeCell.decode(d[RANGE_COLUMN])) for key, d in rows
        ]

    # -- claims ---------------------------------------------------------------------------------

    def read_claim(self, keys: Keys, message_id: bytes) -> StoredClaim | None:
        data = self.table.get_cell(keys.claim(message_id), CLAIM_COLUMN)
        return None if data is None else StoredClaim(message_id, data, Claim.decode(data))

    def swap_claim(self, keys: Keys, message_id: bytes, old: bytes | None, new: Claim) -> StoredClaim | None:
        """Compare-and-set one claim from ``old`` (None: absent); the stored claim, or None if it lost."""
        data = new.encode()
        won = self._swap(keys.claim(message_id), CLAIM_COLUMN, old, data)
        return StoredClaim(message_id, data, new) if won else None

    def create_claims(self, keys: Keys, claims: Sequence[tuple[bytes, Claim]]) -> list[StoredClaim | None]:
        """Write each claim cell if absent (:meth:`swap_claims` from nothing): the stored claims, None where
        a claim was there already."""
        return self.swap_claims(keys, [(message_id, None, claim) for message_id, claim in claims])

    def swap_claims(self, keys: Keys, swaps: Sequence[tuple[bytes, bytes | None, Claim]]) -> list[StoredClaim | None]:
        """Compare-and-set many claims, each ``(message id, old bytes or None for absent, new claim)`` and a
        row of its own: the stored claims, None where one lost. They are pipelined (one round trip for
        many), over up to :data:`CLAIM_WAYS` connections at once, all written from this thread before any
        answer is read: HBase serves one connection's requests one after another, each waiting for its log
        write, so one pipeline of 32 takes about as long as 32 calls in a row. If a link fails, each claim is
        settled by reading it back (as :meth:`_swap` settles one)."""
        encoded = [(message_id, old, claim, claim.encode()) for message_id, old, claim in swaps]
        cells = [(keys.claim(message_id), CLAIM_COLUMN, old, data) for message_id, old, _, data in encoded]
        ways = max(1, min(CLAIM_WAYS, len(encoded) // CLAIMS_PER_WAY))
        try:
            won = self.table.compare_and_set_many(cells, ways=ways)
        except HBaseUnavailable:
            won = [self._settle_lost(key, column, old, new) for key, column, old, new in cells]
        return [
            StoredClaim(message_id, data, claim) if w else None
            for (message_id, _, claim, data), w in zip(encoded, won, strict=True)
        ]

    def claims(
        self, keys: Keys, start_id: bytes, limit: int = SCAN_LIMIT, *, unsettled: bool = False
    ) -> list[StoredClaim]:
        """The claim cells from message id ``start_id`` on, in id order; with ``unsettled`` only those
        not acknowledged or dead-lettered (filtered in the region servers: a reap reads what is in play,
        not every acknowledgement of the ranges not done yet)."""
        rows = self.table.scan(
            keys.claim(start_id),
            past(keys.claims),
            columns=[CLAIM_COLUMN],
            limit=limit,
            filter=UNSETTLED if unsettled else None,
        )
        return [StoredClaim(keys.message_id(key), d[CLAIM_COLUMN], Claim.decode(d[CLAIM_COLUMN])) for key, d in rows]

    def settled(self, keys: Keys, start_id: bytes, stop_id: bytes) -> list[StoredClaim]:
        """The acknowledged and dead-lettered claims from message id ``start_id`` up to ``stop_id`` (filtered
        in the region servers), in id order."""
        rows = self.table.scan(keys.claim(start_id), keys.claim(stop_id), columns=[CLAIM_COLUMN], filter=SETTLED)
        return [StoredClaim(keys.message_id(key), d[CLAIM_COLUMN], Claim.decode(d[CLAIM_COLUMN])) for key, d in rows]

    # -- doorbells ------------------------------------------------------------------------------

    def put_bell(self, keys: Keys, owner: str, address: str, expires: int) -> None:
        """Record consumer ``owner``'s doorbell address until ``expires`` (HBase ms)."""
        self.table.put(keys.bell(owner), {BELL_COLUMN: _bell_cell(address, expires)})

    def drop_bell(self, keys: Keys, owner: str) -> None:
        self.table.delete_many([keys.bell(owner)])

    def bells(self, keys: Keys, now: int) -> dict[str, str]:
        """The doorbell addresses of this subscription's idle consumers, by consumer, that have not
        expired at ``now``."""
        rows = self.table.scan(keys.bells, past(keys.bells), columns=[BELL_COLUMN], limit=SCAN_LIMIT)
        found = {keys.bell_owner(key): _bell_of(d[BELL_COLUMN], now) for key, d in rows}
        return {owner: address for owner, address in found.items() if address is not None}

    def topic_bells(self, generation_prefix: bytes, now: int) -> list[str]:
        """The doorbell addresses of every shared subscription's idle consumers of one topic generation
        (for publishers, like the exclusive consumers' bells)."""
        rows = self.table.scan(prefix=generation_prefix, columns=[BELL_COLUMN])
        return [a for _, d in rows if (a := _bell_of(d[BELL_COLUMN], now)) is not None]

    # -- clearing (:mod:`.clearing`) ----------------------------------------------------------------

    def delete_cleared(self, keys: Keys, ranges: range, message_ids: Sequence[bytes]) -> None:
        """Delete the cells of ``ranges`` and the claims of ``message_ids`` (cleared: :mod:`.clearing`)."""
        self.table.delete_many([keys.range(k) for k in ranges] + [keys.claim(i) for i in message_ids])

    def drop(self, subscription_key: bytes, keep: bytes | None = None) -> int:
        """Delete the state rows of every incarnation of a subscription but ``keep``; how many."""
        prefix = state_prefix(subscription_key)
        doomed = [
            key
            for key, _ in self.table.scan(prefix=prefix, filter=KEYS_ONLY)
            if keep is None or not key.startswith(prefix + keep)
        ]
        if doomed:
            self.table.delete_many(doomed)
        return len(doomed)

    # -- plumbing -------------------------------------------------------------------------------

    def _swap(self, key: bytes, column: bytes, old: bytes | None, new: bytes) -> bool:
        """Compare-and-set; a lost answer is settled by reading the cell back (:meth:`_settle_lost`)."""
        try:
            return self.table.compare_and_set(key, column, old, new)
        except HBaseUnavailable:
            return self._settle_lost(key, column, old, new)

    def _settle_lost(self, key: bytes, column: bytes, old: bytes | None, new: bytes) -> bool:
        """Whether a compare-and-set from ``old`` to ``new`` whose answer was lost landed, by reading the
        cell back (each new value names a fresh owner, deadline or state, so finding ``new`` means that
        call wrote it); made again if the cell still holds ``old``."""
        current = self.table.get_cell(key, column)
        if current == new:
            return True
        if current == old:
            return self.table.compare_and_set(key, column, old, new)
        return False


def _bell_cell(address: str, expires: int) -> bytes:
    return json.dumps({"a": address, "e": expires}, sort_keys=True, separators=(",", ":")).encode()


def _bell_of(data: bytes, now: int) -> str | None:
    """The address in a doorbell cell, None if it expired or is not one (a doorbell is only a hint)."""
    try:
        d = json.loads(data)
        address, expires = d["a"], int(d["e"])
    except (ValueError, KeyError, TypeError):
        return None
    return address if isinstance(address, str) and expires > now else None


def past(prefix: bytes) -> bytes:
    """The scan stop just past every key that starts with ``prefix``."""
    return prefix + b"\xff" * 32


def iter_pages(store: SharedStore, keys: Keys, start_id: bytes) -> Iterator[StoredClaim]:
    """Every claim from ``start_id`` on, page by page (for listings that may be long)."""
    while True:
        page = store.claims(keys, start_id)
        yield from page
        if len(page) < SCAN_LIMIT:
            return
        start_id = page[-1].message_id + b"\x00"
