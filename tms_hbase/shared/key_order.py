"""Key order of a shared subscription (``ordering="key"``, docs/shared.md "Key-ordered subscriptions"):
which keyed messages a consumer may deliver now, derived from the claims in flight (no I/O).

The rule: a message with a key is delivered only when every earlier message of its key is settled
(acknowledged or dead-lettered), and only once every earlier message of the topic has a claim cell, so
that no earlier message of its key can still appear. There is no table of keys: a key is *blocked* while
one of its claims is not settled, and the claims not settled are what every reap reads anyway. So the
state grows with the messages in play, never with the keys seen.

* **Registered.** A range's keyed messages get claim cells like any other; one that may not go out yet
  is written *waiting* (free, never delivered), in topic order behind its key's claim in flight.
* **Eligible.** Ranges are read in parallel, so a range's claims are complete only once it is read to its
  end. The *frontier* is the first range from the floor not read to its end: a claim in a range below the
  frontier, or in the frontier up to its progress as the reap read it, has every earlier message of the topic
  registered before it. One past that waits: a read's claims are written over several connections at once
  and the progress moves only once they all are, so a reap may see a claim of a read in progress but not an
  earlier one of its key.
* **Heads.** Of a key's claims not settled, the first in id order is its head: delivered (to any consumer,
  by compare-and-set) once it is eligible and available (never delivered, given back and due, or past its
  holder's deadline); the others wait. Settled is final, so a reap's view of which keys are free can only
  be too cautious, never wrong.
* **Successors.** A claim x delivered means every earlier claim of its key was settled. When x is settled,
  the next claim of its key that the view saw (with nothing of that key between) may go out at once: the
  consumer that settled x takes it next (:meth:`KeyView.settled`), without waiting for a reap; with no
  such claim known, x's key is free again in that consumer's view.
* **At once.** A message read from a range goes out at once, without being written waiting first, when
  the consumer's view says no earlier message of its key is in play: the range is up to the frontier, its
  progress is what the view saw (nobody registered claims in it since), and its key is not blocked
  (:meth:`KeyView.direct`). Keys this consumer registered since its reap count as blocked until it
  settles their last claim it knows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tms_hbase.shared.state import Settings, position_of_id
from tms_hbase.shared.store import StoredClaim, StoredRange

WINDOW = 1024  # claims not settled beyond which a key-ordered consumer registers no new range
# claims not settled a key-ordered reap reads at most (the first from the floor, in id order): a reap reads every
# claim it gets, and with few keys nearly all of them wait behind their key's head, so it is bounded whatever
# is in play (consumers that register at once may pass WINDOW by a read each)
REAP_CLAIMS = 2 * WINDOW


def frontier(floor: int, ranges: Iterable[StoredRange]) -> int:
    """The first range from ``floor`` on not read to its end (every range below it has all its claims)."""
    read = {r.k for r in ranges if r.cell.read}
    k = floor
    while k in read:
        k += 1
    return k


@dataclass
class KeyView:
    """What one reap saw of the keys in play, kept up to date with what this consumer does until the next.
    ``frontier``: as :func:`frontier` (0: none known yet); ``complete``: the reap read every claim not
    settled (else it read the first ones, so that the heads among them are known, but a key it did not see
    may have a claim in play: it vouches for no range); ``progress``: each range cell's progress as seen (a
    range not seen: None); ``blocked``: keys with a claim not settled; ``last``: each blocked key's last claim
    (id) the view knows; ``next``: claim id → the next claim of its key (nothing of that key between them)."""

    frontier: int = 0
    complete: bool = False
    progress: dict[int, bytes | None] = field(default_factory=dict)
    blocked: set[str] = field(default_factory=set)
    last: dict[str, bytes] = field(default_factory=dict)
    next: dict[bytes, StoredClaim] = field(default_factory=dict)
    in_play: int = 0  # claims not settled, as the reap saw them

    def settled(self, message_id: bytes, key: str | None) -> StoredClaim | None:
        """This consumer settled ``message_id`` of ``key`` (delivered, so the head of its key): the claim of
        its key that may go out now, if the view knows it. If the view knows no claim of the key after it
        (it is the key's ``last``), the key is free again: every earlier claim of it was settled when it was
        delivered, and a later one registered since in a range the view vouches for would be the view's own
        (``registered``), so none is in play there."""
        following = self.next.pop(message_id, None)
        if following is None and key is not None and self.last.get(key) == message_id:
            del self.last[key]
            self.blocked.discard(key)
        return following

    def direct(self, r: StoredRange) -> bool:
        """Whether messages read from range ``r`` (as taken now) may go out at once when their key is not
        blocked: the view saw every claim in play, ``r`` is up to the frontier and nobody registered claims in
        it since the view was made."""
        return self.complete and 0 < r.k <= self.frontier and self.progress.get(r.k) == r.cell.progress

    def registered(
        self, r: StoredRange, progress: bytes | None, finished: bool, found: Sequence[tuple[str, StoredClaim | None]]
    ) -> None:
        """This consumer read the keyed messages ``found`` (key and the claim it wrote, None where a claim
        was there already; in id order) in range ``r`` and moved its progress to ``progress``: their keys
        are blocked, each claim follows its key's last one (only where the view vouched for the range and
        no claim of the key it did not write came between), and the frontier moves past a range read to
        its end."""
        vouched = self.direct(r)
        for key, stored in found:
            self.blocked.add(key)
            before = self.last.get(key)
            if stored is None:
                self.last.pop(key, None)  # someone else's claim, unknown here: nothing links across it
                continue
            if before is None or before < stored.message_id:  # (``last`` only moves on: the latest known)
                if vouched and before is not None:
                    self.next[before] = stored
                self.last[key] = stored.message_id
            self.in_play += 1
        if vouched:
            self.progress[r.k] = progress
            if finished and r.k == self.frontier:
                self.frontier += 1


def view_of(
    settings: Settings, floor: int, ranges: Sequence[StoredRange], claims: Sequence[StoredClaim], complete: bool
) -> KeyView:
    """The view of one reap: ``ranges`` (read first) and ``claims`` not settled from the floor on, in id
    order (read after them; ``complete``: not cut short by the scan's limit). Cut short, they are still the
    first in id order, so every earlier claim of a key they hold is among them: its head and successors are
    known (the frontier comes from the ranges alone)."""
    view = KeyView(frontier(floor, ranges), complete, {r.k: r.cell.progress for r in ranges})
    view.in_play = len(claims)
    for stored in claims:
        key = stored.claim.key
        if key is None:
            continue
        before = view.last.get(key)
        if before is not None and eligible(settings, view, stored):
            view.next[before] = stored
        view.last[key] = stored.message_id
        view.blocked.add(key)
    return view


def eligible(settings: Settings, view: KeyView, stored: StoredClaim) -> bool:
    """Whether every message of the topic before this claim's has a claim cell: it is below the frontier, or
    in it up to the progress the view saw (its claims past that may be written only in part)."""
    k = settings.range_of(position_of_id(stored.message_id))
    if k != view.frontier:
        return k < view.frontier
    progress = view.progress.get(k)
    return progress is not None and stored.message_id <= progress


def heads(settings: Settings, view: KeyView, claims: Sequence[StoredClaim], now: int) -> list[StoredClaim]:
    """The claims that may be delivered now, in id order: keyless ones that are available, and each key's
    first claim not settled, if it is available and eligible."""
    seen: set[str] = set()
    out = []
    for stored in claims:
        key = stored.claim.key
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
            if not eligible(settings, view, stored):
                continue
        if stored.claim.available(now):
            out.append(stored)
    return out
