"""A sequencer topic's bytes are exact (bytes checkpoints in its counter row: tms_hbase/publish/byte_totals.py),
in topic_stats and the exporter, before and after the sweeper deletes its older rows, with checkpoints at
most their spacing apart, none left below the low-water mark and none above a hole a batch may still fill."""

from __future__ import annotations

import itertools
import random
import time

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.model.clock import now_ms
from tms_hbase.model.rows import BYTES_PREFIX, MESSAGE_COLUMN, BatchRow, counter_key, message_key
from tms_hbase.ops.exporter import TopicCollector
from tms_hbase.ordering import sequencer
from tms_hbase.publish import byte_totals
from tms_hbase_sweeper.sweep import Sweeper

T = TopicId("seqbytes", "big")
TTL = 3600
GRACE = 4  # the smallest grace with a tail-cache setting of 1 s
MIB = 1 << 20


def exported_bytes(client: MessagingClient) -> float | None:
    samples = [
        sample.value
        for metric in TopicCollector(client, T.namespace, max_age=0).collect()
        for sample in metric.samples
        if metric.name == "tms_topic_bytes" and sample.labels.get("topic") == str(T)
    ]
    return samples[0] if samples else None


def checkpoints(client: MessagingClient) -> dict[int, int]:
    """offset: bytes below it, as the counter row holds them."""
    cells = client.installation.messages.get(counter_key(T, client.get_topic(T).generation))
    return {
        int(column[len(BYTES_PREFIX) :], 16): int.from_bytes(value, "big")
        for column, value in cells.items()
        if column.startswith(BYTES_PREFIX) and column != BYTES_PREFIX
    }


def publish_quarter_mib_batches(client: MessagingClient, count: int, rng: random.Random) -> None:
    """``count`` batches of 256 KiB each, cut into 1 to 5 messages of different sizes."""
    for _ in range(count):
        cuts = sorted(rng.sample(range(1, MIB // 4), rng.randint(0, 4)))
        bounds = [0, *cuts, MIB // 4]
        client.publish(T, [bytes([65 + i]) * (b - a) for i, (a, b) in enumerate(itertools.pairwise(bounds))])


def test_a_24_mib_sequencer_topic_reports_24_mib_before_and_after_a_sweep(client: MessagingClient) -> None:
    client.admin.init_tables()
    client.admin.set_tail_cache_seconds(1)
    client.create_topic(T, {"ordering": "sequencer", "ttl": str(TTL)})
    rng = random.Random(42)
    # a writer of its own, closed before the counts are read: a skip marker its keeper thread is still putting
    # over a released block's offsets is not in the skip index yet, and counts as messages until it is
    with MessagingClient(config=client.config) as writer:
        publish_quarter_mib_batches(writer, 48, rng)
        first_half_end = max(m.publish_time for m in client.fetch(T))
        time.sleep(0.05)  # the second half is dated after the first
        publish_quarter_mib_batches(writer, 48, rng)

    stats = client.topic_stats(T)
    assert sum(len(m.payload) for m in client.fetch(T)) == 24 * MIB
    assert (stats.bytes, stats.bytes_exact, stats.messages) == (24 * MIB, True, len(list(client.fetch(T))))
    assert exported_bytes(client) == 24 * MIB
    marks = checkpoints(client)  # written by those stats: each at most the spacing above the one before
    steps = sorted([(1, 0), *marks.items()])
    assert len(steps) > 1 and all(b <= 24 * MIB for _, b in steps)
    assert all(b2 - b1 <= byte_totals.CHECKPOINT_BYTES + MIB // 4 for (_, b1), (_, b2) in itertools.pairwise(steps))

    # the sweeper, as if the TTL and the grace had passed for the first half
    at = first_half_end + (TTL + GRACE) * 1000 + 1  # (a row is kept while its TTL + grace ends at or after now)
    Sweeper(client.installation, grace_seconds=GRACE, clock=lambda: at).sweep_once()

    assert sum(len(m.payload) for m in client.fetch(T)) == 12 * MIB
    stats = client.topic_stats(T)
    assert (stats.bytes, stats.bytes_exact) == (12 * MIB, True)
    assert exported_bytes(client) == 12 * MIB
    low_water = sequencer.low_water(client.installation.messages, T, client.get_topic(T).generation)
    assert low_water > 1 and min(checkpoints(client)) == low_water  # the older ones went with the rows


def test_no_checkpoint_passes_a_hole_so_a_batch_landing_there_late_is_counted(
    client: MessagingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(byte_totals, "CHECKPOINT_ROWS", 1)  # a checkpoint after every row read
    client.admin.init_tables()
    client.admin.set_tail_cache_seconds(1)
    client.create_topic(T, {"ordering": "sequencer", "ttl": str(TTL)})
    generation = client.get_topic(T).generation
    client.publish(T, [b"a" * 10])
    time.sleep(0.05)  # idle: the next publish reserves no block ahead
    hole = sequencer.reserve(client.installation.messages, T, generation, 1)  # a writer that has not written yet
    for _ in range(3):
        client.publish(T, [b"b" * 100])
        time.sleep(0.05)

    stats = client.topic_stats(T)  # (no fetch: a reader would fill the hole after H)
    assert (stats.bytes, stats.bytes_exact) == (310, True)
    assert max(checkpoints(client)) <= hole  # none above the hole: what lies above it is not final

    late = BatchRow(now_ms(), bytes(16), 1, (b"c" * 1000,), span=1).encode()  # the slow writer's batch lands
    assert client.installation.messages.put_if_absent(message_key(T, generation, hole), MESSAGE_COLUMN, late)
    assert sum(len(m.payload) for m in client.fetch(T)) == 1310
    assert (client.topic_stats(T).bytes, exported_bytes(client)) == (1310, 1310)
    assert max(checkpoints(client)) > hole  # the rows are contiguous now: checkpoints pass it
