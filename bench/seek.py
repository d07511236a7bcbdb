"""Benchmark 5: time seek on a 1,000,000-message topic (100,000 with --quick).

Setup: the topic is published in batches of 100 (10,000 batch rows for 1M messages); the setup time
is reported. Payloads are 100 B, not 1 KiB: the number of reads does not depend on the payload size,
while 1M × 1 KiB is 1 GiB written in seconds into the shared standalone HBase (one JVM, 1 GiB heap),
which then splits and compacts the region while the seeks run; in a trial run that ran the region
server out of memory. The time per read does grow with the batch row's size (docs/benchmarks.md).
Then ``fetch(topic, start_time=t, limit=1)`` for random t between the first and last publish time.
Each seek is checked: the message returned is at or after t and the batch
row before it is before t. Counted per seek: the client's own count of HBase calls
(``client.installation.calls``, one per borrowed connection: a get, or a whole scan) and the Thrift
requests actually sent (a scan is open + fetch + close). Reference: one raw happybase get of one
of these rows.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from tms_hbase import Message, MessageId
from tms_hbase.rows import MESSAGE_COLUMN, BatchRow, message_key

from .common import Result, RpcCounter, Settings, bench_tables, median, new_topic, payloads, progress

BATCH = 100
PAYLOAD_SIZE = 100
SEEKS_PER_ROUND = 10
GOAL_READS = 40


def run(settings: Settings) -> Result:
    total = settings.pick(1_000_000, 100_000)
    rows = total // BATCH
    result = Result(
        "seek", f"Time seek on a topic of {total:,} messages ({rows:,} batch rows of {BATCH} × {PAYLOAD_SIZE} B)"
    )
    batch = payloads(BATCH, PAYLOAD_SIZE)
    rng = random.Random(12345)
    calls: list[int] = []
    rpcs: list[int] = []
    times: list[float] = []
    round_calls: list[float] = []
    round_ms: list[float] = []
    RpcCounter.install()
    with bench_tables(settings, "seek") as (client, conn, _raw_name):
        topic = new_topic(client, "seek")
        start = time.perf_counter()
        for i in range(rows):
            client.publish(topic, batch)
            if (i + 1) % 2000 == 0:
                progress(f"seek setup: {i + 1:,}/{rows:,} batches ({time.perf_counter() - start:.0f} s)")
        setup = time.perf_counter() - start
        progress(f"seek setup: {total:,} messages in {setup:.1f} s")
        generation = client.get_topic(topic).generation
        table = conn.table(client.installation.messages.name)

        def row_time(position: int) -> int:
            return BatchRow.decode(table.row(message_key(topic, generation, position))[MESSAGE_COLUMN]).publish_time

        first, last = row_time(1), row_time(rows)
        raw_get_ms = []
        for _ in range(50):
            position = rng.randint(1, rows)
            t0 = time.perf_counter()
            table.row(message_key(topic, generation, position))
            raw_get_ms.append((time.perf_counter() - t0) * 1000)

        for r in range(settings.rounds):
            r_calls, r_ms = [], []
            for _ in range(SEEKS_PER_ROUND):
                t = rng.randint(first + 1, last)
                before_calls, before_rpcs = client.installation.calls, RpcCounter.count
                t0 = time.perf_counter()
                found = list(client.fetch(topic, start_time=t, limit=1))
                elapsed = (time.perf_counter() - t0) * 1000
                calls.append(client.installation.calls - before_calls)
                rpcs.append(RpcCounter.count - before_rpcs)
                times.append(elapsed)
                r_calls.append(calls[-1])
                r_ms.append(elapsed)
                _check(found, t, row_time)
            round_calls.append(median(r_calls))
            round_ms.append(median(r_ms))
            progress(
                f"seek round {r + 1}/{settings.rounds}: {round_calls[-1]:.0f} calls, {round_ms[-1]:.1f} ms (median)"
            )

    result.table(
        [
            "seek (fetch start_time=t, limit=1)",
            "HBase calls (median)",
            "max",
            "Thrift requests (median)",
            "max",
            "ms (median)",
            "ms p90",
            "raw get ms (median)",
        ],
        [
            [
                f"{len(times)} random t over {rows:,} batch rows",
                median(calls),
                max(calls),
                median(rpcs),
                max(rpcs),
                median(times),
                sorted(times)[int(0.9 * (len(times) - 1))],
                median(raw_get_ms),
            ]
        ],
    )
    result.goal(
        f"time seek in < {GOAL_READS} reads",
        f"{median(calls):.0f} HBase calls (max {max(calls)})",
        max(calls) < GOAL_READS,
    )
    result.notes.append(
        f"Setup: {total:,} messages as {rows:,} publishes of {BATCH} in {setup:.0f} s ({total / setup:,.0f} msg/s)."
    )
    result.samples = {"calls": calls, "rpcs": rpcs, "ms": times, "setup_s": setup, "raw_get_ms": raw_get_ms}
    return result


def _check(found: list[Message], t: int, row_time: Callable[[int], int]) -> None:
    if not found:
        raise AssertionError(f"seek to {t} found nothing")
    message = found[0]
    mid = MessageId.decode(message.id)
    if message.publish_time < t or mid.index != 0 or (mid.position > 1 and row_time(mid.position - 1) >= t):
        raise AssertionError(f"seek to {t} returned {mid} published at {message.publish_time}")
