"""Scheduled delivery: a message's delivery time, carried in a reserved header (no I/O).

A message is scheduled by one of two headers, as any header stored with it (so every reader, the REST
gateway's clients and ``tms-admin topic tail`` see it as written):

* ``tms-deliver-at``: the time, in ms since the epoch on HBase's clock (``client.hbase_clock``);
* ``tms-deliver-after``: a delay in ms after the message's publish time.

Each value is ASCII decimal digits (at most 15: any time to the year 33000). A shared subscription
delivers the message no earlier than that time (docs/shared.md, "Scheduled delivery"); exclusive
subscriptions and fetches read it at its position, its time visible (:func:`due_ms`), as Pulsar's do.
A message with a bad value, both headers, or one twice is refused at publish (InvalidArgument) and
nothing of its batch is written.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from operator import itemgetter

from tms_hbase.errors import InvalidArgument
from tms_hbase.model.record import Record

AT = "tms-deliver-at"
AFTER = "tms-deliver-after"
NAMES = frozenset((AT, AFTER))
MAX_DIGITS = 15


def deliver_at(time_ms: int) -> tuple[str, bytes]:
    """The header that schedules a message for ``time_ms`` (ms since the epoch, HBase's clock):
    ``Record(payload, headers=[deliver_at(t)])``."""
    return AT, _encode("time_ms", time_ms)


def deliver_after(seconds: float) -> tuple[str, bytes]:
    """The header that schedules a message ``seconds`` after its publish time (no upper bound)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < 10**MAX_DIGITS / 1000:
        raise InvalidArgument(f"bad delay {seconds!r}: expected a number of seconds from 0")
    return AFTER, _encode("delay", round(seconds * 1000))


def due_ms(publish_time: int, headers: Sequence[tuple[str, bytes]]) -> int | None:
    """When a message with these headers is due (HBase ms), None if it is not scheduled. A value that
    is not a time (a message stored before the headers were reserved) counts as not scheduled."""
    for name, value in headers:
        if name in NAMES and value.isdigit() and len(value) <= MAX_DIGITS:
            return int(value) if name == AT else publish_time + int(value)
    return None


def check(batch: Sequence[bytes | Record]) -> None:
    """InvalidArgument for a message of a checked batch whose scheduling headers are bad (a value that is
    not 1-15 ASCII digits, a header twice, or both). One pass over the header names when any is set."""
    headers = [m.headers for m in batch if type(m) is Record]
    if not headers or NAMES.isdisjoint(map(itemgetter(0), itertools.chain.from_iterable(headers))):
        return
    for i, message in enumerate(batch):
        if type(message) is not Record:
            continue
        found = [(name, value) for name, value in message.headers if name in NAMES]
        if len(found) > 1:
            raise InvalidArgument(
                f"message {i} has {len(found)} scheduling headers ({', '.join(n for n, _ in found)}): give one"
            )
        for name, value in found:
            if not (value.isdigit() and len(value) <= MAX_DIGITS):
                raise InvalidArgument(
                    f"bad {name} header of message {i}: {value[:40]!r} is not a time in ms "
                    f"(1 to {MAX_DIGITS} ASCII digits, no sign)"
                )


def _encode(what: str, ms: object) -> bytes:
    if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms < 10**MAX_DIGITS:
        raise InvalidArgument(f"bad {what} {ms!r}: expected an int of ms from 0")
    return str(ms).encode()
