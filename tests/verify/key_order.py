"""The checker of a shared subscription's consumption, key-ordered (docs/shared.md, "Key-ordered
subscriptions") or with scheduled messages ("Scheduled delivery"), from what its consumer processes noted
(``tests/workers/shared_consumer.py``: one line per event, each ending with the host's monotonic clock in µs,
one clock for every process of the host).

It knows only the notes, what was published (each key's payloads in topic order, and the keyless ones)
and what the dead-letter topic holds; nothing of the library. Times are compared only where causality
makes the comparison sound: a note written *before* a call is earlier than anything the call caused, a
note written *after* a call returned is later than anything that happened before the call returned.

The anomaly kinds:

- ``lost``: a published message neither acknowledged (an ``acked`` note, or an ``acking`` note of a
  process that was killed before its outcome) nor in the dead-letter topic;
- ``double-ack``: a message acknowledged twice (two ``acked`` notes);
- ``order``: a key's message delivered (its first ``got``) before the message of the key before it was
  settled, i.e. before the first ``acking`` note of an acknowledgement of it that was not refused
  (``acked`` or unknown), or, for one dead-lettered, before its last delivery was noted;
- ``ack-order``: a key's message acknowledged (``acked``) before the acknowledgement of the one before it
  began;
- ``unsettled-predecessor``: a key's message delivered while the one before it was never settled at all;
- ``early``: a scheduled message delivered before its time: HBase's clock as the consumer read it after its
  receive returned (a lower bound, from the clock the library judges by) still before the message's time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise


@dataclass
class Fate:
    """What the notes say of one message: its deliveries' note times, its acknowledgement attempts
    (``acking`` time, outcome ``acked``/``late``/``unknown``, and the ``acked`` note's time)."""

    got: list[int] = field(default_factory=list)
    got_hbase: list[int] = field(default_factory=list)  # HBase's clock (ms) noted after each delivery
    attempts: list[tuple[int, str, int | None]] = field(default_factory=list)

    def settle_start(self) -> int | None:
        """The earliest time an acknowledgement that may have landed began."""
        landed = [t for t, outcome, _ in self.attempts if outcome != "late"]
        return min(landed, default=None)

    def acked_at(self) -> list[int]:
        return [done for _, outcome, done in self.attempts if outcome == "acked" and done is not None]


def fates(notes: Iterable[tuple[int, list[str]]]) -> dict[str, Fate]:
    """Each payload's fate from ``(process number, fields)`` notes in each process's order; an attempt
    whose process was killed before its outcome is ``unknown`` (it may have landed)."""
    out: dict[str, Fate] = defaultdict(Fate)
    open_attempt: dict[tuple[int, str], int] = {}
    for process, fields in notes:
        kind = fields[0]
        if kind in ("ready", "done"):
            continue
        payload, t = fields[1], int(fields[-1])
        if kind == "got":
            out[payload].got.append(t)
            out[payload].got_hbase.append(int(fields[4]))
        elif kind == "acking":
            open_attempt[process, payload] = len(out[payload].attempts)
            out[payload].attempts.append((t, "unknown", None))
        elif kind in ("acked", "late"):
            i = open_attempt.pop((process, payload))
            start = out[payload].attempts[i][0]
            out[payload].attempts[i] = (start, kind, t)
    return out


def check(
    notes: Iterable[tuple[int, list[str]]],
    keys: Mapping[str, Sequence[str]],
    keyless: Iterable[str],
    dead: Iterable[str],
    due: Mapping[str, int] | None = None,
) -> dict[str, list[str]]:
    """Anomalies by kind (see the module's docstring); empty when the run was valid. ``keys``: each key's
    payloads in topic order; ``dead``: the payloads in the dead-letter topic; ``due``: the scheduled
    payloads' times (HBase ms)."""
    found = fates(notes)
    dead = set(dead)
    anomalies: dict[str, list[str]] = defaultdict(list)
    for payload in [p for ps in keys.values() for p in ps] + list(keyless):
        fate = found.get(payload, Fate())
        if len(fate.acked_at()) > 1:
            anomalies["double-ack"].append(payload)
        if fate.settle_start() is None and payload not in dead:
            anomalies["lost"].append(payload)
    for payload, time_ms in (due or {}).items():
        anomalies["early"] += [
            f"{payload}: {time_ms - at} ms before its time"
            for at in found.get(payload, Fate()).got_hbase
            if at < time_ms
        ]
    for key, payloads in keys.items():
        for before, after in pairwise(payloads):
            b, a = found.get(before, Fate()), found.get(after, Fate())
            if not a.got:
                continue
            first = min(a.got)
            settled = b.settle_start()
            if settled is None and before in dead and b.got:
                settled = max(b.got)
            if settled is None:
                anomalies["unsettled-predecessor"].append(f"{key}: {after} delivered, {before} never settled")
            elif first <= settled:
                anomalies["order"].append(f"{key}: {after} delivered {settled - first} µs before {before} was settled")
            start = b.settle_start()
            for done in a.acked_at():
                if start is not None and done <= start:
                    anomalies["ack-order"].append(f"{key}: {after} acknowledged before {before}'s acknowledgement")
    return {kind: found for kind, found in anomalies.items() if found}
