"""A time seek costs at most SEEK_CALLS HBase calls on a topic of a million messages, in both orderings,
and stays exact: it returns the first message, in order, dated at or after T.

The calls are counted, not timed (bench/calls.py wraps the storage port's tables), so the bound holds on a
loaded machine; the reads a client makes by the clock (the installation's setting once a second, HBase's
clock every 30 s) are left out, as they are not made per seek. The topics are written row by row with
chosen dates, as 10,000 batch rows of 100 messages (1,000,000 messages; a sequencer row spans 100 offsets),
the shape of the seek benchmark's topic. Their rows are one second apart, more than the sequencer's
disorder bound D allows at a tail-cache time of 1 s, so the search has to narrow down to a single row: the
worst case for the number of probes. A seek's calls grow with log2 of the number of rows (one probe per
halving) and not with the number of messages in a row.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest

from bench.calls import CallCounter
from tms_hbase import MessageId, MessagingClient, TopicId
from tms_hbase.model.rows import MESSAGE_COLUMN, SEQUENCE_COLUMN, BatchRow, counter_key, message_key

SEEK_CALLS = 20  # at most, per seek: fetch(topic, start_time_ms=t, limit=1)
ROWS = 10_000
PER_ROW = 100  # messages per batch row: 1,000,000 messages
SPACING_MS = 1000  # between rows: more than D at a tail-cache time of 1 s (D = 1.5 s, so rows may disorder)
JITTER_MS = 600  # a sequencer row's date is up to this much off its place (within D of every other row)
CACHE = 1
SEEKS = 40


def _write(client: MessagingClient, topic: TopicId, times: list[int], sequencer: bool) -> None:
    generation = client.get_topic(topic).generation
    payloads = tuple(bytes([i]) for i in range(PER_ROW))
    rows = []
    for i, publish_time in enumerate(times):
        position = i * PER_ROW + 1 if sequencer else i + 1
        row = BatchRow(publish_time, b"w" * 16, i, payloads, span=PER_ROW if sequencer else None)
        rows.append((message_key(topic, generation, position), {MESSAGE_COLUMN: row.encode()}))
    for start in range(0, len(rows), 1000):
        client.installation.messages.put_many(rows[start : start + 1000])
    if sequencer:  # the counter row: every offset handed out
        client.installation.messages.increment(counter_key(topic, generation), SEQUENCE_COLUMN, ROWS * PER_ROW)


@pytest.fixture(scope="module")
def topics(hbase_address: str, module_prefix: str) -> Iterator[tuple[MessagingClient, dict[str, list[int]]]]:
    """Both orderings' topics and their rows' dates, in order; the newest hours old (every hole settled)."""
    with MessagingClient(hbase_address, module_prefix, create_tables=True) as client:
        client.admin.set_tail_cache_seconds(CACHE)
        base = int(time.time() * 1000) - 4 * 3_600_000
        rng = random.Random(27)
        dates = {
            "chain": [base + i * SPACING_MS for i in range(ROWS)],
            "sequencer": [base + i * SPACING_MS + rng.randint(-JITTER_MS, JITTER_MS) for i in range(ROWS)],
        }
        for ordering, times in dates.items():
            topic = TopicId("seek", ordering)
            client.create_topic(topic, {"ordering": ordering, "ttl": "86400"})
            _write(client, topic, times, ordering == "sequencer")
        yield client, dates


@pytest.mark.parametrize("ordering", ["chain", "sequencer"])
def test_a_time_seek_on_a_million_messages_takes_at_most_20_calls_and_is_exact(
    topics: tuple[MessagingClient, dict[str, list[int]]], ordering: str
) -> None:
    client, dates = topics
    times = dates[ordering]
    topic = TopicId("seek", ordering)
    rng = random.Random(ordering)
    targets = [times[0], times[-1], times[-1] + 1, *(rng.randint(times[0], times[-1]) for _ in range(SEEKS))]
    list(client.fetch(topic, start_time_ms=times[0], limit=1))  # the topic's metadata and HBase's clock, cached
    counter = CallCounter()
    spent = []
    with counter.counting(client.installation):
        for t in targets:
            counter.reset()
            found = list(client.fetch(topic, start_time_ms=t, limit=1))
            # re-reading the installation's setting (once a second) and HBase's clock (every 30 s) is paid by
            # time, not per seek: a slow seek on a loaded machine meets it more often
            timed = sum(counter.calls[c] for c in ("metadata.get_cell", "metadata.put", "metadata.get_versions"))
            spent.append((counter.total - timed, dict(counter.calls)))
            expected = next((i for i, at in enumerate(times) if at >= t), None)  # the first row dated >= t
            if expected is None:
                assert found == [], f"seek to {t} past the last row found {found}"
                continue
            position = expected * PER_ROW + 1 if ordering == "sequencer" else expected + 1
            assert [(MessageId.decode(m.id).position, MessageId.decode(m.id).index) for m in found] == [(position, 0)]
            assert found[0].publish_time == times[expected]
    worst = max(spent, key=lambda s: s[0])
    print(f"{ordering}: calls per seek, median {sorted(s[0] for s in spent)[len(spent) // 2]}, worst {worst}")
    assert worst[0] <= SEEK_CALLS, f"a seek took {worst[0]} HBase calls: {worst[1]}"


def test_a_young_seek_reads_the_rows_from_the_frontier_once_then_takes_at_most_20_calls(
    client: MessagingClient,
) -> None:
    """The peers' workload: the whole topic younger than the settle time (the installation's default tail-cache
    time, 30 s: D = 30.75 s, settled 61 s after a row's date), written at a high rate (10,000 batch rows in 20 s,
    dated out of order within D). The first seek reads the rows below its answer once, from the generation's
    frontier, and moves the frontier up; every later seek below it, from any client, takes at most SEEK_CALLS
    calls (before, each one read the rows from its lower bound: up to all of the topic) and stays exact."""
    topic = TopicId("seek", "young")
    client.create_topic(topic, {"ttl": "86400"})  # the default ordering: the sequencer
    now = int(time.time() * 1000)
    rng = random.Random(5)
    times = [now - 20_000 + i * 2 + rng.randint(-JITTER_MS, JITTER_MS) for i in range(ROWS)]
    _write(client, topic, times, sequencer=True)
    counter = CallCounter()

    def seek(t: int) -> tuple[list[tuple[int, int]], int]:
        counter.reset()
        found = list(client.fetch(topic, start_time_ms=t, limit=1))
        timed = sum(counter.calls[c] for c in ("metadata.get_cell", "metadata.put", "metadata.get_versions"))
        return [(MessageId.decode(m.id).position, MessageId.decode(m.id).index) for m in found], counter.total - timed

    def expected(t: int) -> list[tuple[int, int]]:
        first = next((i for i, at in enumerate(times) if at >= t), None)
        return [] if first is None else [(first * PER_ROW + 1, 0)]

    list(client.fetch(topic, start_time_ms=now + 60_000, limit=1))  # the topic's metadata and HBase's clock, cached
    with counter.counting(client.installation):
        last = max(times)
        got, first_calls = seek(last)  # the newest date: the answer is near the tail, the rows below it are read
        assert got == expected(last)
        assert first_calls <= ROWS // 64 + SEEK_CALLS, first_calls  # one scan per 64 rows, once
        spent = []
        for t in [times[0], *(rng.randint(min(times), last) for _ in range(SEEKS))]:
            got, calls = seek(t)
            assert got == expected(t), t
            spent.append(calls)
    print(f"young sequencer topic: first seek {first_calls} calls; then median {sorted(spent)[len(spent) // 2]}")
    assert max(spent) <= SEEK_CALLS, spent
