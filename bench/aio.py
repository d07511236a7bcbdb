"""Benchmark: one process, 64 concurrent single-message publishers through the asyncio client, vs the sync
client's single-message publish rate (one caller) and raw happybase driven by 64 threads (single-cell puts
to disjoint keys of one table, each thread on its own connection: the ceiling of this architecture). For
context, two more rows: the sync client from 64 threads, and raw happybase's checkAndPut-if-absent from 64
threads (the conditional put each publish is, to HBase).

A second table, "CPU per publish: asyncio client vs sync client", is the cost of one lone publish: one caller
publishing batches of 100 × 1 KiB one after another (what the gateway does for one HTTP client), this
process's CPU per publish on a chain and a sequencer topic through ``MessagingClient``, through
``AsyncMessagingClient`` on asyncio's loop and on uvloop's (the gateway's when installed), and "bridged":
the sync client's protocol code run on uvloop by one ``run_to_end`` a publish, the way the gateway runs a
publish, without the HTTP around it.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable

import happybase  # noqa: F401 (its import loads Hbase_thrift)
import Hbase_thrift

from .common import (
    RAW_COLUMN,
    RawConnection,
    Result,
    Settings,
    bench_tables,
    create_raw_table,
    median,
    progress,
    ratio,
)

PUBLISHERS = 64
PAYLOAD = b"x" * 100
TRIALS = ["aio", "sync", "raw", "sync64", "raw_cas"]  # the first three are the goals' figures
LONE_BATCH = [b"x" * 1024] * 100
LONE_CLIENTS = ["sync", "aio on asyncio", "aio on uvloop", "bridged on uvloop"]
ORDERINGS = ["chain", "sequencer"]


async def _async_rate(settings: Settings, prefix: str, topic: str, duration: float) -> tuple[float, float]:
    from tms_hbase.aio import AsyncMessagingClient

    async with AsyncMessagingClient(settings.address, prefix, pool_size=PUBLISHERS, create_tables=False) as client:
        await client.create_topic(topic, {"ordering": "sequencer"})
        await client.publish(topic, [PAYLOAD])  # connection open and metadata cached before the clock starts
        counts = [0] * PUBLISHERS
        end_at = time.monotonic() + duration

        async def publisher(i: int) -> None:
            while time.monotonic() < end_at:
                await client.publish(topic, [PAYLOAD])
                counts[i] += 1

        started, cpu = time.monotonic(), time.process_time()
        await asyncio.gather(*(publisher(i) for i in range(PUBLISHERS)))
        return _figures(sum(counts), started, cpu)


async def _async_lone(settings: Settings, prefix: str, topic: str, ordering: str, count: int) -> float:
    from tms_hbase.aio import AsyncMessagingClient

    async with AsyncMessagingClient(settings.address, prefix, create_tables=False) as client:
        await client.create_topic(topic, {"ordering": ordering})
        await client.publish(topic, LONE_BATCH)  # connection open and metadata cached before the clock starts
        cpu = time.process_time()
        for _ in range(count):
            await client.publish(topic, LONE_BATCH)
        return (time.process_time() - cpu) * 1e6 / count


async def _bridged_lone(settings: Settings, prefix: str, topic: str, ordering: str, count: int) -> float:
    """The gateway's way: the sync client's protocol code over the asyncio driver, each publish one
    ``run_to_end`` under a semaphore (``tms_hbase_gateway.service.Gateway.run``), without the HTTP around it."""
    from tms_hbase.runtime.bridge import run_sync, run_to_end
    from tms_hbase_gateway.service import LoopClient

    client = await run_sync(LoopClient, settings.address, prefix, create_tables=False)
    calls = asyncio.Semaphore(8)
    try:
        await run_sync(client.create_topic, topic, {"ordering": ordering})
        await run_sync(client.publish, topic, LONE_BATCH)
        cpu = time.process_time()
        for _ in range(count):
            async with calls:
                await run_to_end(client.publish, topic, LONE_BATCH)
        return (time.process_time() - cpu) * 1e6 / count
    finally:
        await run_sync(client.close)


def _sync_lone(settings: Settings, prefix: str, topic: str, ordering: str, count: int) -> float:
    from tms_hbase import MessagingClient

    with MessagingClient(settings.address, prefix, create_tables=False) as client:
        client.create_topic(topic, {"ordering": ordering})
        client.publish(topic, LONE_BATCH)
        cpu = time.process_time()
        for _ in range(count):
            client.publish(topic, LONE_BATCH)
        return (time.process_time() - cpu) * 1e6 / count


def lone_cpu(settings: Settings, prefix: str, name: str, ordering: str, topic: str, count: int) -> float:
    """This process's CPU µs per publish of 100 × 1 KiB by one caller publishing ``count`` times in a row
    through ``name`` (one of LONE_CLIENTS: "sync", or "client on loop" where client is ``aio``, the asyncio
    client, or ``bridged``, the gateway's way) to a fresh topic of ``ordering``."""
    if name == "sync":
        return _sync_lone(settings, prefix, topic, ordering, count)
    kind, loop = name.split(" on ")
    run = _async_lone if kind == "aio" else _bridged_lone
    if loop == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(run(settings, prefix, topic, ordering, count))
    return asyncio.run(run(settings, prefix, topic, ordering, count))


def _sync_rate(settings: Settings, prefix: str, topic: str, duration: float, threads: int) -> tuple[float, float]:
    from tms_hbase import MessagingClient

    with MessagingClient(settings.address, prefix, create_tables=False, pool_size=threads) as client:
        client.create_topic(topic, {"ordering": "sequencer"})
        client.publish(topic, [PAYLOAD])

        def publish(i: int) -> None:
            client.publish(topic, [PAYLOAD])

        return _threaded(threads, duration, publish)


def _raw_rate(settings: Settings, raw_name: str, run: int, duration: float, conditional: bool) -> tuple[float, float]:
    """Raw happybase from PUBLISHERS threads, each on its own connection: blind puts, or checkAndPut-if-absent
    (what one publish costs HBase) of single cells to disjoint keys."""
    connections = [RawConnection(settings) for _ in range(PUBLISHERS)]
    tables = [c.table(raw_name) for c in connections]
    for i, table in enumerate(tables):  # connections open before the clock starts
        table.put(b"warm:%d:%d" % (run, i), {RAW_COLUMN: PAYLOAD})
    name = raw_name.encode()
    put = Hbase_thrift.Mutation(column=RAW_COLUMN, value=PAYLOAD)
    sent = [0] * PUBLISHERS
    kind = b"cas" if conditional else b"put"

    def write(i: int) -> None:
        key = b"%s:%d:%d:%d" % (kind, run, i, sent[i])
        sent[i] += 1
        if conditional:
            connections[i].conn.client.checkAndPut(name, key, RAW_COLUMN, None, put, {})
        else:
            tables[i].put(key, {RAW_COLUMN: PAYLOAD})

    try:
        return _threaded(PUBLISHERS, duration, write)
    finally:
        for c in connections:
            c.close()


def _threaded(threads: int, duration: float, call: Callable[[int], None]) -> tuple[float, float]:
    """Calls per second (and CPU ms per call) of ``threads`` threads each calling ``call(i)`` for ``duration`` s."""
    counts = [0] * threads
    start = threading.Barrier(threads + 1)
    end_at = 0.0

    def loop(i: int) -> None:
        start.wait()
        while time.monotonic() < end_at:
            call(i)
            counts[i] += 1

    running = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for t in running:
        t.start()
    started, cpu = time.monotonic(), time.process_time()
    end_at = started + duration
    start.wait()
    for t in running:
        t.join()
    return _figures(sum(counts), started, cpu)


def _figures(count: int, started: float, cpu: float) -> tuple[float, float]:
    """Messages per second since ``started`` (monotonic), and this process's CPU ms per message since ``cpu``."""
    return count / (time.monotonic() - started), (time.process_time() - cpu) * 1000 / max(1, count)


def run(settings: Settings) -> Result:
    duration = settings.pick(3.0, 1.0)
    result = Result(
        "aio",
        f"{PUBLISHERS} concurrent single-message publishers through the asyncio client in one process, vs the sync "
        f"client's single-message publishes and raw happybase from {PUBLISHERS} threads ({duration:g} s a trial)",
    )
    rates: dict[str, list[float]] = {name: [] for name in TRIALS}
    cpus: dict[str, list[float]] = {name: [] for name in TRIALS}  # this process's CPU ms per message
    loads: list[str] = []
    with bench_tables(settings, "aio") as (client, conn, raw_name):
        create_raw_table(conn, raw_name)
        prefix = client.installation.prefix
        for r in range(settings.rounds):
            for name in TRIALS if r % 2 == 0 else list(reversed(TRIALS)):
                topic = f"bench:{name}{r}"
                if name == "aio":
                    rate, cpu = asyncio.run(_async_rate(settings, prefix, topic, duration))
                elif name.startswith("sync"):
                    rate, cpu = _sync_rate(settings, prefix, topic, duration, 1 if name == "sync" else PUBLISHERS)
                else:
                    rate, cpu = _raw_rate(settings, raw_name, r, duration, conditional=name == "raw_cas")
                rates[name].append(rate)
                cpus[name].append(cpu)
            loads.append(", ".join(f"{x:.1f}" for x in os.getloadavg()))
            progress(
                f"aio round {r + 1}/{settings.rounds} (load {loads[-1]}): "
                + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items())
                + " msg/s"
            )
        lone: dict[tuple[str, str], list[float]] = {(o, n): [] for o in ORDERINGS for n in LONE_CLIENTS}
        count = settings.pick(600, 150)
        lone_loads: list[str] = []
        for r in range(settings.rounds):
            for ordering in ORDERINGS:
                for name in LONE_CLIENTS if r % 2 == 0 else list(reversed(LONE_CLIENTS)):
                    topic = f"bench:lone_{ordering}_{LONE_CLIENTS.index(name)}_{r}"
                    lone[ordering, name].append(lone_cpu(settings, prefix, name, ordering, topic, count))
            lone_loads.append(", ".join(f"{x:.1f}" for x in os.getloadavg()))
            progress(
                f"aio lone publish round {r + 1}/{settings.rounds} (load {lone_loads[-1]}): "
                + ", ".join(f"{o}/{n} {v[-1]:,.0f}" for (o, n), v in lone.items())
                + " µs CPU a publish"
            )
    m = {k: median(v) for k, v in rates.items()}
    c = {k: median(v) for k, v in cpus.items()}
    vs_sync, vs_raw = ratio(m["aio"], m["sync"]), ratio(m["aio"], m["raw"])
    rows = [
        ("aio", f"asyncio client, {PUBLISHERS} tasks, one thread"),
        ("sync", "sync client, one caller"),
        ("raw", f"raw happybase, {PUBLISHERS} threads, puts"),
        ("sync64", f"sync client, {PUBLISHERS} threads (context)"),
        ("raw_cas", f"raw happybase, {PUBLISHERS} threads, checkAndPut (what a publish costs HBase; context)"),
    ]
    result.table(
        ["", "msg/s (median)", "asyncio ÷ this", "CPU ms per message (this process, median)"],
        [[label, m[k], "" if k == "aio" else f"{ratio(m['aio'], m[k]):.2f}×", f"{c[k]:.3f}"] for k, label in rows],
    )
    lc = {k: median(v) for k, v in lone.items()}
    result.table(
        [
            f"CPU per publish: asyncio client vs sync client (µs, one caller, {count} × 100 × 1 KiB in a row)",
            *(n if n == "sync" else f"{n} (÷ sync)" for n in LONE_CLIENTS),
        ],
        [
            [
                o,
                *(
                    f"{lc[o, n]:,.0f}" + ("" if n == "sync" else f" ({lc[o, n] / lc[o, 'sync']:.2f}×)")
                    for n in LONE_CLIENTS
                ),
            ]
            for o in ORDERINGS
        ],
    )
    result.goal("asyncio ≥ 4× sync single-message publish", f"{vs_sync:.2f}×", vs_sync >= 4)
    result.goal(f"asyncio ≥ 0.9× raw happybase from {PUBLISHERS} threads", f"{vs_raw:.2f}×", vs_raw >= 0.9)
    result.notes.append("load average after each round (1, 5, 15 min; 2 cores, shared): " + "; ".join(loads))
    result.notes.append(
        "CPU per publish: load average after each round: "
        + "; ".join(lone_loads)
        + "; bridged: the sync client's protocol code run on the loop by one run_to_end a publish, as the "
        "gateway runs it (no HTTP); aio: AsyncMessagingClient.publish (its publish lanes)"
    )
    result.notes.append(
        "the asyncio client puts the publishes made while a write to the topic is in flight in the next write "
        "(one batch row): its figures are messages a second, raw happybase's one-cell puts a second"
    )
    result.samples = {k: [round(x) for x in v] for k, v in rates.items()}
    result.samples.update({f"{k}_cpu_ms": [round(x, 3) for x in v] for k, v in cpus.items()})
    result.samples.update(
        {f"lone_{o}_{n.replace(' ', '_')}_cpu_us": [round(x) for x in v] for (o, n), v in lone.items()}
    )
    return result
