"""Benchmark 12b: key-ordered shared subscriptions (``ordering="key"``, docs/shared.md "Key-ordered
subscriptions") — scaling over consumer processes while every key stays in order, and the cost of the order.

1. **With 5 ms of work per message.** 1 and 8 consumer processes on a key-ordered subscription of a topic
   holding 400 × K messages of ``KEYS`` keys (batches of 100 × 100 B, keys in turn, so a key's messages are
   ``KEYS`` apart), each process receiving and acknowledging as in benchmark 12 (``bench/shared.py``'s
   consumer job). Goal: 8 consumers ≥ 6× one.
2. **Without work**, 1 and 8 consumers on a topic of 8,000 such messages, a key-ordered subscription next
   to an unordered one of the same topic. Goal: key-ordered ≥ 0.7× unordered (worst K).

Each round makes fresh subscriptions; the sides rotate every round. Rates are messages / (last
acknowledgement − the common start), as in benchmark 12.
"""

from __future__ import annotations

import time
from typing import Any

from tms_hbase import Record

from .common import Result, Settings, bench_tables, median, new_topic, payloads, progress, ratio, rotated_rounds
from .procs import Workers
from .shared import CLAIM, PAYLOAD, ROW, WORK, consume, workers_close

COUNTS = (1, 8)
KEYS = 1000
GOAL_8, GOAL_UNORDERED = 6.0, 0.7


def run(settings: Settings) -> Result:
    result = Result("shared-keyed", "Key-ordered shared subscriptions: 1 and 8 consumer processes, 1,000 keys")
    per_consumer = settings.pick(400, 150)
    total = settings.pick(8_000, 2_000)
    rates: dict[str, list[float]] = {f"{side}{k}": [] for k in COUNTS for side in ("work", "keyed", "plain")}
    with bench_tables(settings, "keyed") as (client, _, _), Workers(max(COUNTS)) as workers:
        prefix = client.installation.prefix
        worked = {k: str(_filled(client, f"keyed{k}", per_consumer * k)) for k in COUNTS}
        idle = str(_filled(client, "keyedidle", total))
        progress(f"shared-keyed setup: {sum(per_consumer * k for k in COUNTS) + total:,} messages")
        rounds = iter(range(1_000_000))

        def measure(topic: str, k: int, work: float, expected: int, ordering: str | None) -> float:
            name = f"s{next(rounds)}"
            client.create_subscription(
                topic, name, shared=True, ack_timeout_seconds=30, claim_size=CLAIM, ordering=ordering
            )
            start_at = time.time() + 5.0
            for i in range(k):
                workers.submit(i, consume, settings.address, prefix, topic, name, work, start_at)
            got = [workers.result(i, 600) for i in range(k)]
            count = sum(g["count"] for g in got)
            if count != expected:
                raise AssertionError(f"{k} consumers acknowledged {count} messages, expected {expected}")
            return count / (max(g["last"] for g in got) - start_at)

        sides: list[tuple[str, Any]] = []
        for k in COUNTS:
            sides.append((f"work{k}", lambda k=k: measure(worked[k], k, WORK, per_consumer * k, "key")))
            sides.append((f"keyed{k}", lambda k=k: measure(idle, k, 0.0, total, "key")))
            sides.append((f"plain{k}", lambda k=k: measure(idle, k, 0.0, total, None)))
        rotated_rounds("shared-keyed", settings.rounds, sides, rates)
        workers_close(workers, max(COUNTS))
    m = {name: median(values) for name, values in rates.items()}
    result.table(
        [
            "consumer processes",
            f"key-ordered, 5 ms work: msg/s ({per_consumer:,} per process)",
            "÷ one",
            f"key-ordered, no work: msg/s ({total:,} messages)",
            "unordered, no work: msg/s",
            "÷ unordered",
        ],
        [
            [
                k,
                m[f"work{k}"],
                f"{ratio(m[f'work{k}'], m['work1']):.2f}×",
                m[f"keyed{k}"],
                m[f"plain{k}"],
                f"{ratio(m[f'keyed{k}'], m[f'plain{k}']):.2f}×",
            ]
            for k in COUNTS
        ],
    )
    eight = ratio(m["work8"], m["work1"])
    result.goal(f"key-ordered with 5 ms work, 8 consumers ≥ {GOAL_8}× one", f"{eight:.2f}×", eight >= GOAL_8)
    worst = min(ratio(m[f"keyed{k}"], m[f"plain{k}"]) for k in COUNTS)
    result.goal(
        f"key-ordered without work ≥ {GOAL_UNORDERED}× unordered (worst K)", f"{worst:.2f}×", worst >= GOAL_UNORDERED
    )
    result.notes.append(
        "The same work on the peers' closest queue mode, beside a key-ordered shared subscription: `python -m "
        "bench.peers --only tms,nats,redis --workloads keyed` (Redis Streams consumer groups and JetStream pull "
        "consumers do not order by key: what key order costs against none)."
    )
    result.samples.update({"rates": rates})
    return result


def _filled(client: Any, name: str, count: int) -> Any:
    """A topic of ``count`` messages whose keys take turns over ``KEYS`` keys."""
    topic = new_topic(client, name)
    for first in range(0, count, ROW):
        batch = payloads(min(ROW, count - first), PAYLOAD)
        client.publish(topic, [Record(p, key=b"key-%d" % ((first + i) % KEYS)) for i, p in enumerate(batch)])
    return topic
