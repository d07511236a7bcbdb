"""Benchmark: what a key and headers cost. The same batches of 100 × 1 KiB payloads published and fetched
plain, and as Records with a 16-byte key and two headers (a W3C ``traceparent`` of 55 bytes and a 16-byte
content type), on two topics of one installation. The sides take turns batch by batch (publish) and 1,000
messages by 1,000 messages of two fetches over the whole topics running side by side (fetch), each turn timed
on its own, so that both sides see the same moments of a busy machine; which side goes first alternates turn by
turn (A B, B A: common.mirrored), after an untimed publish and fetch of each. Measured: messages/s of ``publish``
and of ``fetch``; the goal is that keys and headers cost at most 1.1×, the cost being the median over every pair
of turns (the same work on both sides, run next to each other) of keyed ÷ plain time: a stall of a loaded
machine spoils one pair, not a round."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tms_hbase import Record

from .common import Result, Settings, bench_tables, median, mirrored, new_topic, payloads, progress, ratio

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
    pairs: dict[str, list[float]] = {"publish": [], "fetch": []}  # keyed ÷ plain time of each pair of turns
    per_round: dict[str, list[float]] = {"publish": [], "fetch": []}  # the median of each round's pairs
    cpu: dict[str, list[float]] = {name: [] for name in rates}  # this process's CPU µs per message
    with bench_tables(settings, "keys") as (client, _conn, _raw_name):
        topics = {"plain": new_topic(client, "plain"), "keyed": new_topic(client, "keyed")}
        batch_of = {"plain": plain, "keyed": keyed}
        for side in topics:  # warm-up, untimed: connections, topic metadata and tails, the fetch path
            client.publish(topics[side], batch_of[side])
            sum(1 for _ in client.fetch(topics[side]))
        published = {side: BATCH for side in topics}

        def publish_round(first: int) -> tuple[_Clock, int]:
            clock = _Clock()
            for i in range(batches):
                for side in mirrored(SIDES, i + first):
                    with clock.turn(side):
                        client.publish(topics[side], batch_of[side])
            for side in topics:
                published[side] += batches * BATCH
            return clock, batches * BATCH

        def fetch_round(first: int) -> tuple[_Clock, int]:
            clock = _Clock()
            counts = dict.fromkeys(topics, 0)
            keys = dict.fromkeys(topics, 0)
            reads = {}
            for side in mirrored(SIDES, first):  # (a fetch finds where it starts when it is called)
                with clock.turn(side, paired=False):
                    reads[side] = client.fetch(topics[side])
            turn = first
            while reads:
                for side in [s for s in mirrored(SIDES, turn) if s in reads]:
                    taken = 0
                    with clock.turn(side):
                        for message in itertools.islice(reads[side], TURN):
                            taken += 1
                            keys[side] += message.key is not None
                    counts[side] += taken
                    if taken < TURN:
                        del reads[side]
                turn += 1
            for side in topics:
                if counts[side] != published[side] or keys[side] != (counts[side] if side == "keyed" else 0):
                    raise AssertionError(
                        f"fetch of {side} read {counts[side]} messages ({keys[side]} keyed), expected {published[side]}"
                    )
            return clock, counts["plain"]

        for r in range(settings.rounds):
            for op, measure in (("publish", publish_round), ("fetch", fetch_round)):
                clock, count = measure(r)
                paired = clock.pairs()
                pairs[op] += paired
                per_round[op].append(median(paired))
                for side in SIDES:
                    rates[f"{op} {side}"].append(count / clock.wall[side])
                    cpu[f"{op} {side}"].append(clock.cpu[side] / count * 1e6)
            progress(
                f"keys round {r + 1}/{settings.rounds}: "
                + ", ".join(f"{k} {v[-1]:,.0f} msg/s" for k, v in rates.items())
            )

    medians = {name: median(values) for name, values in rates.items()}
    costs = {op: median(values) for op, values in pairs.items()}
    result.table(
        [
            "",
            "plain messages/s",
            "with key + 2 headers messages/s",
            "cost (keyed ÷ plain time, median of paired turns)",
            "client CPU µs/message, plain → keyed (median)",
        ],
        [
            [
                op,
                medians[f"{op} plain"],
                medians[f"{op} keyed"],
                f"{costs[op]:.2f}×",
                f"{median(cpu[f'{op} plain']):.2f} → {median(cpu[f'{op} keyed']):.2f}",
            ]
            for op in ("publish", "fetch")
        ],
    )
    for op, cost in costs.items():
        result.goal(f"{op} with a key and two headers ≤ {GOAL}× plain", f"{cost:.2f}×", cost <= GOAL)
    result.samples = {
        **{k.replace(" ", "_"): v for k, v in rates.items()},
        **{f"{k.replace(' ', '_')}_cpu_us": v for k, v in cpu.items()},
        "publish_cost": costs["publish"],
        "fetch_cost": costs["fetch"],
        "publish_costs": per_round["publish"],
        "fetch_costs": per_round["fetch"],
    }
    return result


class _Clock:
    """Wall and CPU (this process's) seconds each side spent, summed over its turns; and each paired turn's wall
    seconds, the n-th turn of one side the same work as the other side's n-th, run next to it."""

    def __init__(self) -> None:
        self.wall = dict.fromkeys(SIDES, 0.0)
        self.cpu = dict.fromkeys(SIDES, 0.0)
        self.turns: dict[str, list[float]] = {side: [] for side in SIDES}

    @contextmanager
    def turn(self, side: str, *, paired: bool = True) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        seconds = time.perf_counter() - wall
        self.wall[side] += seconds
        self.cpu[side] += time.process_time() - cpu
        if paired:
            self.turns[side].append(seconds)

    def pairs(self) -> list[float]:
        """keyed ÷ plain seconds of each pair of turns."""
        return [ratio(k, p) for p, k in zip(self.turns["plain"], self.turns["keyed"], strict=True)]
