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
settled, counted into the totals exactly once in two steps, like a clearing (:mod:`.clearing`):

1. **count**: one compare-and-set of the floor row's clearing mark (:class:`~.state.Cleared`) from the
   bytes the reap read before the rows adds the claims' numbers to the mark's totals and names their rows
   (``scheduled``). A row read after the mark, and not named in it, is not counted yet: a count names its
   rows until they are deleted, and another consumer's count since then makes this one lose;
2. **delete**: the claims and then the rows named are deleted (harmless to do twice), and a second
   compare-and-set lets go of them.

A crash between the steps leaves the mark naming its rows: the next reap deletes them and lets go first.
The numbers of a subscription count the settled claims of the rows not named in the mark.

So the state is bounded by the scheduled messages not settled, and a reap reads the rows of messages
due, never those scheduled later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tms_hbase.shared.state import CLAIM_COLUMN, SCHEDULE_COLUMN, Claim, ClaimState, Cleared, Keys
from tms_hbase.shared.store import SCAN_LIMIT, Floor, SharedStore, StoredClaim, past
from tms_hbase.storage.hbase import KEYS_ONLY

PARK_MS = 60_000  # a scheduled claim due further ahead than this lets the floor pass (a row is written for it)
PENDING = b"p"  # a schedule row's cell (b"c": counted into the counters by a version before the mark named rows)
COUNT_LIMIT = 500  # schedule rows one count names in the clearing mark (28 bytes each)


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

    def due(self, keys: Keys, now: int, floor: Floor) -> Due:
        """The claims of the schedule rows due by ``now`` (rows whose claim was settled are counted and
        go, :meth:`_clear`, with ``floor``: the floor row read before them), and when the next row is due."""
        rows = self.table.scan(keys.schedule, keys.scheduled(now + 1), columns=[SCHEDULE_COLUMN], limit=SCAN_LIMIT)
        following = self.table.scan(keys.scheduled(now + 1), past(keys.schedule), filter=KEYS_ONLY, limit=1)
        next_due = keys.due_and_id(following[0][0])[0] if following else None
        ids = [keys.due_and_id(key)[1] for key, _ in rows]
        cells = self.table.get_cells([keys.claim(i) for i in ids], CLAIM_COLUMN)
        found, done = [], []
        for (key, row), message_id, data in zip(rows, ids, cells, strict=True):
            claim = None if data is None else Claim.decode(data)
            if data is not None and claim is not None and not claim.state.settled:
                found.append(StoredClaim(message_id, data, claim))
            else:
                done.append((keys.due_and_id(key), row[SCHEDULE_COLUMN], claim))
        if done or floor.cleared.scheduled:
            self._clear(keys, floor, done[:COUNT_LIMIT])
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
        return [c for c in self._claims(keys, below) if not c.claim.state.settled]

    def uncounted(self, keys: Keys, below: bytes, mark: Cleared) -> list[Claim]:
        """The settled claims of the schedule rows whose messages are below message id ``below`` (where the
        claims not counted by a clearing begin) and not counted in ``mark`` yet (it names the rows it
        counted until they are deleted): what the numbers of a subscription add to its totals."""
        counted = {message_id for _, message_id in mark.scheduled}
        return [c.claim for c in self._claims(keys, below) if c.claim.state.settled and c.message_id not in counted]

    def _claims(self, keys: Keys, below: bytes) -> list[StoredClaim]:
        """The claims of the schedule rows whose messages are below message id ``below``, in id order (of at
        most SCAN_LIMIT rows)."""
        rows = self.table.scan(keys.schedule, past(keys.schedule), filter=KEYS_ONLY, limit=SCAN_LIMIT)
        ids = sorted({i for _, i in map(keys.due_and_id, (key for key, _ in rows)) if i < below})
        cells = self.table.get_cells([keys.claim(i) for i in ids], CLAIM_COLUMN)
        return [StoredClaim(i, data, Claim.decode(data)) for i, data in zip(ids, cells, strict=True) if data]

    def _clear(self, keys: Keys, floor: Floor, done: list[tuple[tuple[int, bytes], bytes, Claim | None]]) -> None:
        """Count the settled claims of the rows ``done`` (each ``((due, message id), cell, claim)``, read after
        ``floor``) into the clearing mark and delete them with their rows, in the two steps of the module
        doc, after finishing a count that a crash cut short. Stops, leaving the rest to the next reap, once
        another consumer moved the mark first."""
        mark, data = floor.cleared, self.store.mark(keys, floor)
        named = set(mark.scheduled)  # counted: deleted, never counted again
        if named:
            self._delete(keys, mark.scheduled)
            mark = mark.deleting_scheduled()
            if not self.store.swap_mark(keys, data, mark):
                return
            data = mark.encode()
        done = [d for d in done if d[0] not in named]
        counting = [(row, claim) for row, cell, claim in done if cell == PENDING and claim is not None]
        acked = sum(claim.state is ClaimState.ACKED for _, claim in counting)
        counted = mark.counting_scheduled([row for row, _ in counting], acked, len(counting) - acked)
        if counting and not self.store.swap_mark(keys, data, counted):
            return
        self._delete(keys, [row for row, _, _ in done])  # (those without a claim or counted before: only deleted)
        if counting:
            self.store.swap_mark(keys, counted.encode(), counted.deleting_scheduled())

    def _delete(self, keys: Keys, rows: Sequence[tuple[int, bytes]]) -> None:
        """Delete schedule ``rows`` (due time, message id): their claims, then the rows."""
        claims = [keys.claim(message_id) for _, message_id in rows]
        self.table.delete_many(claims + [keys.scheduled(due, message_id) for due, message_id in rows])
