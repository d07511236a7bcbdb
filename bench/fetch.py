"""Benchmark 3: fetch throughput over a whole topic vs a raw scan of the same messages.

Setup: a topic of N messages published in batches of 100 × 1 KiB (N/100 batch rows), and a raw
table holding the same N payloads as N one-message rows. A round reads everything once each way
(touching every payload): ``client.fetch(topic)`` and ``table.scan()`` over the raw rows with
happybase's default scanner batch of 1,000 rows (the goal's baseline). Reference: a raw happybase scan
of the topic's own batch rows in the messages table, without decoding them (the floor for this layout:
what reading the same cells costs before the library splits them into messages). Like ``fetch`` it reads
the ``d:m`` cells of the current generation's positions only: a sequencer generation (the default
ordering) also has a counter row (``d:s``, ``d:l``) that sorts before its first position, and may have
skip markers (rows without messages); tms_hbase/model/rows.py has the layout. The order of the sides rotates
per round.
"""

from __future__ import annotations

import time

from tms_hbase.model.rows import F_SKIP, MESSAGE_COLUMN, generation_prefix, message_key, past_last

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
    raw_put_batch,
)

BATCH = 100
PAYLOAD_SIZE = 1024
GOAL = 0.8


def run(settings: Settings) -> Result:
    total = settings.pick(100_000, 20_000)
    result = Result("fetch", f"Fetch throughput (topic of {total:,} messages, {BATCH} × {PAYLOAD_SIZE} B batches)")
    batch = payloads(BATCH, PAYLOAD_SIZE)
    tms_rates: list[float] = []
    raw_rates: list[float] = []
    cell_rates: list[float] = []
    with bench_tables(settings, "fetch") as (client, conn, raw_name):
        topic = new_topic(client, "fetch")
        table = create_raw_table(conn, raw_name)
        prefix = b"raw:fetch:"
        start = time.perf_counter()
        for i in range(total // BATCH):
            client.publish(topic, batch)
            raw_put_batch(table, prefix, i * BATCH, batch)
        progress(f"fetch setup: {total:,} messages each way in {time.perf_counter() - start:.1f} s")

        def tms_round() -> float:
            start = time.perf_counter()
            count = size = 0
            for message in client.fetch(topic):
                count += 1
                size += len(message.payload)
            elapsed = time.perf_counter() - start
            if count != total or size != total * PAYLOAD_SIZE:
                raise AssertionError(f"fetch returned {count} messages, expected {total}")
            return count / elapsed

        def raw_round() -> float:
            start = time.perf_counter()
            count = size = 0
            for _key, data in table.scan(row_start=prefix, row_stop=prefix + b"\xff" * 8):
                count += 1
                size += len(data[RAW_COLUMN])
            elapsed = time.perf_counter() - start
            if count != total or size != total * PAYLOAD_SIZE:
                raise AssertionError(f"raw scan returned {count} rows, expected {total}")
            return count / elapsed

        # fresh table handles: the raw connection may have been reopened after the setup
        table, messages_table = conn.table(raw_name), conn.table(client.installation.messages.name)
        generation = client.get_topic(topic).generation
        # the rows fetch reads: every position of the current generation (position 0 sorts after the
        # generation's counter row, which is the bare generation prefix), its message cell only
        first_row, past_rows = message_key(topic, generation, 0), past_last(generation_prefix(topic, generation))

        def cell_round() -> float:
            start = time.perf_counter()
            rows = skips = size = 0
            for _key, data in messages_table.scan(row_start=first_row, row_stop=past_rows, columns=[MESSAGE_COLUMN]):
                cell = data[MESSAGE_COLUMN]
                rows += 1
                skips += cell[1] & F_SKIP != 0  # the flags byte: a skip marker holds no messages
                size += len(cell)
            elapsed = time.perf_counter() - start
            if rows - skips != total // BATCH or size < total * PAYLOAD_SIZE:
                raise AssertionError(
                    f"raw scan of batch rows returned {rows - skips} rows with messages ({size:,} B), "
                    f"expected {total // BATCH} (at least {total * PAYLOAD_SIZE:,} B)"
                )
            return total / elapsed

        tms_round()  # warm-up: both sides read once so both start from the block cache
        raw_round()
        cell_round()
        for r in range(settings.rounds):
            sides = [(tms_round, tms_rates), (raw_round, raw_rates), (cell_round, cell_rates)]
            for measure, rates in sides[r % 3 :] + sides[: r % 3]:
                rates.append(measure())
            progress(
                f"fetch round {r + 1}/{settings.rounds}: tms {tms_rates[-1]:,.0f} msg/s, "
                f"raw rows {raw_rates[-1]:,.0f} msg/s, raw batch cells {cell_rates[-1]:,.0f} msg/s"
            )

    tms, raw, cell = median(tms_rates), median(raw_rates), median(cell_rates)
    result.table(
        ["", "messages/s (median)", "MB/s", "min – max over rounds", "tms-hbase ÷ this"],
        [
            ["tms-hbase `fetch`", tms, tms * PAYLOAD_SIZE / 1e6, _span(tms_rates), ""],
            [
                "raw happybase `scan` of one-message rows (goal baseline)",
                raw,
                raw * PAYLOAD_SIZE / 1e6,
                _span(raw_rates),
                f"{ratio(tms, raw):.2f}×",
            ],
            [
                "raw happybase `scan` of the topic's batch rows, not decoded (reference)",
                cell,
                cell * PAYLOAD_SIZE / 1e6,
                _span(cell_rates),
                f"{ratio(tms, cell):.2f}×",
            ],
        ],
    )
    r = ratio(tms, raw)
    result.goal(f"fetch ≥ {GOAL}× raw scan", f"{r:.2f}×", r >= GOAL)
    result.samples = {
        "tms_msgs_per_s": tms_rates,
        "raw_msgs_per_s": raw_rates,
        "raw_batch_cells_msgs_per_s": cell_rates,
        "ratio": r,
        "messages": total,
    }
    return result


def _span(values: list[float]) -> str:
    return f"{min(values):,.0f} – {max(values):,.0f}"
