"""Benchmark 12c: scheduled delivery (docs/shared.md, "Scheduled delivery") — how late a scheduled message
goes out of a shared subscription.

Per round, ``CONSUMERS`` consumer processes with the default settings start consuming; then ``COUNT`` messages
(batches of ``ROW`` × 100 B) are published, scheduled at times spread evenly over ``SPREAD`` seconds from
``LEAD`` seconds ahead on HBase's clock, each its own time; the consumers acknowledge each at once. A
delivery's lateness is HBase's clock when its receive returned, as an upper bound (the consumer's reading plus
its uncertainty), minus the message's time. A delivery before its time (HBase's clock as a lower bound still
before it) fails the run. Goal: p99 ≤ 1 s.
"""

from __future__ import annotations

import time
from typing import Any

from tms_hbase import MessagingClient, Record, TopicId, deliver_at

from .common import Result, Settings, bench_tables, median, new_topic, payloads, percentile, progress
from .procs import Workers

CONSUMERS = 2
READY = 3.0  # seconds the consumer processes get to start consuming before the messages are published
LEAD = 3.0  # seconds from the publish before the first message is due
ROW = 100
PAYLOAD = 100
GOAL_P99 = 1.0  # seconds


def late(address: str, prefix: str, topic: str, name: str, stop_at: float) -> dict[str, Any]:
    """A consumer process's job: receive and acknowledge until ``stop_at`` (wall clock); each delivery's
    lateness (s) and how many were early."""
    lateness: list[float] = []
    uncertainty_ms: list[int] = []
    early = 0
    with (
        MessagingClient(address, prefix, create_tables=False) as client,
        client.shared_consumer(TopicId.parse(topic), name) as consumer,
    ):
        while time.time() < stop_at:
            got = consumer.receive(100, 0.5)
            now, uncertainty = client.hbase_clock.reading()
            for d in got:
                due = d.deliver_at_ms or 0
                early += now < due
                lateness.append((now + uncertainty - due) / 1000)
                uncertainty_ms.append(uncertainty)
            if got:
                consumer.ack(*got)
    return {"lateness": lateness, "early": early, "uncertainty": uncertainty_ms}


def run(settings: Settings) -> Result:
    result = Result("scheduled", f"Scheduled delivery: lateness with {CONSUMERS} consumer processes")
    count, spread = settings.pick(2_000, 200), settings.pick(20.0, 5.0)
    p50s: list[float] = []
    p99s: list[float] = []
    worst: list[float] = []
    uncertain: list[float] = []  # the largest uncertainty of HBase's clock as a consumer read it (s)
    with bench_tables(settings, "sched") as (client, _, _), Workers(CONSUMERS) as workers:
        prefix = client.installation.prefix
        for r in range(settings.rounds):
            topic = new_topic(client, f"sched{r}")
            client.create_subscription(topic, "work", shared=True)
            stop_at = time.time() + READY + LEAD + spread + 5.0
            for i in range(CONSUMERS):  # consuming before the first message is due (their start is not measured)
                workers.submit(i, late, settings.address, prefix, str(topic), "work", stop_at)
            time.sleep(READY)
            first = client.hbase_clock.now_ms() + int(LEAD * 1000)
            step = spread * 1000 / count
            for start in range(0, count, ROW):
                batch = payloads(min(ROW, count - start), PAYLOAD)
                times = [first + int((start + i) * step) for i in range(len(batch))]
                client.publish(topic, [Record(p, headers=[deliver_at(t)]) for p, t in zip(batch, times, strict=True)])
            got = [workers.result(i, 600) for i in range(CONSUMERS)]
            lateness = [x for g in got for x in g["lateness"]]
            early = sum(g["early"] for g in got)
            if early or len(lateness) != count:
                raise AssertionError(f"round {r}: {len(lateness)} of {count} delivered, {early} before their time")
            p50s.append(percentile(lateness, 50))
            p99s.append(percentile(lateness, 99))
            worst.append(max(lateness))
            uncertain.append(max(u for g in got for u in g["uncertainty"]) / 1000)
            progress(
                f"scheduled round {r + 1}: p50 {p50s[-1]:.3f} s, p99 {p99s[-1]:.3f} s, max {worst[-1]:.3f} s "
                f"(clock uncertainty up to {uncertain[-1]:.3f} s)"
            )
    result.table(
        ["messages per round", "spread over", "lateness p50", "p99", "max", "of which clock uncertainty, up to"],
        [
            [
                count,
                f"{spread:g} s",
                f"{median(p50s):.3f} s",
                f"{median(p99s):.3f} s",
                f"{median(worst):.3f} s",
                f"{median(uncertain):.3f} s",
            ]
        ],
    )
    p99 = median(p99s)
    result.goal(f"lateness p99 ≤ {GOAL_P99:g} s (median of rounds)", f"{p99:.3f} s", p99 <= GOAL_P99)
    result.samples.update({"p50": p50s, "p99": p99s, "max": worst})
    return result
