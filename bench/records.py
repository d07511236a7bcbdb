"""Benchmark: what a key and headers cost. The same batches of 100 × 1 KiB payloads published and fetched
plain, and as Records with a 16-byte key and two headers (a W3C ``traceparent`` of 55 bytes and a 16-byte
content type), on two topics of one installation. The sides take turns batch by batch (publish) and 1,000
messages by 1,000 messages of two fetches over the whole topics running side by side (fetch), each turn timed
on its own, so that both sides see the same moments of a busy machine; which side goes first alternates.
Measured: messages/s of ``publish`` and of ``fetch``; the goal is that keys and headers cost at most 1.1× (a
rate at least 1/1.1 of the plain one)."""

from __future__ import annotations

import itertools
import time

from tms_hbase import Record

from .common import Result, Settings, bench_tables, median, new_topic, payloads, progress, ratio

BATCH = 100
PAYLOAD_SIZE = 1024
GOAL = 1.1  # keyed time ÷ plain time at most
SIDES = ("plain", "keyed")
TURN = 1000  # messages a fetch reads in one turn
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

        def publish_round(first: int) -> dict[str, float]:
            spent = dict.fromkeys(topics, 0.0)
            for i in range(batches):
                for side in SIDES if (i + first) % 2 == 0 else SIDES[::-1]:
                    start = time.perf_counter()
                    client.publish(topics[side], batch_of[side])
                    spent[side] += time.perf_counter() - start
            for side in topics:
                published[side] += batches * BATCH
            return {side: batches * BATCH / spent[side] for side in topics}

        def fetch_round(first: int) -> dict[str, float]:
            spent = dict.fromkeys(topics, 0.0)
            counts = dict.fromkeys(topics, 0)
            keys = dict.fromkeys(topics, 0)
            reads = {}
            for side in topics:  # (a fetch finds where it starts when it is called)
                start = time.perf_counter()
                reads[side] = client.fetch(topics[side])
                spent[side] += time.perf_counter() - start
            turn = first
            while reads:
                for side in [s for s in (SIDES if turn % 2 == 0 else SIDES[::-1]) if s in reads]:
                    start = time.perf_counter()
                    taken = 0
                    for message in itertools.islice(reads[side], TURN):
                        taken += 1
                        keys[side] += message.key is not None
                    spent[side] += time.perf_counter() - start
                    counts[side] += taken
                    if taken < TURN:
                        del reads[side]
                turn += 1
            for side in topics:
                if counts[side] != published[side] or keys[side] != (counts[side] if side == "keyed" else 0):
                    raise AssertionError(
                        f"fetch of {side} read {counts[side]} messages ({keys[side]} keyed), expected {published[side]}"
                    )
            return {side: counts[side] / spent[side] for side in topics}

        for r in range(settings.rounds):
            for op, measure in (("publish", publish_round), ("fetch", fetch_round)):
                for side, rate in measure(r).items():
                    rates[f"{op} {side}"].append(rate)
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
