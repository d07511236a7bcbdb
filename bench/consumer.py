"""Benchmark 9: consumers — throughput, wake-up latency, and the cost of lag and topic_stats.

1. **Throughput.** A topic of N messages (batches of 100 × 1 KiB, every other batch published under a
   transaction write pointer, so that a committed-only read judges half the rows). A round reads all of it
   once with a raw ``client.fetch(topic)``, once with a consumer of a new subscription (``for m in
   consumer``, one commit at the end; committed-only, the default), once with such a consumer reading
   ``isolation="uncommitted"`` (every row as stored: what a consumer read before committed-only reads), and
   once more committing every 1,000 messages. Each round every side reads twice, in A B B A order (from
   the other end every other round), after an untimed read of each; ratios are medians of per-round ratios.
2. **Wake-up latency** at about 1,000 msg/s: a paced publisher process (bench/latency.py's) and a
   consumer process that waits with ``poll`` (doorbell, half-second fallback poll). Latency = the
   consumer's clock when ``poll`` returned the message − the send time in the payload. Alongside:
   raw happybase put → a reader scanning every 2 ms (bench/latency.py's raw pair). Also counted:
   the consumer's HBase calls per second while the topic is idle (no busy polling: about 2/s).
3. **lag and topic_stats on a big topic** (1M messages as 10,000 rows of 100 × 100 B; 100k with
   --quick): time and HBase calls of ``lag`` for subscriptions at the start, middle and end, and
   of ``topic_stats`` (3 rate windows, those 3 subscriptions).
"""

from __future__ import annotations

import time

from tms_hbase.tx import write_pointer_now

from . import latency
from .common import (
    Result,
    Settings,
    abba,
    bench_tables,
    create_raw_table,
    median,
    new_topic,
    payloads,
    percentile,
    progress,
    ratio,
    send_time_of,
)
from .procs import Workers

BATCH = 100
PAYLOAD_SIZE = 1024
GOAL_THROUGHPUT = 0.9
GOAL_COMMITTED = 0.9  # committed-only ÷ uncommitted consumer at least
GOAL_P99_MS = 50.0
GOAL_STATS_S = 2.0
BIG_PAYLOAD = 100

_open: dict[tuple[str, str], object] = {}  # per worker process


def run(settings: Settings) -> Result:
    result = Result("consumer", "Consumers: throughput vs fetch, wake-up latency, lag and topic_stats cost")
    _throughput(settings, result)
    _latency(settings, result)
    _stats_cost(settings, result)
    return result


# -- 1. throughput ------------------------------------------------------------------------------


def _throughput(settings: Settings, result: Result) -> None:
    total = settings.pick(100_000, 20_000)
    batch = payloads(BATCH, PAYLOAD_SIZE)
    rates: dict[str, list[float]] = {"fetch": [], "consumer": [], "consumer_uncommitted": [], "consumer_commits": []}
    cpu: dict[str, list[float]] = {name: [] for name in rates}  # this process's CPU µs per message read
    with bench_tables(settings, "cons") as (client, _raw, _raw_name):
        topic = new_topic(client, "consumer")
        for i in range(total // BATCH):  # every other batch transactional (committed: no transaction system)
            client.publish(topic, batch, tx_write_pointer=write_pointer_now() if i % 2 else None)
        progress(f"consumer setup: {total:,} messages")
        subscriptions = iter(range(1_000_000))

        def fetch_round() -> float:  # seconds, as consumer_round
            started = time.perf_counter()
            _check(sum(1 for _ in client.fetch(topic)), total)
            return time.perf_counter() - started

        def consumer_round(commit_every: int | None, isolation: str = "committed") -> float:
            name = f"s{next(subscriptions)}"
            client.create_subscription(topic, name)
            started = time.perf_counter()
            count = 0
            with client.consumer(topic, name, max_wait_seconds=5.0, isolation=isolation) as consumer:
                for _ in consumer:
                    count += 1
                    if commit_every and count % commit_every == 0:
                        consumer.commit()
                    if count == total:
                        break
                consumer.commit()
                elapsed = time.perf_counter() - started
            _check(count, total)
            return elapsed

        sides = [
            ("fetch", fetch_round),
            ("consumer", lambda: consumer_round(None)),
            ("consumer_uncommitted", lambda: consumer_round(None, "uncommitted")),
            ("consumer_commits", lambda: consumer_round(1000)),
        ]
        for _, measure in sides:  # warm-up: every side reads once, untimed
            measure()
        for r in range(settings.rounds):  # every side twice a round, in A B B A order (see common.abba)
            wall, used = dict.fromkeys(rates, 0.0), dict.fromkeys(rates, 0.0)
            for name, measure in abba(sides, r):
                cpu_before = time.process_time()
                wall[name] += measure()
                used[name] += time.process_time() - cpu_before
            for name in rates:
                rates[name].append(2 * total / wall[name])
                cpu[name].append(used[name] / (2 * total) * 1e6)
            progress(
                f"consumer round {r + 1}/{settings.rounds}: fetch {rates['fetch'][-1]:,.0f}, consumer "
                f"{rates['consumer'][-1]:,.0f}, uncommitted {rates['consumer_uncommitted'][-1]:,.0f}, "
                f"committing every 1,000 {rates['consumer_commits'][-1]:,.0f} msg/s"
            )
    ratios = {  # per round: both sides of a ratio measured in the same round, side by side
        f"{name}/{base}": [ratio(a, b) for a, b in zip(rates[name], rates[base], strict=True)]
        for name, base in (
            ("consumer", "fetch"),
            ("consumer_uncommitted", "fetch"),
            ("consumer_commits", "fetch"),
            ("consumer", "consumer_uncommitted"),
        )
    }
    to_fetch = {
        name: median(ratios[f"{name}/fetch"]) for name in ("consumer", "consumer_uncommitted", "consumer_commits")
    }
    result.table(
        [
            f"reading {total:,} × {PAYLOAD_SIZE} B",
            "messages/s (median)",
            "min – max",
            "÷ raw fetch (median of rounds)",
            "client CPU µs/message (median)",
        ],
        [
            ["raw `client.fetch(topic)`", median(rates["fetch"]), _span(rates["fetch"]), "", _cpu(cpu["fetch"])],
            *(
                [label, median(rates[name]), _span(rates[name]), f"{to_fetch[name]:.2f}×", _cpu(cpu[name])]
                for name, label in (
                    ("consumer", "consumer, one commit at the end"),
                    ("consumer_uncommitted", 'consumer, `isolation="uncommitted"`, one commit at the end'),
                    ("consumer_commits", "consumer, commit every 1,000 messages"),
                )
            ),
        ],
    )
    r = to_fetch["consumer"]
    result.goal(f"consumer ≥ {GOAL_THROUGHPUT}× raw fetch", f"{r:.2f}×", r >= GOAL_THROUGHPUT)
    r = median(ratios["consumer/consumer_uncommitted"])
    result.goal(f"committed-only consumer ≥ {GOAL_COMMITTED}× uncommitted consumer", f"{r:.2f}×", r >= GOAL_COMMITTED)
    result.notes.append(
        "Throughput: after an untimed read of each, every side reads twice a round in A B B A order (fetch, "
        "consumer, uncommitted, committing, then back; the next round from the other end), so drift through a round "
        "costs every side alike; a side's figure for a round is both its reads; each ratio (the table's and the "
        "goals') is the median of the per-round ratios."
    )
    result.samples["throughput_ratios"] = ratios
    result.samples["throughput"] = rates
    result.samples["throughput_cpu_us"] = cpu


def _check(count: int, total: int) -> None:
    if count != total:
        raise AssertionError(f"read {count} messages, expected {total}")


def _cpu(values: list[float]) -> str:
    return f"{median(values):.2f}"


def _span(values: list[float]) -> str:
    return f"{min(values):,.0f} – {max(values):,.0f}"


# -- 2. wake-up latency -------------------------------------------------------------------------


def consume_paced(
    address: str, prefix: str, topic_name: str, start_at: float, deadline: float, expected_at: float
) -> tuple[list[float], float, float]:
    """Worker job: a consumer waiting for the paced publisher's messages until ``deadline`` or a second
    without any after ``expected_at``. Returns (latencies in ms, HBase calls per second while idle
    before the publisher starts, calls per second while it runs)."""
    from tms_hbase import MessagingClient, TopicId

    key = (address, prefix)
    if key not in _open:
        _open[key] = MessagingClient(address, prefix=prefix, create_tables=False)
    client = _open[key]
    topic = TopicId.parse(topic_name)
    client.create_subscription(topic, "tail", start="latest")
    with client.consumer(topic, "tail") as consumer:
        idle_from, idle_calls = time.time(), client.installation.calls
        early = consumer.poll(max_messages=1000, timeout_seconds=max(0.1, start_at - 0.1 - time.time()))
        idle_rate = (client.installation.calls - idle_calls) / (time.time() - idle_from)
        latencies = [(time.time() - send_time_of(m.payload)) * 1000 for m in early]  # only if this job started late
        busy_from, busy_calls = time.time(), client.installation.calls
        followed, _ = latency.follow(
            lambda: (m.payload for m in consumer.poll(max_messages=1000, timeout_seconds=0.5)), deadline, expected_at
        )
        latencies += followed
        busy_rate = (client.installation.calls - busy_calls) / (time.time() - busy_from)
    return latencies, idle_rate, busy_rate


def close_all() -> None:
    for client in _open.values():
        client.close()
    _open.clear()
    latency.close_all()


def _latency(settings: Settings, result: Result) -> None:
    duration = settings.pick(6.0, 3.0)
    stats: dict[str, dict[str, list[float]]] = {
        kind: {"p50": [], "p99": [], "max": [], "lost": []} for kind in ("consumer", "raw")
    }
    idle_rates: list[float] = []
    busy_rates: list[float] = []
    pooled: dict[str, list[float]] = {"consumer": [], "raw": []}
    with bench_tables(settings, "conslat") as (client, conn, raw_name), Workers(2) as workers:
        create_raw_table(conn, raw_name)
        prefix = client.installation.prefix
        try:
            for r in range(settings.rounds):
                for kind in ("consumer", "raw") if r % 2 == 0 else ("raw", "consumer"):
                    start_at = time.time() + 3.0  # the consumer measures its idle reads until then
                    expected_at = start_at + duration
                    deadline = expected_at + 15
                    if kind == "consumer":
                        topic = str(new_topic(client, f"lat{r}"))
                        args = (settings.address, prefix, topic, start_at, deadline, expected_at)
                        workers.submit(1, consume_paced, *args)
                    else:
                        topic = ""
                        args = (settings.address, prefix, raw_name, topic, start_at, deadline, expected_at)
                        workers.submit(1, latency.tail, *args)
                    paced = (settings.address, prefix, raw_name, topic, start_at, duration)
                    workers.submit(0, latency.publish_paced, *paced)
                    sent, *_ = workers.result(0, duration + 60)
                    if kind == "consumer":
                        got, idle, busy = workers.result(1, deadline - time.time() + 60)
                        idle_rates.append(idle)
                        busy_rates.append(busy)
                    else:
                        got, *_ = workers.result(1, deadline - time.time() + 60)
                    s = stats[kind]
                    s["p50"].append(percentile(got, 50))
                    s["p99"].append(percentile(got, 99))
                    s["max"].append(max(got, default=float("nan")))
                    s["lost"].append(sent - len(got))
                    pooled[kind].extend(got)
                progress(
                    f"consumer latency round {r + 1}/{settings.rounds}: p99 ms consumer "
                    f"{stats['consumer']['p99'][-1]:.1f}, raw {stats['raw']['p99'][-1]:.1f}; "
                    f"idle reads/s {idle_rates[-1]:.1f}"
                )
        finally:
            for i in range(2):
                workers.submit(i, close_all)
            for i in range(2):
                workers.result(i, 30)
    rows = []
    for kind, label in (("consumer", "consumer `poll` (doorbell)"), ("raw", "raw happybase put → scan every 2 ms")):
        s = stats[kind]
        rows.append(
            [
                label,
                median(s["p50"]),
                median(s["p99"]),
                percentile(pooled[kind], 99),
                max(s["max"]),
                int(sum(s["lost"])),
            ]
        )
    result.table(
        ["wake-up at ~1,000 msg/s", "p50 ms", "p99 ms", "p99 ms (all samples)", "max ms", "not received"], rows
    )
    p99, raw_p99 = median(stats["consumer"]["p99"]), median(stats["raw"]["p99"])
    result.goal(f"consumer wake-up p99 < {GOAL_P99_MS:g} ms at 1,000 msg/s", f"{p99:.1f} ms", p99 < GOAL_P99_MS)
    result.notes.append(
        f"Consumer HBase calls per second: {median(idle_rates):.1f} while the topic is idle (the half-second "
        "fallback poll, each with a seek since this subscription has no mark yet, the metadata refresh and "
        f"lease renewals: no busy polling), {median(busy_rates):.0f} while receiving "
        f"about 1,000 msg/s. Raw reference p99 {raw_p99:.1f} ms (the consumer ÷ raw: {ratio(p99, raw_p99):.2f}×)."
    )
    result.samples["latency"] = {"per_round": stats, "idle_calls_per_s": idle_rates, "busy_calls_per_s": busy_rates}


# -- 3. lag and topic_stats on a big topic ------------------------------------------------------


def _stats_cost(settings: Settings, result: Result) -> None:
    total = settings.pick(1_000_000, 100_000)
    rows = total // BATCH
    batch = payloads(BATCH, BIG_PAYLOAD)
    lag_ms: dict[str, list[float]] = {}
    lag_calls: dict[str, list[int]] = {}
    stats_ms: list[float] = []
    stats_calls: list[int] = []
    with bench_tables(settings, "consstats") as (client, _raw, _raw_name):
        topic = new_topic(client, "big")
        started = time.perf_counter()
        middle_time = None
        for i in range(rows):
            client.publish(topic, batch)
            if i == rows // 2:
                middle_time = time.time_ns() // 1_000_000
            if (i + 1) % 2000 == 0:
                progress(f"consumer stats setup: {i + 1:,}/{rows:,} batches ({time.perf_counter() - started:.0f} s)")
        setup = time.perf_counter() - started
        client.create_subscription(topic, "start", start="earliest")
        client.create_subscription(topic, "middle", start=middle_time)
        client.create_subscription(topic, "end", start="latest")
        expected = {"start": total, "end": 0}
        for r in range(settings.rounds):
            for name in ("start", "middle", "end"):
                calls, t0 = client.installation.calls, time.perf_counter()
                lag = client.lag(topic, name)
                lag_ms.setdefault(name, []).append((time.perf_counter() - t0) * 1000)
                lag_calls.setdefault(name, []).append(client.installation.calls - calls)
                if name in expected and lag.messages != expected[name]:
                    raise AssertionError(f"lag of {name}: {lag}, expected {expected[name]} messages")
            calls, t0 = client.installation.calls, time.perf_counter()
            stats = client.topic_stats(topic)
            stats_ms.append((time.perf_counter() - t0) * 1000)
            stats_calls.append(client.installation.calls - calls)
            if stats.messages != total or not stats.exact:
                raise AssertionError(
                    f"topic_stats counted {stats.messages} messages (exact={stats.exact}), expected exactly {total}"
                )
            progress(f"consumer stats round {r + 1}/{settings.rounds}: topic_stats {stats_ms[-1]:.0f} ms")
    table = [
        [f"lag, subscription at the {name}", median(lag_ms[name]), max(lag_ms[name]), median(lag_calls[name])]
        for name in ("start", "middle", "end")
    ]
    table.append(["topic_stats (3 windows, 3 subscriptions)", median(stats_ms), max(stats_ms), median(stats_calls)])
    result.table([f"on {total:,} messages ({rows:,} batch rows)", "ms (median)", "ms max", "HBase calls"], table)
    worst = max(stats_ms) / 1000
    result.goal(
        f"topic_stats on a {total:,}-message topic < {GOAL_STATS_S:g} s", f"{worst:.3f} s max", worst < GOAL_STATS_S
    )
    result.notes.append(f"Big-topic setup: {total:,} messages in {setup:.0f} s.")
    result.samples["stats"] = {"lag_ms": lag_ms, "lag_calls": lag_calls, "stats_ms": stats_ms, "calls": stats_calls}
