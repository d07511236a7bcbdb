"""Benchmark 12: shared subscriptions (a work queue) — scaling over consumer processes, and the cost
against raw happybase doing the same reads and per-message state writes.

1. **With 5 ms of work per message.** For K = 1, 2, 4, 8 consumer processes on one shared subscription
   (``claim_size`` ``CLAIM``) of a topic holding 400 × K messages (batches of 100 × 100 B): each process
   receives in batches of ``BATCH``, sleeps 5 ms per message (the work) and acknowledges each message on its own,
   as a handler does. Rate = messages / (last acknowledgement − the common start). Goal: 4 consumers
   ≥ 3.5× one, 8 ≥ 6×.
2. **Without work**, the same at K = 1, 2, 4, 8 on a topic of 8,000 messages, next to raw happybase
   with K processes (disjoint key ranges) scanning the same message rows and writing, per message, a
   claim cell (checkAndPut if absent) and then its acknowledgement (checkAndPut from the claim): the
   state writes a work queue cannot do without. Goal: consumers ≥ 0.8× raw.
3. **Stalls**: the longest time in a round without a delivery to any consumer (a work queue must not
   sit idle with work left: a stall an ack timeout long showed up here once).
4. **Acknowledgements noted** (``ack(delivery, wait=False)``), without work: each batch's acknowledgements
   written together by one ``flush()`` (one round trip) instead of one compare-and-set each.
5. **The cost of an ack**: the median time of one ``ack()`` call in the runs above, and the HBase calls
   per message (receive, claim, ack, reaping) counted in the consumer processes two ways: round trips
   (the claims of one read of a range are pipelined, one round trip for up to 64) and requests (each
   claim counted, as HBase serves each).

The raw reference does the same reads (every message row once) and the same per-message state writes
(a claim created if absent, then its acknowledgement, each a checkAndPut), no more: its K processes split
the rows between them beforehand, so it has none of a work queue's sharing out of ranges, reaping or
checks that the subscription still exists. An idle consumer waits on its doorbell and looks again
after ``IDLE_POLL`` regardless.

The sides rotate every round. Every time is the host's wall clock within one machine (processes start
together at a time five seconds ahead); the library's deadlines are HBase's clock as always.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from .common import (
    Result,
    Settings,
    bench_tables,
    median,
    new_topic,
    payloads,
    progress,
    ratio,
    rotated_rounds,
    wait_until,
)
from .procs import Workers

COUNTS = (1, 2, 4, 8)
BATCH = 32  # deliveries per receive
CLAIM = 128  # positions per range: at least the 100 messages of one publish (docs/shared.md, "Costs")
WORK = 0.005
PAYLOAD = 100
ROW = 100  # messages per publish (one batch row)
GOAL_4, GOAL_8, GOAL_RAW = 3.5, 6.0, 0.8
# an idle consumer waits on its doorbell, rung when another gives back a range with more to read, but looks
# again after this regardless: at the end of a run of a few seconds the default half second is too long
IDLE_POLL = 0.05

_open: dict[tuple[str, str], Any] = {}  # per worker process: clients and raw connections


def run(settings: Settings) -> Result:
    result = Result("shared", "Shared subscriptions: 1–8 consumer processes, with and without work, vs raw happybase")
    counts = settings.pick(COUNTS, (1, 4))  # quick (CI): enough to run every side and check its counts
    per_consumer = settings.pick(400, 150)
    total = settings.pick(8_000, 2_000)
    rates: dict[str, list[float]] = {f"{side}{k}": [] for k in counts for side in ("work", "idle", "noted", "raw")}
    acks: list[float] = []
    calls: dict[int, list[float]] = {k: [] for k in counts}
    requests: dict[int, list[float]] = {k: [] for k in counts}
    stalls: dict[str, list[float]] = {f"{side}{k}": [] for k in counts for side in ("work", "idle", "noted")}
    with bench_tables(settings, "shared") as (client, raw, raw_name), Workers(max(counts)) as workers:
        prefix = client.installation.prefix
        raw.conn.create_table(raw_name, {"d": {"max_versions": 1}})
        worked = {k: str(_filled(client, f"work{k}", per_consumer * k)) for k in counts}
        plain = str(_filled(client, "plain", total))
        progress(f"shared setup: {sum(per_consumer * k for k in counts) + total:,} messages")
        rounds = iter(range(1_000_000))

        def shared_round(topic: str, k: int, work: float, expected: int, wait: bool = True) -> float:
            name = f"s{next(rounds)}"
            client.create_subscription(topic, name, shared=True, ack_timeout_seconds=30, claim_size=CLAIM)
            start_at = time.time() + 5.0
            for i in range(k):
                workers.submit(i, consume, settings.address, prefix, topic, name, work, start_at, wait)
            got = [workers.result(i, 600) for i in range(k)]
            count = sum(g["count"] for g in got)
            if count != expected:
                raise AssertionError(f"{k} consumers acknowledged {count} messages, expected {expected}")
            acks.extend(a for g in got for a in g["acks"])
            if not work and wait:
                calls[k].append(sum(g["calls"] for g in got) / count)
                requests[k].append(sum(g["requests"] for g in got) / count)
            received = sorted([start_at, *(t for g in got for t in g["received"])])
            side = "work" if work else "idle" if wait else "noted"
            stalls[f"{side}{k}"].append(max(b - a for a, b in itertools.pairwise(received)))
            return count / (max(g["last"] for g in got) - start_at)

        def raw_round(k: int) -> float:
            state = f"r{next(rounds)}".encode()
            start_at = time.time() + 5.0
            slices = _slices(client, plain, k)
            for i, (first, stop) in enumerate(slices):
                args = (settings.address, client.installation.messages.name, raw_name, state, first, stop, start_at)
                workers.submit(i, raw_consume, *args)
            got = [workers.result(i, 600) for i in range(k)]
            count = sum(g["count"] for g in got)
            if count != total:
                raise AssertionError(f"raw: {k} processes handled {count} messages, expected {total}")
            return count / (max(g["last"] for g in got) - start_at)

        sides: list[tuple[str, Any]] = []
        for k in counts:
            sides.append((f"work{k}", lambda k=k: shared_round(worked[k], k, WORK, per_consumer * k)))
            sides.append((f"idle{k}", lambda k=k: shared_round(plain, k, 0.0, total)))
            sides.append((f"noted{k}", lambda k=k: shared_round(plain, k, 0.0, total, wait=False)))
            sides.append((f"raw{k}", lambda k=k: raw_round(k)))
        rotated_rounds("shared", settings.rounds, sides, rates)
        workers_close(workers, max(counts))
    _report(result, rates, acks, (calls, requests), stalls, counts, per_consumer, total)
    return result


def _report(
    result: Result,
    rates: dict[str, list[float]],
    acks: list[float],
    counted: tuple[dict[int, list[float]], dict[int, list[float]]],
    stalls: dict[str, list[float]],
    counts: tuple[int, ...],
    per_consumer: int,
    total: int,
) -> None:
    m = {name: median(values) for name, values in rates.items()}
    calls, requests = counted
    rows = []
    for k in counts:
        rows.append(
            [
                k,
                m[f"work{k}"],
                f"{ratio(m[f'work{k}'], m['work1']):.2f}×",
                m[f"idle{k}"],
                m[f"noted{k}"],
                m[f"raw{k}"],
                f"{ratio(m[f'idle{k}'], m[f'raw{k}']):.2f}×",
                median(calls[k]),
                median(requests[k]),
            ]
        )
    result.table(
        [
            "consumer processes",
            f"with 5 ms work: msg/s ({per_consumer:,} per process)",
            "÷ one",
            f"no work: msg/s ({total:,} messages)",
            "no work, acks noted: msg/s",
            "raw happybase msg/s",
            "÷ raw",
            "HBase round trips per message",
            "HBase requests per message",
        ],
        rows,
    )
    for k, goal in ((4, GOAL_4), (8, GOAL_8)):
        if k in counts:
            scaled = ratio(m[f"work{k}"], m["work1"])
            result.goal(f"with 5 ms work, {k} consumers ≥ {goal}× one", f"{scaled:.2f}×", scaled >= goal)
    worst = min(ratio(m[f"idle{k}"], m[f"raw{k}"]) for k in counts)
    result.goal(f"without work, consumers ≥ {GOAL_RAW}× raw happybase (worst K)", f"{worst:.2f}×", worst >= GOAL_RAW)
    ordered = sorted(acks)
    if ordered:
        p50, p99 = ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.99)]
        result.notes.append(
            f"One `ack()` of one message: median {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms (one "
            "compare-and-set of the claim cell; raw happybase's acknowledgement is the same call)."
        )
    longest = ", ".join(f"{name} {max(values):.1f} s" for name, values in stalls.items() if values)
    result.notes.append(
        f"Longest time without a delivery to any consumer (from the common start to the last delivery), the "
        f"worst round of each side: {longest}."
    )
    result.samples.update(
        {"rates": rates, "calls_per_message": calls, "requests_per_message": requests, "longest_gap_seconds": stalls}
    )


def _filled(client: Any, name: str, count: int) -> Any:
    topic = new_topic(client, name)
    for first in range(0, count, ROW):
        client.publish(topic, payloads(min(ROW, count - first), PAYLOAD))
    return topic


def _slices(client: Any, topic: str, k: int) -> list[tuple[bytes, bytes]]:
    """K disjoint key ranges of the topic's message rows, about equal in rows."""
    from tms_hbase import TopicId
    from tms_hbase.model.rows import generation_prefix, past_last

    t = TopicId.parse(topic)
    prefix = generation_prefix(t, client.get_topic(t).generation)
    keys = [key for key, _ in client.installation.messages.scan(prefix=prefix, filter="KeyOnlyFilter()")]
    bounds = [keys[len(keys) * i // k] for i in range(k)] + [past_last(prefix)]
    return list(itertools.pairwise(bounds))


# -- worker jobs ----------------------------------------------------------------------------------


def _client(address: str, prefix: str) -> Any:
    from tms_hbase import MessagingClient

    key = (address, prefix)
    if key not in _open:
        _open[key] = MessagingClient(address, prefix=prefix, create_tables=False)
    return _open[key]


def consume(
    address: str, prefix: str, topic: str, name: str, work: float, start_at: float, wait: bool = True
) -> dict[str, Any]:
    """Worker job: one consumer of the shared subscription until a receive finds nothing for 2 s; each
    message worked on ``work`` s and acknowledged on its own (``wait=False``: noted, and each batch's
    written by one flush)."""
    from tms_hbase import TopicId

    client = _client(address, prefix)
    acks: list[float] = []
    received: list[float] = []
    with client.shared_consumer(TopicId.parse(topic), name, poll_interval_seconds=IDLE_POLL) as consumer:
        wait_until(start_at)
        installation = client.installation
        calls, requests, count, last = installation.calls, installation.requests, 0, start_at
        while True:
            got = consumer.receive(BATCH, 2.0)
            if not got:
                break
            received.append(time.time())
            for delivery in got:
                if work:
                    time.sleep(work)
                if wait:
                    started = time.perf_counter()
                    consumer.ack(delivery)
                    acks.append(time.perf_counter() - started)
                else:
                    consumer.ack(delivery, wait=False)
                count += 1
            if not wait:
                consumer.flush()
            last = time.time()
        calls, requests = installation.calls - calls, installation.requests - requests
    return {"count": count, "last": last, "calls": calls, "requests": requests, "acks": acks, "received": received}


def raw_consume(
    address: str, table: str, state_table: str, state: bytes, first: bytes, stop: bytes, start_at: float
) -> dict[str, Any]:
    """Worker job: happybase scans message rows ``[first, stop)`` of the installation and, per message,
    writes a claim cell if absent and then its acknowledgement from the claim (two checkAndPuts)."""
    import happybase

    from tms_hbase.model.rows import decode_row
    from tms_hbase.storage.connection import mutation

    host, port = address.rsplit(":", 1)
    conn = happybase.Connection(host, int(port))  # a fresh one: the Thrift gateway drops idle ones
    try:
        messages = conn.table(table)
        column = b"d:m"
        wait_until(start_at)
        count = 0
        for row, data in messages.scan(row_start=first, row_stop=stop, batch_size=1000):
            if column not in data:
                continue  # the generation's counter row
            for i in range(len(decode_row(row, data[column]).payloads)):
                cell = state + row + i.to_bytes(4, "big")
                claim = b'{"o":"raw","d":%d,"n":1}' % int(time.time() * 1000)
                conn.client.checkAndPut(state_table.encode(), cell, column, None, mutation(column, claim), {})
                conn.client.checkAndPut(state_table.encode(), cell, column, claim, mutation(column, b'{"s":"a"}'), {})
                count += 1
        return {"count": count, "last": time.time()}
    finally:
        conn.close()


def close_all() -> None:
    for value in _open.values():
        value.close()
    _open.clear()


def workers_close(workers: Workers, count: int) -> None:
    for i in range(count):
        workers.submit(i, close_all)
    for i in range(count):
        workers.result(i, 60)
