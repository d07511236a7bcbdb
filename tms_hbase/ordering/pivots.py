"""Where a time seek's search over a generation's offsets probes next (both orderings' seeks use it)."""

from __future__ import annotations

GUESS_MISSES = 2  # a search stops guessing from the dates and halves once this many guesses failed to halve


class Pivots:
    """Where a time seek's search probes next: the offset where the dates of the two rows it holds put the
    target (an interpolation search: rows are written at a rate that changes slowly, so a topic of a million
    messages takes a few probes, not log2 of its rows), moved past it by a lean (``lean_offsets`` offsets
    and ``lean_ms`` of dates), below it at first and then on the side that did not move last, so that the
    search closes in from both sides; while probes keep landing on the same side the lean doubles. Once the
    dates misled it :data:`GUESS_MISSES` times (a probe after the first that failed to halve the offsets left:
    the first lands near one end when it lands near the target) it probes the middle, so a search never takes
    more than those probes and the first beyond a binary search's."""

    def __init__(self, lean_offsets: int = 0, lean_ms: int = 0) -> None:
        self.lean_offsets = lean_offsets
        self.lean_ms = lean_ms
        self.side = -1  # where the next probe aims: below the target (-1) or above it (1)
        self.reach = 1  # times the lean: doubles while probes land on the side they aimed away from
        self.misses = 0
        self.probes = 0
        self.left = 0  # the offsets left before the last probe

    def next(
        self, start: int, stop: int, low: tuple[int, int] | None, high: tuple[int, int] | None, time_ms: int
    ) -> int:
        """An offset in [``start``, ``stop``] to probe for ``time_ms``, given a row ``low`` below and ``high``
        above, each (offset, date), if both are known and dated apart."""
        self.left = stop - start
        if low is None or high is None or high[1] <= low[1] or self.misses >= GUESS_MISSES:
            return (start + stop) // 2
        lean = self.side * self.reach
        aim = time_ms + lean * self.lean_ms
        guess = low[0] + (high[0] - low[0]) * (aim - low[1]) // (high[1] - low[1]) + lean * self.lean_offsets
        return min(max(guess, start), stop)

    def narrowed(self, start: int, stop: int, *, raised_low: bool) -> None:
        """The probe left [``start``, ``stop``], having raised the low end (else lowered the high end): a probe
        after the first that did not halve the offsets is a miss; the next one aims past the target on the
        other side."""
        self.probes += 1
        if stop - start > self.left // 2 and self.probes > 1:
            self.misses += 1
        side = 1 if raised_low else -1
        self.reach = self.reach * 2 if side == self.side else 1
        self.side = side
