"""Sweeper throughput: rows per second one sweeper process handles, next to a raw happybase scan of the
same rows. The rows are batch rows of a deleted topic (so every one is judged and deleted), written
directly with the real row encoding to keep the setup short."""

from __future__ import annotations

import time
import uuid

from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, message_key
from tms_hbase_sweeper.sweep import Sweeper

from .common import RawConnection, Result, Settings, bench_tables, median, new_topic, progress, ratio

PAYLOAD = b"x" * 100  # one small message per row: the sweeper's cost is per row


def _fill(client, raw: RawConnection, topic, rows: int) -> None:
    """Batch rows of ``topic`` written with raw happybase (5,000 a mutateRows call)."""
    writer = uuid.uuid4().bytes
    now = int(time.time() * 1000)
    table = raw.table(client.installation.messages.name)
    for first in range(1, rows + 1, 5000):
        with table.batch() as b:
            for pos in range(first, min(first + 5000, rows + 1)):
                row = BatchRow(now, writer, pos, (PAYLOAD,))
                b.put(message_key(topic, 1, pos), {MESSAGE_COLUMN: row.encode()})


def _raw_scan(client, raw: RawConnection) -> int:
    return sum(1 for _ in raw.table(client.installation.messages.name).scan(batch_size=1000))


def _raw_scan_and_delete(client, raw: RawConnection) -> int:
    """What deleting the same rows costs without the sweeper: scan in 1,000s, one mutateRows each."""
    table = raw.table(client.installation.messages.name)
    done, keys = 0, []
    for key, _ in table.scan(batch_size=1000):
        keys.append(key)
        if len(keys) == 1000:
            with table.batch() as b:
                for k in keys:
                    b.delete(k)
            done, keys = done + len(keys), []
    with table.batch() as b:
        for k in keys:
            b.delete(k)
    return done + len(keys)


def run(settings: Settings) -> Result:
    rows = settings.pick(100_000, 20_000)
    result = Result(
        "sweeper",
        f"Sweeper throughput ({rows:,} batch rows of a deleted topic; one sweeper process; chunks of 4,000 rows)",
    )
    raw_rates, raw_delete_rates, dry_rates, real_rates = [], [], [], []
    with bench_tables(settings, "swp") as (client, raw_conn, _raw_name):
        for r in range(settings.rounds):
            topic = new_topic(client, f"swp{r}")
            started = time.monotonic()
            _fill(client, raw_conn, topic, rows)
            client.delete_topic(topic)
            progress(f"sweeper round {r + 1}: {rows:,} rows written in {time.monotonic() - started:.1f}s")

            started = time.monotonic()
            assert _raw_scan(client, raw_conn) == rows
            raw_rates.append(rows / (time.monotonic() - started))

            dry = Sweeper(client.installation, dry_run=True).sweep_once()
            assert dry.messages_dropped == rows
            dry_rates.append(rows / dry.seconds)

            real = Sweeper(client.installation).sweep_once()
            assert real.messages_dropped == rows and _raw_scan(client, raw_conn) == 0
            real_rates.append(rows / real.seconds)

            _fill(client, raw_conn, topic, rows)  # the same rows again, for the raw scan-and-delete baseline
            started = time.monotonic()
            assert _raw_scan_and_delete(client, raw_conn) == rows
            raw_delete_rates.append(rows / (time.monotonic() - started))
            progress(
                f"sweeper round {r + 1}/{settings.rounds}: raw scan {raw_rates[-1]:,.0f} rows/s, "
                f"dry run {dry_rates[-1]:,.0f}, sweep with deletes {real_rates[-1]:,.0f}, "
                f"raw scan + deletes {raw_delete_rates[-1]:,.0f}"
            )
    raw = median(raw_rates)
    result.table(
        ["", "rows/s (median)", "vs raw scan"],
        [
            ["raw happybase scan of the same rows", raw, 1.0],
            ["sweeper, dry run (scan + decide per row)", median(dry_rates), ratio(median(dry_rates), raw)],
            ["sweeper (scan + decide + batched deletes)", median(real_rates), ratio(median(real_rates), raw)],
            [
                "raw happybase scan + batched deletes (reference)",
                median(raw_delete_rates),
                ratio(median(raw_delete_rates), raw),
            ],
        ],
    )
    result.goal("sweeper ≥ 50k rows/s per process", f"{median(real_rates):,.0f} rows/s", median(real_rates) >= 50_000)
    result.samples = {"raw": raw_rates, "raw_delete": raw_delete_rates, "dry": dry_rates, "sweep": real_rates}
    return result
