"""Benchmark 2: 4 writer processes on one topic vs 1 (aggregate messages/s), raw happybase alongside.

Four worker processes (spawn start method) are started once; each opens its own MessagingClient
and happybase connection. A trial gives k of them a common start time (the wall clock is shared on
one machine) and a duration; each publishes batches of 100 × 1 KiB until the time is up and reports
how many it wrote. Every tms-hbase trial uses a fresh topic, so all k writers race for one tail;
raw writers write disjoint keys of one table (no ordering at all: the ceiling of this architecture).
"""

from __future__ import annotations

import time

from .common import (
    RawConnection,
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
    wait_until,
)
from .procs import Workers

BATCH = 100
PAYLOAD_SIZE = 1024
WRITERS = 4
GOAL = 1.5

_open: dict[tuple[str, str], tuple[object, object, list[bytes]]] = {}  # per worker process


def write_for(
    address: str, prefix: str, raw_name: str, worker: int, topic_name: str, start_at: float, duration: float
) -> tuple[int, float, int, int]:
    """Worker job: publish (``topic_name``) or raw-put (``""``) batches from ``start_at`` for ``duration`` s.

    Returns (messages written, end time, HBase calls made, publish calls).
    """
    from tms_hbase import MessagingClient, TopicId

    if (address, prefix) not in _open:
        client = MessagingClient(address, prefix=prefix, create_tables=False)
        conn = RawConnection(Settings(address=address))
        _open[(address, prefix)] = (client, conn, payloads(BATCH, PAYLOAD_SIZE))
    client, conn, batch = _open[(address, prefix)]
    table = conn.table(raw_name)
    topic = TopicId.parse(topic_name) if topic_name else None
    if topic is not None:
        client.get_topic(topic)  # connection open and metadata cached before the clock starts
    key_prefix = f"raw:{worker}:{start_at}:".encode()
    calls = client.installation.calls
    wait_until(start_at)
    end_at = start_at + duration
    count = 0
    while time.time() < end_at:
        if topic is not None:
            client.publish(topic, batch)
        else:
            raw_put_batch(table, key_prefix, count * BATCH, batch)
        count += 1
    return count * BATCH, time.time(), client.installation.calls - calls, count


def close_all() -> None:
    """Worker job: close what ``write_for`` opened."""
    for client, conn, _ in _open.values():
        client.close()
        conn.close()
    _open.clear()


def _trial(
    workers: Workers, settings: Settings, prefix: str, raw_name: str, topic: str, count: int, duration: float
) -> tuple[float, float]:
    """Aggregate messages/s of ``count`` writers, and HBase calls per publish."""
    start_at = time.time() + 0.5
    for i in range(count):
        workers.submit(i, write_for, settings.address, prefix, raw_name, i, topic, start_at, duration)
    answers = [workers.result(i, duration + 60) for i in range(count)]
    messages = sum(a[0] for a in answers)
    elapsed = max(a[1] for a in answers) - start_at
    publishes = sum(a[3] for a in answers)
    return messages / elapsed, sum(a[2] for a in answers) / max(1, publishes)


def run(settings: Settings) -> Result:
    duration = settings.pick(2.0, 1.5)
    result = Result(
        "writers",
        f"{WRITERS} writer processes on one topic vs 1 ({BATCH} × {PAYLOAD_SIZE} B batches, {duration:g} s a trial)",
    )
    rates: dict[str, list[float]] = {"tms1": [], "tms4": [], "raw1": [], "raw4": []}
    calls: dict[str, list[float]] = {"tms1": [], "tms4": []}
    with bench_tables(settings, "wr") as (client, conn, raw_name), Workers(WRITERS) as workers:
        create_raw_table(conn, raw_name)
        prefix = client.installation.prefix
        trials = [("tms", 1), ("tms", WRITERS), ("raw", 1), ("raw", WRITERS)]
        try:
            for r in range(settings.rounds):
                for kind, count in trials if r % 2 == 0 else list(reversed(trials)):
                    topic = str(new_topic(client, f"w{r}_{count}")) if kind == "tms" else ""
                    rate, per_publish = _trial(workers, settings, prefix, raw_name, topic, count, duration)
                    rates[f"{kind}{count}"].append(rate)
                    if kind == "tms":
                        calls[f"tms{count}"].append(per_publish)
                progress(
                    f"writers round {r + 1}/{settings.rounds}: tms 1→{rates['tms1'][-1]:,.0f} "
                    f"4→{rates['tms4'][-1]:,.0f} msg/s; raw 1→{rates['raw1'][-1]:,.0f} 4→{rates['raw4'][-1]:,.0f}"
                )
        finally:
            for i in range(WRITERS):
                workers.submit(i, close_all)
            for i in range(WRITERS):
                workers.result(i, 30)

    m = {k: median(v) for k, v in rates.items()}
    tms_scale, raw_scale = ratio(m["tms4"], m["tms1"]), ratio(m["raw4"], m["raw1"])
    result.table(
        ["", "1 process, msg/s", f"{WRITERS} processes, msg/s", f"{WRITERS} vs 1", "HBase calls per publish (1 → 4)"],
        [
            [
                "tms-hbase, one topic",
                m["tms1"],
                m["tms4"],
                f"{tms_scale:.2f}×",
                f"{median(calls['tms1']):.2f} → {median(calls['tms4']):.2f}",
            ],
            ["raw happybase, one table", m["raw1"], m["raw4"], f"{raw_scale:.2f}×", "1 → 1"],
            ["tms-hbase ÷ raw", f"{ratio(m['tms1'], m['raw1']):.2f}×", f"{ratio(m['tms4'], m['raw4']):.2f}×", "", ""],
        ],
    )
    result.goal(f"{WRITERS} writers ≥ {GOAL}× one", f"{tms_scale:.2f}×", tms_scale >= GOAL)
    result.samples = {"msgs_per_s": rates, "calls_per_publish": calls, "scale_tms": tms_scale, "scale_raw": raw_scale}
    return result
