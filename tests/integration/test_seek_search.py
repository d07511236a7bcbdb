"""The time seek's search guesses where a time lies from the dates it has read (an interpolation search):
on rows written at a rate that changes by orders of magnitude (bursts, an hour's pause, a slowing writer),
where every guess can mislead it, it still finds, on both orderings, the first message in order dated at or
after T for T at every edge of every batch row (a row's date, a millisecond before and after it), before the
first message and after the last, past the holes dead writers left, from this process, from the asyncio
client and from a reader in a new process; and it never takes more calls than :data:`SEEK_CALLS`.

The rows are written with chosen dates (hours old: every hole is settled); a sequencer topic's dates are out
of order within its disorder bound D, and some of its offsets were never written (dead writers' holes)."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from bench.calls import CallCounter
from tms_hbase import MessageId, MessagingClient, TopicId
from tms_hbase.aio import AsyncMessagingClient
from tms_hbase.model.rows import MESSAGE_COLUMN, SEQUENCE_COLUMN, BatchRow, counter_key, message_key
from tms_hbase.ordering import sequencer

PHASE = 75  # rows in each of the four rates below
ROWS = 4 * PHASE
CACHE = 1  # tail-cache seconds: D = 1.5 s
JITTER_MS = 600  # a sequencer row's date is up to this much off its place (within D of every other row)
SEEK_CALLS = 20  # at most, per seek (the bound the call-count test holds on a million messages)
TIMED = ("metadata.get_cell", "metadata.put", "metadata.get_versions")  # reads made by the clock, not per seek


def _dates(base: int) -> list[int]:
    """Row dates whose rate changes by orders of magnitude: a burst 1 ms apart, an hour's pause, rows a
    second apart, rows ever further apart (a slowing writer), and a burst again."""
    dates, at = [], base
    for i in range(ROWS):
        if i < PHASE:
            at += 1
        elif i == PHASE:
            at += 3_600_000
        elif i < 2 * PHASE:
            at += 1000
        elif i < 3 * PHASE:
            at += 40 * (i - 2 * PHASE + 1) ** 2  # up to 225 s apart
        else:
            at += 2
        dates.append(at)
    return dates


@pytest.fixture(scope="module")
def topics(
    hbase_address: str, module_prefix: str
) -> Iterator[tuple[MessagingClient, dict[str, list[tuple[int, int]]]]]:
    """Both orderings' topics and their rows as (position, date), in order."""
    with MessagingClient(hbase_address, module_prefix, create_tables=True) as client:
        client.admin.set_tail_cache_seconds(CACHE)
        rng = random.Random(61)
        base = int(time.time() * 1000) - 6 * 3_600_000
        rows: dict[str, list[tuple[int, int]]] = {}
        for ordering in ("chain", "sequencer"):
            topic = TopicId("search", ordering)
            client.create_topic(topic, {"ordering": ordering, "ttl": "86400"})
            generation = client.get_topic(topic).generation
            written, cells, offset = [], [], 1
            for i, date in enumerate(_dates(base)):
                count = rng.randint(1, 4)
                payloads = tuple(f"{ordering}-{i}-{n}".encode() for n in range(count))
                if ordering == "sequencer":
                    if i % 37 == 5:
                        offset += rng.randint(1, 3)  # a dead writer's reservation: a hole, never written
                    date += rng.randint(-JITTER_MS, JITTER_MS)
                    row = BatchRow(date, b"w" * 16, i, payloads, span=count)
                    position, offset = offset, offset + count
                else:
                    row, position = BatchRow(date, b"w" * 16, i, payloads), i + 1
                written.append((position, date))
                cells.append((message_key(topic, generation, position), {MESSAGE_COLUMN: row.encode()}))
            client.installation.messages.put_many(cells)
            if ordering == "sequencer":  # the counter row: every offset handed out
                client.installation.messages.increment(counter_key(topic, generation), SEQUENCE_COLUMN, offset - 1)
            rows[ordering] = written
        yield client, rows


def _targets(rows: list[tuple[int, int]]) -> list[int]:
    """Every edge of every row's date, before the first and after the last."""
    dates = sorted({date for _, date in rows})
    return sorted(
        {t for date in dates for t in (date - 1, date, date + 1)} | {dates[0] - 3_600_000, dates[-1] + 60_000}
    )


def _expected(rows: list[tuple[int, int]], t: int) -> list[tuple[int, int]]:
    """The first message, in order, dated at or after ``t``: (position, index), or none."""
    return next(([(position, 0)] for position, date in rows if date >= t), [])


def _ids(messages) -> list[tuple[int, int]]:
    return [(MessageId.decode(m.id).position, MessageId.decode(m.id).index) for m in messages]


@pytest.mark.parametrize("ordering", ["chain", "sequencer"])
def test_a_seek_to_every_edge_of_every_row_finds_the_first_message_dated_at_or_after_it(
    topics: tuple[MessagingClient, dict[str, list[tuple[int, int]]]], ordering: str
) -> None:
    client, rows = topics
    topic = TopicId("search", ordering)
    counter = CallCounter()
    worst = (0, 0)
    with counter.counting(client.installation):
        for t in _targets(rows[ordering]):
            counter.reset()
            found = _ids(client.fetch(topic, start_time_ms=t, limit=1))
            assert found == _expected(rows[ordering], t), f"seek to {t}"
            calls = counter.total - sum(counter.calls[c] for c in TIMED)
            worst = max(worst, (calls, t))
    assert worst[0] <= SEEK_CALLS, f"a seek to {worst[1]} took {worst[0]} HBase calls"


@pytest.mark.parametrize("ordering", ["chain", "sequencer"])
def test_the_asyncio_client_seeks_to_the_same_messages(
    topics: tuple[MessagingClient, dict[str, list[tuple[int, int]]]], ordering: str, hbase_address: str
) -> None:
    client, rows = topics
    topic = TopicId("search", ordering)
    targets = random.Random(ordering).sample(_targets(rows[ordering]), 60)

    async def seeks() -> list[list[tuple[int, int]]]:
        async with AsyncMessagingClient(hbase_address, client.installation.prefix, timeout_seconds=60) as aio:
            return [_ids([m async for m in aio.fetch(topic, start_time_ms=t, limit=1)]) for t in targets]

    assert asyncio.run(seeks()) == [_expected(rows[ordering], t) for t in targets]


READER = """
import json, sys
from tms_hbase import MessageId, MessagingClient, TopicId
address, prefix, ordering, targets = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
with MessagingClient(address, prefix) as client:
    found = []
    for t in targets:
        ids = [MessageId.decode(m.id) for m in client.fetch(TopicId("search", ordering), start_time_ms=t, limit=1)]
        found.append([[i.position, i.index] for i in ids])
print(json.dumps(found))
"""


@pytest.mark.parametrize("ordering", ["chain", "sequencer"])
def test_a_reader_in_a_new_process_seeks_to_the_same_messages(
    topics: tuple[MessagingClient, dict[str, list[tuple[int, int]]]], ordering: str, hbase_address: str
) -> None:
    client, rows = topics
    targets = random.Random(ordering + "new").sample(_targets(rows[ordering]), 60)
    done = subprocess.run(
        [sys.executable, "-c", READER, hbase_address, client.installation.prefix, ordering, json.dumps(targets)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = [[tuple(pair) for pair in answer] for answer in json.loads(done.stdout)]
    assert found == [_expected(rows[ordering], t) for t in targets]


@pytest.mark.parametrize("ordering", ["chain", "sequencer"])
def test_a_reader_that_knew_the_first_row_seeks_exactly_after_the_sweeper_deleted_it(
    client: MessagingClient, ordering: str
) -> None:
    """A reader keeps the first batch it read of a generation; once the sweeper deleted a prefix of the rows
    (that batch among them), its seeks still find the first message left dated at or after T."""
    client.admin.set_tail_cache_seconds(CACHE)
    topic = TopicId("search", f"swept-{ordering}")
    client.create_topic(topic, {"ordering": ordering, "ttl": "86400"})
    generation = client.get_topic(topic).generation
    base = int(time.time() * 1000) - 3_600_000
    rows, cells = [], []
    for i in range(100):
        position, date = (2 * i + 1 if ordering == "sequencer" else i + 1), base + 1000 * i
        row = BatchRow(date, b"w" * 16, i, (b"a", b"b"), span=2 if ordering == "sequencer" else None)
        rows.append((position, date))
        cells.append((message_key(topic, generation, position), {MESSAGE_COLUMN: row.encode()}))
    client.installation.messages.put_many(cells)
    if ordering == "sequencer":
        client.installation.messages.increment(counter_key(topic, generation), SEQUENCE_COLUMN, 200)
    targets = [base - 1, base, base + 500, base + 30_000, base + 30_500, base + 60_000, base + 200_000]

    def seeks() -> list[list[tuple[int, int]]]:
        return [_ids(client.fetch(topic, start_time_ms=t, limit=1)) for t in targets]

    assert seeks() == [_expected(rows, t) for t in targets]
    swept, left = rows[:40], rows[40:]  # the sweeper: the low-water mark first, then the rows below it
    if ordering == "sequencer":
        sequencer.raise_low_water(client.installation.messages, topic, generation, left[0][0])
    client.installation.messages.delete_many([message_key(topic, generation, position) for position, _ in swept])
    assert seeks() == [_expected(left, t) for t in targets]
