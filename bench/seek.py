"""Benchmark 5: time seek on a 1,000,000-message topic (100,000 with --quick).

Setup: the topic is published in batches of 100 (10,000 batch rows for 1M messages), paced over at
least 30 s (8 s with --quick); the setup time is reported. Payloads are 100 B, not 1 KiB: the number
of reads does not depend on the payload size, while 1M × 1 KiB is 1 GiB written in seconds into the
shared standalone HBase (one JVM, 1 GiB heap), which then splits and compacts the region while the
seeks run; in a trial run that ran the region server out of memory. The time per read does grow with
the batch row's size.
Then ``fetch(topic, start_time_ms=t, limit=1)`` for random t between the first and last publish time.
Each seek is checked: the message returned is at or after t and the batch
row before it is before t.

Both orderings are measured side by side, each on its own topic of the same size: the chain (a search
by the rows' dates) and the sequencer (docs/ordering.md, "Time seek": a search for t − D, one scan that HBase
filters, and, while the row found is younger than the settle time, a read of the rows from t − D up to
it). The sequencer's seeks run twice: right after the setup (a seek whose row is younger than the
settle time reads up to D of rows) and once the last row is older than that (the common case of a
seek into the past). The installation's tail-cache time is 1 s here (see TAIL_CACHE). A third topic,
in an installation left at the default tail-cache time (30 s: settled 61 s after a row's date), is
published unpaced and sought right away, the whole topic younger than the settle time: the peers'
seek workload (bench/peers). Its first seek reads the rows below its answer from the generation's
frontier once; the later ones answer from the frontier.

Counted per seek, deterministically (bench/calls.py wraps the storage port's tables): the HBase calls (one per
operation of the port: a get, or a whole scan), the Thrift requests actually sent (a scan is open + fetch +
close) and the round trips they took (a scan's fetch and close are sent together: two), and which operations
they were. Reference: one raw happybase get of one of these rows.
"""

from __future__ import annotations

import bisect
import random
import time
from collections.abc import Callable

from tms_hbase import Message, MessageId, MessagingClient, TopicId
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, generation_prefix, message_key
from tms_hbase.model.tail_cache import DEFAULT_TAIL_CACHE_SECONDS
from tms_hbase.ordering import sequencer

from .calls import CallCounter
from .common import Result, Settings, bench_tables, median, new_topic, payloads, progress

BATCH = 100
PAYLOAD_SIZE = 100
SEEKS_PER_ROUND = 10
GOAL_CALLS = 20
# The sequencer's seek depends on D and the settle time, both set by the tail-cache time C (30 s by
# default: D = 30.5 s, settle 61 s). The setup publishes the topic in seconds, so with the default the
# whole topic would lie within D of any t and the seek would stop at offset 1. With C = 1 s (D = 1.5 s,
# settle 3 s) and the setup paced over 30 s (8 s with --quick), the topic spans many times D, as a
# topic written over hours does with the default.
TAIL_CACHE = 1
YOUNG = "sequencer, default settle time, whole topic young"


def run(settings: Settings) -> Result:
    total = settings.pick(1_000_000, 100_000)
    rows = total // BATCH
    result = Result(
        "seek", f"Time seek on a topic of {total:,} messages ({rows:,} batch rows of {BATCH} × {PAYLOAD_SIZE} B)"
    )
    table_rows, samples, notes = [], {}, []
    with bench_tables(settings, "seek") as (client, conn, _raw_name):
        client.admin.set_tail_cache_seconds(TAIL_CACHE)
        for ordering in ("chain", "sequencer"):
            topic = new_topic(client, f"seek-{ordering}", {"ordering": ordering})
            setup, newest = _setup(client, topic, rows, settings.pick(30.0, 8.0))
            notes.append(
                f"Setup ({ordering}): {total:,} messages as {rows:,} publishes of {BATCH} in {setup:.0f} s "
                f"({total / setup:,.0f} msg/s)."
            )
            phases = [ordering] if ordering == "chain" else ["sequencer, rows younger than the settle time"]
            if ordering == "sequencer":
                phases.append("sequencer, rows older than the settle time")
            for phase in phases:
                if phase.endswith("older than the settle time"):
                    settle = newest / 1000 + sequencer.settled(TAIL_CACHE) + 1
                    progress(f"seek: waiting {max(0.0, settle - time.time()):.0f} s for the topic to settle")
                    while time.time() < settle:
                        time.sleep(1)
                row, sample = _seeks(settings, client, conn, topic, phase)
                table_rows.append([f"{phase}: {len(sample['ms'])} random t over {rows:,} rows", *row])
                samples[phase] = sample
    with bench_tables(settings, "seek-young") as (client, conn, _raw_name):  # no setting: the default C, 30 s
        topic = new_topic(client, "seek-young")
        setup, _ = _setup(client, topic, rows, 0.0)
        notes.append(
            f"Setup ({YOUNG}): {total:,} messages as {rows:,} publishes of {BATCH}, unpaced, in {setup:.0f} s "
            f"({total / setup:,.0f} msg/s), in an installation with the default tail-cache time "
            f"(settled {sequencer.settled(DEFAULT_TAIL_CACHE_SECONDS):.0f} s after a row's date): every seek is "
            "into rows younger than that, as in the peers' seek workload. The first seek reads the rows below "
            "its answer from the generation's frontier; the later ones filter the rows below it in HBase."
        )
        row, sample = _seeks(settings, client, conn, topic, YOUNG)
        table_rows.append([f"{YOUNG}: {len(sample['ms'])} random t over {rows:,} rows", *row])
        samples[YOUNG] = sample
    result.table(
        [
            "seek (fetch start_time_ms=t, limit=1)",
            "HBase calls (median)",
            "max",
            "Thrift requests (median)",
            "max",
            "round trips (median)",
            "ms (median)",
            "ms p90",
            "raw get ms (median)",
        ],
        table_rows,
    )
    for phase in ("chain", "sequencer, rows older than the settle time"):
        calls = samples[phase]["calls"]
        result.goal(
            f"time seek in <= {GOAL_CALLS} HBase calls ({phase})",
            f"{median(calls):.0f} HBase calls (max {max(calls)}: {samples[phase]['worst']})",
            max(calls) <= GOAL_CALLS,
        )
    young = samples[YOUNG]["calls"]
    result.goal(
        f"time seek in <= {GOAL_CALLS} HBase calls ({YOUNG}, median: the first seek reads the rows once)",
        f"{median(young):.0f} HBase calls (max {max(young)})",
        median(young) <= GOAL_CALLS,
    )
    result.notes.extend(notes)
    result.samples = samples
    return result


def _setup(client: MessagingClient, topic: TopicId, rows: int, span: float) -> tuple[float, int]:
    """Publish the topic over at least ``span`` seconds (paced); returns the seconds it took and a time no
    publish is dated after (ms)."""
    batch = payloads(BATCH, PAYLOAD_SIZE)
    start = time.perf_counter()
    for i in range(rows):
        client.publish(topic, batch)
        pause = start + span * (i + 1) / rows - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        if (i + 1) % 2000 == 0:
            progress(f"seek setup {topic}: {i + 1:,}/{rows:,} batches ({time.perf_counter() - start:.0f} s)")
    setup = time.perf_counter() - start
    progress(f"seek setup {topic}: {rows * BATCH:,} messages in {setup:.1f} s")
    return setup, int(time.time() * 1000)  # no publish is dated later than this (one host's clock)


def _seeks(settings: Settings, client: MessagingClient, conn, topic: TopicId, phase: str) -> tuple[list, dict]:
    """``settings.rounds`` rounds of random seeks, each checked; returns the table row and the samples."""
    rng = random.Random(12345)
    generation = client.get_topic(topic).generation
    table = conn.table(client.installation.messages.name)
    prefix = generation_prefix(topic, generation)
    keys = [key for key, _ in table.scan(row_prefix=prefix, filter="KeyOnlyFilter()")]
    keys = [key for key in keys if len(key) == len(prefix) + 8]  # not the sequencer's counter row

    def row_time(position: int) -> int:
        return BatchRow.decode(table.row(message_key(topic, generation, position))[MESSAGE_COLUMN]).publish_time

    def before(position: int) -> int | None:
        """The position of the batch row before ``position`` (None at the first)."""
        at = bisect.bisect_left(keys, message_key(topic, generation, position))
        while at > 0 and BatchRow.decode(table.row(keys[at - 1])[MESSAGE_COLUMN]).skip:
            at -= 1
        return int.from_bytes(keys[at - 1][-8:], "big") if at > 0 else None

    positions = [int.from_bytes(k[-8:], "big") for k in keys]
    first, last = row_time(positions[0]), row_time(positions[-1])
    raw_get_ms = []
    for _ in range(50):
        position = rng.choice(positions)
        t0 = time.perf_counter()
        table.row(message_key(topic, generation, position))
        raw_get_ms.append((time.perf_counter() - t0) * 1000)
    calls: list[int] = []
    rpcs: list[int] = []
    trips: list[int] = []
    times: list[float] = []
    worst: dict[str, int] = {}
    counter = CallCounter()
    for r in range(settings.rounds):
        r_calls, r_ms = [], []
        for _ in range(SEEKS_PER_ROUND):
            t = rng.randint(first + 1, last)
            with counter.counting(client.installation):
                counter.reset()
                t0 = time.perf_counter()
                found = list(client.fetch(topic, start_time_ms=t, limit=1))
                elapsed = (time.perf_counter() - t0) * 1000
            if counter.total > max(calls, default=0):
                worst = dict(counter.calls)
            calls.append(counter.total)
            rpcs.append(counter.requests)
            trips.append(counter.round_trips)
            times.append(elapsed)
            r_calls.append(calls[-1])
            r_ms.append(elapsed)
            _check(found, t, row_time, before)
        progress(f"seek {phase}, round {r + 1}/{settings.rounds}: {median(r_calls):.0f} calls, {median(r_ms):.1f} ms")
    row = [
        median(calls),
        max(calls),
        median(rpcs),
        max(rpcs),
        median(trips),
        median(times),
        sorted(times)[int(0.9 * (len(times) - 1))],
        median(raw_get_ms),
    ]
    return row, {
        "calls": calls,
        "rpcs": rpcs,
        "round_trips": trips,
        "ms": times,
        "raw_get_ms": raw_get_ms,
        "worst": worst,
    }


def _check(found: list[Message], t: int, row_time: Callable[[int], int], before: Callable[[int], int | None]) -> None:
    if not found:
        raise AssertionError(f"seek to {t} found nothing")
    message = found[0]
    mid = MessageId.decode(message.id)
    previous = before(mid.position)
    if message.publish_time < t or mid.index != 0 or (previous is not None and row_time(previous) >= t):
        raise AssertionError(f"seek to {t} returned {mid} published at {message.publish_time}")
