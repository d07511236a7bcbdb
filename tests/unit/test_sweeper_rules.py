"""The sweeper's per-cell rules: CDAP's cleanup matrix plus the ordering protocol's two rules."""

from __future__ import annotations

import pytest

from tms_hbase import TopicId, TopicMetadata
from tms_hbase.model.rows import BatchRow, message_key, payload_key, peek, split_key
from tms_hbase_sweeper.rules import Verdict, is_older_generation, message_verdict, payload_verdict

T = TopicId("ns", "t")
W = bytes(16)


def meta(generation: int, ttl: int = 10) -> TopicMetadata:
    return TopicMetadata(T, {"generation": str(generation), "ttl": str(ttl)})


@pytest.mark.parametrize(
    "cell, current, older",
    [
        (1, 1, False),  # current generation
        (1, 2, True),  # re-created since
        (2, 2, False),
        (1, 3, True),
        (2, -2, True),  # deleted: its last generation is dead too
        (1, -2, True),
        (3, -2, False),  # newer than the deleted one: not ours to judge
        (3, 2, False),  # newer generation than the metadata knows
    ],
)
def test_is_older_generation_truth_table(cell: int, current: int, older: bool) -> None:
    assert is_older_generation(cell, current) is older


def row(publish_time: int, payloads: tuple[bytes, ...] = (b"p",), expires_at: int | None = None):
    """The header the sweeper reads of a real encoded row."""
    return peek(BatchRow(publish_time, W, 1, payloads, expires_at=expires_at).encode())


@pytest.mark.parametrize(
    "generation, topic, r, newest, now, grace, verdict",
    [
        (1, None, row(0), False, 10**9, 0, Verdict.KEEP),  # unknown topic
        (5, meta(2), row(0), False, 10**9, 0, Verdict.KEEP),  # newer generation
        (1, meta(2), row(10**9), True, 0, 0, Verdict.DROP),  # old generation, even the newest row
        (2, meta(-2), row(10**9), True, 0, 0, Verdict.DROP),  # deleted topic
        (1, meta(1), row(1000), False, 11_000, 0, Verdict.KEEP),  # exactly at its TTL
        (1, meta(1), row(1000), False, 11_001, 0, Verdict.DROP),  # past it
        (1, meta(1), row(1000), False, 11_001, 600_000, Verdict.KEEP),  # within the grace period
        (1, meta(1), row(1000), True, 11_001, 0, Verdict.STRIP),  # the tail keeps its position
        (1, meta(1), row(1000, payloads=()), True, 11_001, 0, Verdict.KEEP),  # stripped already
        (1, meta(1), row(1000, expires_at=2000), False, 2001, 0, Verdict.DROP),  # own shorter TTL
        (1, meta(1), row(1000, expires_at=2000), False, 1999, 0, Verdict.KEEP),
    ],
)
def test_message_verdicts(generation, topic, r, newest, now, grace, verdict) -> None:
    assert message_verdict(generation, topic, r, newest, now, grace) is verdict


def test_payload_verdicts() -> None:
    assert payload_verdict(1, None, 0, 10**9, 0) is Verdict.KEEP
    assert payload_verdict(1, meta(2), 10**9, 0, 0) is Verdict.DROP
    assert payload_verdict(1, meta(1), 1000, 11_000, 0) is Verdict.KEEP
    assert payload_verdict(1, meta(1), 1000, 11_001, 0) is Verdict.DROP
    assert payload_verdict(1, meta(1), 1000, 11_001, 5) is Verdict.KEEP


def test_split_key_reads_topic_and_generation() -> None:
    assert split_key(message_key(T, 7, 3)) == (T, 7)
    assert split_key(payload_key(T, 2**31, 99, 1)) == (T, 2**31)
    for foreign in [b"", b"nocolon", b"a:b:", b"a::\x00\x00\x00\x01", b"\xff:x:\x00\x00\x00\x01"]:
        assert split_key(foreign) is None
