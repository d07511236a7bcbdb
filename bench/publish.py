"""Benchmark 1: publish throughput, 1 KiB payloads in batches of 100, and one message per call.

tms-hbase: ``client.publish(topic, batch)``, one batch row per call (a checkAndPut-if-absent).
Raw happybase: the same 100 payloads as 100 rows in one ``table.batch()`` (one mutateRows call), the
baseline of the goal. Reference: raw happybase ``table.put`` of the 100 payloads joined into one cell
(the same bytes as a batch row, with no checkAndPut and no ordering): what the one-cell-per-batch layout
costs before the library does anything. All write the same number of batches per round; the order of
the sides rotates per round.

Besides msg/s, each side's CPU time per batch in this process (``time.process_time``): the Python of a
publish, which a loaded machine changes less than the rate.

One message per call (``single``): ``client.publish(topic, [payload])``, each acknowledged before the next,
against raw happybase ``table.put`` of one 1 KiB row (the goal's baseline: one call each, mutateRows against
the library's checkAndPut), the sides taking turns every 50 calls within each round (HBase's background
work falls on both alike); besides msg/s, the CPU time per call of this process
(``time.process_time``), which a loaded machine changes less than the rate.

Pipelined one message per call (``pipelined``, the way bench.peers drives every system's producer):
``BackgroundPublisher.publish(topic, [payload])`` for each of :data:`WINDOW` messages without waiting, then
``flush()``, at 100 B and 1 KiB, against ``client.publish`` of the same messages in batches of 100 (what the
same bytes go at when the caller batches); besides msg/s, this process's CPU time per message and the
messages per batch row the publisher's coalescing made.
"""

from __future__ import annotations

import time

from tms_hbase import BackgroundPublisher, MessagingClient

from .common import (
    RAW_COLUMN,
    Result,
    Settings,
    bench_tables,
    create_raw_table,
    median,
    new_topic,
    payloads,
    progress,
    ratio,
    raw_key,
    raw_put_batch,
)

BATCH = 100
PAYLOAD_SIZE = 1024
GOAL = 0.7
SINGLE_GOAL = 0.9
SLICE = 50  # one-message publishes a side makes before the other side's turn
WINDOW = 1000  # pipelined one-message publishes between flushes
PIPELINED_SIZES = (100, 1024)


def run(settings: Settings) -> Result:
    batches = settings.pick(300, 60)
    result = Result("publish", f"Publish throughput ({BATCH} × {PAYLOAD_SIZE} B per batch, {batches} batches a round)")
    batch = payloads(BATCH, PAYLOAD_SIZE)
    tms_rates: list[float] = []
    raw_rates: list[float] = []
    cell_rates: list[float] = []
    calls_per_publish: list[float] = []
    cpu: dict[str, list[float]] = {"tms": [], "raw": [], "cell": []}  # µs of this process per batch
    with bench_tables(settings, "pub") as (client, conn, raw_name):
        topic = new_topic(client, "publish")
        table = create_raw_table(conn, raw_name)
        prefix = b"raw:publish:"
        next_key = 1
        # warm-up: connections open, topic metadata and tail cached, regions located
        client.publish(topic, batch)
        raw_put_batch(table, prefix, 0, batch)

        def tms_round() -> float:
            calls = client.installation.calls
            start, cpu_start = time.perf_counter(), time.process_time()
            for _ in range(batches):
                client.publish(topic, batch)
            elapsed = time.perf_counter() - start
            cpu["tms"].append((time.process_time() - cpu_start) / batches * 1e6)
            calls_per_publish.append((client.installation.calls - calls) / batches)
            return batches * BATCH / elapsed

        joined = b"".join(batch)
        cell_prefix = b"raw:cell:"
        table.put(cell_prefix + b"warm", {RAW_COLUMN: joined})

        def cell_round() -> float:
            nonlocal next_key
            start, cpu_start = time.perf_counter(), time.process_time()
            for _ in range(batches):
                table.put(raw_key(cell_prefix, next_key), {RAW_COLUMN: joined})
                next_key += 1
            elapsed = time.perf_counter() - start
            cpu["cell"].append((time.process_time() - cpu_start) / batches * 1e6)
            return batches * BATCH / elapsed

        def raw_round() -> float:
            nonlocal next_key
            start, cpu_start = time.perf_counter(), time.process_time()
            for _ in range(batches):
                raw_put_batch(table, prefix, next_key, batch)
                next_key += BATCH
            elapsed = time.perf_counter() - start
            cpu["raw"].append((time.process_time() - cpu_start) / batches * 1e6)
            return batches * BATCH / elapsed

        # one untimed round of each side first: HBase's JIT, block cache and memstore warm up
        for measure in (tms_round, raw_round, cell_round):
            measure()
        calls_per_publish.clear()
        for spent in cpu.values():
            spent.clear()
        progress("publish: warm-up round done")
        for r in range(settings.rounds):
            sides = [(tms_round, tms_rates), (raw_round, raw_rates), (cell_round, cell_rates)]
            for measure, rates in sides[r % 3 :] + sides[: r % 3]:
                rates.append(measure())
            progress(
                f"publish round {r + 1}/{settings.rounds}: tms {tms_rates[-1]:,.0f} msg/s, "
                f"raw 100 rows {raw_rates[-1]:,.0f} msg/s, raw one cell {cell_rates[-1]:,.0f} msg/s"
            )

    tms, raw, cell = median(tms_rates), median(raw_rates), median(cell_rates)
    result.table(
        [
            "",
            "messages/s (median)",
            "MB/s",
            "batches/s",
            "min – max over rounds",
            "tms-hbase ÷ this",
            "CPU µs per batch (median)",
        ],
        [
            [
                "tms-hbase `publish`",
                tms,
                tms * PAYLOAD_SIZE / 1e6,
                tms / BATCH,
                _span(tms_rates),
                "",
                median(cpu["tms"]),
            ],
            [
                "raw happybase `batch()` of 100 rows (goal baseline)",
                raw,
                raw * PAYLOAD_SIZE / 1e6,
                raw / BATCH,
                _span(raw_rates),
                f"{ratio(tms, raw):.2f}×",
                median(cpu["raw"]),
            ],
            [
                "raw happybase `put` of one 100-payload cell (reference)",
                cell,
                cell * PAYLOAD_SIZE / 1e6,
                cell / BATCH,
                _span(cell_rates),
                f"{ratio(tms, cell):.2f}×",
                median(cpu["cell"]),
            ],
        ],
    )
    r = ratio(tms, raw)
    result.goal(f"publish ≥ {GOAL}× raw batch put", f"{r:.2f}×", r >= GOAL)
    result.notes.append(f"HBase calls per publish (tms-hbase, median): {median(calls_per_publish):.2f}")
    result.samples = {
        "tms_msgs_per_s": tms_rates,
        "raw_msgs_per_s": raw_rates,
        "raw_one_cell_msgs_per_s": cell_rates,
        "ratio": r,
        "calls_per_publish": calls_per_publish,
        "cpu_us_per_batch": cpu,
    }
    _single(settings, result)
    _pipelined(settings, result)
    return result


def _single(settings: Settings, result: Result) -> None:
    """One message per call, each acknowledged before the next: tms-hbase ``publish`` vs raw ``put``."""
    calls = settings.pick(2000, 300)
    payload = payloads(1, PAYLOAD_SIZE)
    rates: dict[str, list[float]] = {"tms": [], "raw": []}
    cpu: dict[str, list[float]] = {"tms": [], "raw": []}
    with bench_tables(settings, "pub1") as (client, conn, raw_name):
        topic = new_topic(client, "single")
        table = create_raw_table(conn, raw_name)
        keys = iter(range(1, 1 << 62))

        def tms_call() -> None:
            client.publish(topic, payload)

        def raw_call() -> None:
            table.put(raw_key(b"raw:single:", next(keys)), {RAW_COLUMN: payload[0]})

        sides = [("tms", tms_call), ("raw", raw_call)]
        for _name, call in sides:  # warm-up: connections, topic metadata, regions
            for _ in range(calls // 4):
                call()
        for r in range(settings.rounds):
            # the sides take turns every SLICE calls, so HBase's background work (a flush, a compaction after
            # the previous benchmark) falls on both alike instead of on whichever side ran during it
            wall, used = {"tms": 0.0, "raw": 0.0}, {"tms": 0.0, "raw": 0.0}
            for s in range(calls // SLICE):
                for name, call in sides[(r + s) % 2 :] + sides[: (r + s) % 2]:
                    start, cpu_start = time.perf_counter(), time.process_time()
                    for _ in range(SLICE):
                        call()
                    wall[name] += time.perf_counter() - start
                    used[name] += time.process_time() - cpu_start
            done = calls // SLICE * SLICE
            for name in rates:
                rates[name].append(done / wall[name])
                cpu[name].append(used[name] / done * 1e6)
            progress(
                f"publish one message per call, round {r + 1}/{settings.rounds}: "
                f"tms {rates['tms'][-1]:,.0f} msg/s, raw put {rates['raw'][-1]:,.0f} msg/s"
            )
    tms, raw = median(rates["tms"]), median(rates["raw"])
    result.table(
        ["one message per call (sync)", "messages/s (median)", "min – max over rounds", "CPU µs per call (median)"],
        [
            ["tms-hbase `publish(topic, [payload])`", tms, _span(rates["tms"]), median(cpu["tms"])],
            ["raw happybase `put` of one row (goal baseline)", raw, _span(rates["raw"]), median(cpu["raw"])],
        ],
    )
    round_ratios = [t / w for t, w in zip(rates["tms"], rates["raw"], strict=True)]
    r = ratio(tms, raw)
    result.goal(
        f"one-message publish ≥ {SINGLE_GOAL}× raw one-row put",
        f"{r:.2f}× (median of round ratios {median(round_ratios):.2f}×)",
        r >= SINGLE_GOAL,
    )
    result.samples.update(
        {"single_tms_msgs_per_s": rates["tms"], "single_raw_msgs_per_s": rates["raw"], "single_cpu_us": cpu}
    )


def _pipelined(settings: Settings, result: Result) -> None:
    """One message per call without waiting, through the background publisher, vs batches of 100."""
    rows: list[list[object]] = []
    with bench_tables(settings, "pubpipe") as (client, _conn, _raw_name):
        for size in PIPELINED_SIZES:
            rates, cpu, per_row = _pipelined_rounds(settings, client, size)
            rows.append(
                [
                    f"{size} B, `BackgroundPublisher.publish(topic, [payload])` × {WINDOW}, `flush()`",
                    median(rates["pipelined"]),
                    _span(rates["pipelined"]),
                    median(cpu["pipelined"]),
                    f"{per_row:,.0f}",
                ]
            )
            rows.append(
                [
                    f"{size} B, `publish` of batches of {BATCH} (reference)",
                    median(rates["batch"]),
                    _span(rates["batch"]),
                    median(cpu["batch"]),
                    f"{BATCH}",
                ]
            )
            result.samples[f"pipelined_{size}"] = {"msgs_per_s": rates, "cpu_us_per_msg": cpu, "per_row": per_row}
    result.table(
        [
            "one message per call, pipelined",
            "messages/s (median)",
            "min – max over rounds",
            "CPU µs per message (median)",
            "messages per batch row",
        ],
        rows,
    )


def _pipelined_rounds(
    settings: Settings, client: MessagingClient, size: int
) -> tuple[dict[str, list[float]], dict[str, list[float]], float]:
    """msg/s and CPU µs per message of each side per round, and the pipelined side's messages per batch row."""
    windows = settings.pick(20, 3)
    topic = new_topic(client, f"pipelined{size}")
    message, batch = payloads(1, size), payloads(BATCH, size)
    rates: dict[str, list[float]] = {"pipelined": [], "batch": []}
    cpu: dict[str, list[float]] = {"pipelined": [], "batch": []}
    with BackgroundPublisher(client, on_full="block") as publisher:

        def pipelined() -> None:
            futures = [publisher.publish(topic, message) for _ in range(WINDOW)]
            publisher.flush()
            if not all(future.result() for future in futures):
                raise RuntimeError("the background publisher dropped messages")

        def batches() -> None:
            for _ in range(WINDOW // BATCH):
                client.publish(topic, batch)

        sides = [("pipelined", pipelined), ("batch", batches)]
        for _name, call in sides:  # warm-up: connections, topic metadata, the sender thread
            call()
        rows_before = publisher.stats.batches
        for r in range(settings.rounds):
            for name, call in sides[r % 2 :] + sides[: r % 2]:
                start, cpu_start = time.perf_counter(), time.process_time()
                for _ in range(windows):
                    call()
                rates[name].append(windows * WINDOW / (time.perf_counter() - start))
                cpu[name].append((time.process_time() - cpu_start) / (windows * WINDOW) * 1e6)
            progress(
                f"publish pipelined {size} B, round {r + 1}/{settings.rounds}: pipelined "
                f"{rates['pipelined'][-1]:,.0f} msg/s, batches of {BATCH} {rates['batch'][-1]:,.0f} msg/s"
            )
        per_row = settings.rounds * windows * WINDOW / max(1, publisher.stats.batches - rows_before)
    return rates, cpu, per_row


def _span(values: list[float]) -> str:
    return f"{min(values):,.0f} – {max(values):,.0f}"
