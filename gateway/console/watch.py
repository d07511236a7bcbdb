"""The console's live tail and search of a topic, through the library's inspection (what the message
browser reads): each call reads a bounded number of rows, so a tail or a search over a big topic is many
short calls that the page makes one after another (and stops when the user pauses or cancels).
"""

from __future__ import annotations

from itertools import islice

from tms_hbase import MessagingClient, TopicId
from tms_hbase.errors import InvalidArgument
from tms_hbase.model.inspection import Entry

from .views import entry_row, inspect

TAIL_ROWS = 100  # messages one tail call returns at most
SEARCH_SCAN = 5000  # messages one search call reads at most
SEARCH_MATCHES = 100  # matches one search call returns at most
WHERE = ("payload", "key", "header")


def tail_start(client: MessagingClient, topic: TopicId) -> str:
    """Where a tail starts: the id of the topic's last message ("" when it has none: from its first)."""
    _generation, entries = inspect(client, topic, from_id=None, from_time=None, last=1)
    return next((e.id.hex() for e in entries if e.id), "")


def tail_after(client: MessagingClient, topic: TopicId, after: bytes | None) -> list[dict]:
    """The messages after the one with id ``after`` (None: from the first), up to :data:`TAIL_ROWS`."""
    _generation, entries = inspect(client, topic, from_id=after, from_time=None, last=None)
    return [entry_row(e) for e in islice((e for e in entries if e.id != after), TAIL_ROWS)]


def search(
    client: MessagingClient,
    topic: TopicId,
    *,
    needle: bytes,
    where: str,
    from_id: bytes | None,
    from_time: int | None,
    to_time: int | None,
    scan: int,
) -> dict:
    """The messages from an id or a time (else the first) whose ``where`` (payload, key, or a header's name
    or value) contains ``needle``: at most :data:`SEARCH_MATCHES`, reading at most ``scan`` messages (up to
    :data:`SEARCH_SCAN`) and none published after ``to_time``. ``next``: the id to go on from (None: done)."""
    if where not in WHERE:
        raise InvalidArgument(f"cannot search in {where!r}: expected one of {', '.join(WHERE)}")
    if not needle:
        raise InvalidArgument("enter what to search for")
    if not 1 <= scan <= SEARCH_SCAN:
        raise InvalidArgument(f"scan must be from 1 to {SEARCH_SCAN} messages a call")
    _generation, entries = inspect(client, topic, from_id=from_id, from_time=from_time, last=None)
    matches: list[dict] = []
    scanned, next_id = 0, None
    for entry in entries:
        if to_time is not None and entry.publish_time is not None and entry.publish_time > to_time:
            break
        if entry.id and (scanned >= scan or len(matches) >= SEARCH_MATCHES):
            next_id = entry.id.hex()
            break
        scanned += 1
        if entry.error is None and _contains(entry, needle, where):
            matches.append(entry_row(entry))
    return {"matches": matches, "scanned": scanned, "next": next_id}


def _contains(entry: Entry, needle: bytes, where: str) -> bool:
    if where == "payload":
        return entry.payload is not None and needle in entry.payload
    if where == "key":
        return entry.key is not None and needle in entry.key
    return any(needle in name.encode() or needle in value for name, value in entry.headers)
