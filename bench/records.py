"""Benchmark: what a key and headers cost. The same batches of 100 × 1 KiB payloads published and fetched
plain, and as Records with a 16-byte key and two headers (a W3C ``traceparent`` of 55 bytes and a 16-byte
content type), on two topics of one installation, the sides taking turns within each round (the order
rotates per round). Measured: messages/s of ``publish`` and of ``fetch`` over the whole topic; the goal is
that keys and headers cost at most 1.1× (a rate at least 1/1.1 of the plain one)."""

from __future__ import annotations

import time

from tms_hbase import Record

from .common import Result, Settings, bench_tables, median, new_topic, payloads, progress, ratio

BATCH = 100
PAYLOAD_SIZE = 1024
GOAL = 1.1  # keyed time ÷ plain time at most
HEADERS = (
    ("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
    ("content-type", b"application/json"),
)


def run(settings: Settings) -> Result:
    batches = settings.pick(200, 30)
    result = Result("keys", f"Keys and headers ({BATCH} × {PAYLOAD_SIZE} B per batch, {batches} batches a round)")
    plain = payloads(BATCH, PAYLOAD_SIZE)
    keyed = [Record(p, key=f"order-{i:010d}".encode(), headers=HEADERS) for i, p in enumerate(plain)]
    rates: dict[str, list[float]] = {"publish plain": [], "publish keyed": [], "fetch plain": [], "fetch keyed": []}
    with bench_tables(settings, "keys") as (client, _conn, _raw_name):
        topics = {"plain": new_topic(client, "plain"), "keyed": new_topic(client, "keyed")}
        batch_of = {"plain": plain, "keyed": keyed}
        for side in topics:  # warm-up: connections, topic metadata and tails
            client.publish(topics[side], batch_of[side])
        published = {side: BATCH for side in topics}

        def publish_round(side: str) -> float:
            start = time.perf_counter()
            for _ in range(batches):
                client.publish(topics[side], batch_of[side])
            published[side] += batches * BATCH
            return batches * BATCH / (time.perf_counter() - start)

        def fetch_round(side: str) -> float:
            start = time.perf_counter()
            count = keys = 0
            for message in client.fetch(topics[side]):
                count += 1
                keys += message.key is not None
            elapsed = time.perf_counter() - start
            if count != published[side] or keys != (count if side == "keyed" else 0):
                raise AssertionError(
                    f"fetch of {side} read {count} messages ({keys} keyed), expected {published[side]}"
                )
            return count / elapsed

        for r in range(settings.rounds):
            sides = ["plain", "keyed"] if r % 2 == 0 else ["keyed", "plain"]
            for side in sides:
                rates[f"publish {side}"].append(publish_round(side))
            for side in sides:
                rates[f"fetch {side}"].append(fetch_round(side))
            progress(
                f"keys round {r + 1}/{settings.rounds}: "
                + ", ".join(f"{k} {v[-1]:,.0f} msg/s" for k, v in rates.items())
            )

    medians = {name: median(values) for name, values in rates.items()}
    costs = {op: ratio(medians[f"{op} plain"], medians[f"{op} keyed"]) for op in ("publish", "fetch")}
    result.table(
        ["", "plain messages/s", "with key + 2 headers messages/s", "cost (plain ÷ keyed)"],
        [[op, medians[f"{op} plain"], medians[f"{op} keyed"], f"{costs[op]:.2f}×"] for op in ("publish", "fetch")],
    )
    for op, cost in costs.items():
        result.goal(f"{op} with a key and two headers ≤ {GOAL}× plain", f"{cost:.2f}×", cost <= GOAL)
    result.samples = {
        **{k.replace(" ", "_"): v for k, v in rates.items()},
        "publish_cost": costs["publish"],
        "fetch_cost": costs["fetch"],
    }
    return result
