"""Scheduled messages of a shared subscription (:mod:`tms_hbase.model.schedule`): how the floor passes
them, and how reapers find them once they are due.

A scheduled message read from its range gets a claim like any other, written *free* with its delivery
time as the deadline and no delivery counted (:meth:`~.state.Claim.scheduled`): every reap of the
ranges not done sees it, and it is delivered (by compare-and-set, as a redelivery) once HBase's clock
reaches that time. Without more, a message due in a month would hold the floor for a month, and with it
every claim after it. So a claim due more than PARK_MS ahead is **parked**: before the floor moves past
its range, a **schedule row** keyed by its due time is written for it (create-if-absent), and the floor
then treats it as done while its claim cell stays where it is. Each reap also reads the schedule rows
due by now (one scan from the start of the rows up to now: rows sort by due time) and takes their claims
as it takes those of the ranges not done: delivered, given back, redelivered, dead-lettered, settled in
transactions all by the claim cell, whatever its row's place. A schedule row goes once its claim is
settled: the claim is counted into the totals (once: the row's cell moves from PENDING to COUNTED by
compare-and-set first) and deleted, then the row.

So the state is bounded by the scheduled messages not settled, and a reap reads the rows of messages
due, never those scheduled later.
"""

from __future__ import annotations

from dataclasses import dataclass

from tms_hbase.shared.state import CLAIM_COLUMN, SCHEDULE_COLUMN, Claim, ClaimState, Keys
from tms_hbase.shared.store import SCAN_LIMIT, SharedStore, StoredClaim, past
from tms_hbase.storage.hbase import KEYS_ONLY

PARK_MS = 60_000  # a scheduled claim due further ahead than this lets the floor pass (a row is written for it)
PENDING, COUNTED = b"p", b"c"  # a schedule row's cell: its claim not counted yet / counted into the totals


def parked(claim: Claim, now: int) -> bool:
    """Whether the floor may pass this claim (with a schedule row written for it): scheduled, due later
    than PARK_MS from ``now``."""
    return claim.scheduled(now + PARK_MS)


@dataclass(frozen=True)
class Due:
    """What one read of the schedule rows found: the claims of the rows due (those not settled, in id
    order) and the next due time after them (HBase ms; None: no row)."""

    claims: list[StoredClaim]
    next_due: int | None


class Schedule:
    """The schedule rows of shared subscriptions in one subscriptions table."""

    def __init__(self, store: SharedStore) -> None:
        self.store = store
        self.table = store.table

    def park(self, keys: Keys, claims: list[StoredClaim]) -> None:
        """Write the schedule rows of parked claims (absent ones only: a counted row is never made
        pending again), before the floor passes them."""
        cells = [(keys.scheduled(c.claim.deadline, c.message_id), SCHEDULE_COLUMN, None, PENDING) for c in claims]
        self.table.compare_and_set_many(cells)

    def due(self, keys: Keys, now: int) -> Due:
        """The claims of the schedule rows due by ``now`` (rows whose claim was settled are counted and
        go, :meth:`_clear`), and when the next row is due."""
        rows = self.table.scan(keys.schedule, keys.scheduled(now + 1), columns=[SCHEDULE_COLUMN], limit=SCAN_LIMIT)
        following = self.table.scan(keys.scheduled(now + 1), past(keys.schedule), filter=KEYS_ONLY, limit=1)
        next_due = keys.due_and_id(following[0][0])[0] if following else None
        ids = [keys.due_and_id(key)[1] for key, _ in rows]
        cells = self.table.get_cells([keys.claim(i) for i in ids], CLAIM_COLUMN)
        found, done = [], []
        for (key, row), message_id, data in zip(rows, ids, cells, strict=True):
            claim = None if data is None else Claim.decode(data)
            if data is None or claim is None or claim.state.settled:
                done.append((key, row[SCHEDULE_COLUMN], message_id, claim))
            else:
                found.append(StoredClaim(message_id, data, claim))
        if done:
            self._clear(keys, done)
        return Due(sorted(found, key=lambda c: c.message_id), next_due)

    def ids(self, keys: Keys, until: int) -> set[bytes]:
        """The message ids of the schedule rows due by ``until`` (HBase ms), page by page."""
        found: set[bytes] = set()
        start = keys.schedule
        while True:
            rows = self.table.scan(start, keys.scheduled(until + 1), filter=KEYS_ONLY, limit=SCAN_LIMIT)
            found.update(keys.due_and_id(key)[1] for key, _ in rows)
            if len(rows) < SCAN_LIMIT:
                return found
            start = rows[-1][0] + b"\x00"

    def later(self, keys: Keys, now: int, below: bytes) -> list[int]:
        """The due times of the schedule rows due later than ``now`` (at most SCAN_LIMIT), in order, whose
        messages are below message id ``below`` (the floor's: a row of a claim above it counts with the claims)."""
        rows = self.table.scan(keys.scheduled(now + 1), past(keys.schedule), filter=KEYS_ONLY, limit=SCAN_LIMIT)
        return [due for due, message_id in map(keys.due_and_id, (key for key, _ in rows)) if message_id < below]

    def parked(self, keys: Keys, below: bytes) -> list[StoredClaim]:
        """The claims not settled of the schedule rows whose messages are below message id ``below`` (the
        floor's: a row of a claim above it counts with the claims), in id order (of at most SCAN_LIMIT rows):
        what a listing of the messages in play reads beside the claims from the floor on."""
        rows = self.table.scan(keys.schedule, past(keys.schedule), filter=KEYS_ONLY, limit=SCAN_LIMIT)
        ids = sorted({i for _, i in map(keys.due_and_id, (key for key, _ in rows)) if i < below})
        cells = self.table.get_cells([keys.claim(i) for i in ids], CLAIM_COLUMN)
        claims = [StoredClaim(i, data, Claim.decode(data)) for i, data in zip(ids, cells, strict=True) if data]
        return [c for c in claims if not c.claim.state.settled]

    def _clear(self, keys: Keys, done: list[tuple[bytes, bytes, bytes, Claim | None]]) -> None:
        """Count the settled claims of rows not counted yet (the row's compare-and-set decides who counts),
        then delete the claims and the rows."""
        pending = [(key, claim) for key, cell, _, claim in done if cell == PENDING and claim is not None]
        won = self.table.compare_and_set_many([(key, SCHEDULE_COLUMN, PENDING, COUNTED) for key, _ in pending])
        counted = [claim for (_, claim), w in zip(pending, won, strict=True) if w]
        acked = sum(c.state is ClaimState.ACKED for c in counted)
        self.store.count(keys, acked=acked, dead=len(counted) - acked)
        claims = [keys.claim(message_id) for _, _, message_id, claim in done if claim is not None]
        self.table.delete_many(claims + [key for key, _, _, _ in done])
