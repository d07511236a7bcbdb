"""What the sweeper does with one cell: CDAP's cleanup matrix (docs/design.md, requirement 19), as pure functions.

The ordering protocol adds two rules (docs/ordering.md): the newest row of a live generation is never
deleted (only its expired payloads are stripped), and nothing is deleted before its TTL plus a grace
period has passed, so no writer can put a row into a position the sweeper has freed. In a sequencer
generation rows go only as a prefix of the generation (``prefix_verdict``).
"""

from __future__ import annotations

from enum import Enum

from tms_hbase.model.rows import RowHeader
from tms_hbase.model.topic import TopicMetadata


class Verdict(Enum):
    KEEP = "keep"
    DROP = "drop"
    STRIP = "strip"  # keep the row (it holds the tail position) without its expired payloads


def is_older_generation(generation: int, current: int) -> bool:
    """True for cells of a generation the topic has left: ``gen < |current|``, or the current
    generation itself once the topic is deleted (``current < 0``)."""
    return generation < abs(current) or (current < 0 and generation == abs(current))


def dead_generation(generation: int, meta: TopicMetadata | None) -> bool | None:
    """True: drop (old generation), whatever the row holds. None: keep whatever else holds (unknown
    topic, newer generation). False: a live generation, the row decides."""
    if meta is None or generation > abs(meta.generation):
        return None
    return is_older_generation(generation, meta.generation)


def message_verdict(
    generation: int,
    meta: TopicMetadata | None,
    row: RowHeader,
    newest: bool,
    now_ms: int,
    grace_ms: int,
    *,
    time_ms: int | None = None,
) -> Verdict:
    """Drop a message row of a dead generation or past its TTL (+grace); strip the newest instead.

    The TTL counts from ``time_ms``, by default the row's publish time; the sweeper passes a bounded
    time for rows dated far in the future (``tms_hbase.model.row_time``), so they expire too.
    """
    dead = dead_generation(generation, meta)
    if dead is None:
        return Verdict.KEEP
    if dead:
        return Verdict.DROP
    assert meta is not None
    deadline = (row.publish_time if time_ms is None else time_ms) + meta.ttl * 1000
    if row.expires_at is not None:
        deadline = min(deadline, row.expires_at)
    if deadline + grace_ms >= now_ms:
        return Verdict.KEEP
    if not newest:
        return Verdict.DROP
    return Verdict.STRIP if row.has_payloads else Verdict.KEEP


def prefix_verdict(
    verdict: Verdict, row: RowHeader, prefix_gone: bool, stored_ms: int, now_ms: int, grace_ms: int
) -> Verdict:
    """The verdict on a row of a live sequencer generation, from its ``message_verdict``: rows go only as a
    prefix (``prefix_gone``: nothing of the generation is left below this row), so a reader can tell a
    swept offset from a hole; an expired row above a live one keeps its header (its payloads are
    stripped). A skip marker also waits the grace past when HBase stored it (it carries an old time)."""
    if verdict is not Verdict.DROP:
        return verdict
    if row.skip and stored_ms + grace_ms >= now_ms:
        return Verdict.KEEP
    if prefix_gone:
        return Verdict.DROP
    return Verdict.STRIP if row.has_payloads else Verdict.KEEP


def payload_verdict(
    generation: int, meta: TopicMetadata | None, write_time_ms: int, now_ms: int, grace_ms: int
) -> Verdict:
    """Drop a payload-table cell of a dead generation, or whose write time is past the TTL (+grace)."""
    dead = dead_generation(generation, meta)
    if dead is None:
        return Verdict.KEEP
    if dead:
        return Verdict.DROP
    assert meta is not None
    expired = write_time_ms + meta.ttl * 1000 + grace_ms < now_ms
    return Verdict.DROP if expired else Verdict.KEEP
