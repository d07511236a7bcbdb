"""Many concurrent single-message publishes from one process, through the gateway: the asyncio client
(``AsyncGatewayClient``, N tasks on one event loop) against the blocking one (``GatewayClient``, N threads
sharing one client, and one thread alone), with raw happybase driven by N threads (one single-row put per
message, a connection each) and direct ``MessagingClient.publish`` from N threads as the baselines on the same
HBase. A real ``tms-gateway`` (2 workers) serves the benchmark's tables. Each side writes to a topic of its
own; every side publishes the same number of 1 KiB messages a round, and the order of the sides rotates
per round. Throughput is messages per second; the client's CPU per message (this process's CPU time
over the round, all its threads) shows what each client costs, which a loaded machine changes much less
than throughput. The load average is logged before each round.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

from tms_hbase import MessagingClient, TopicId
from tms_hbase.gateway_client.aio import AsyncGatewayClient
from tms_hbase.gateway_client.http import GatewayClient

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
    raw_connection,
    raw_key,
)
from .gateway import _concurrently, start_gateway

CONCURRENCY = 64
PAYLOAD_SIZE = 1024
SIDES = ("async gateway", "sync gateway", "sync gateway, 1 thread", "direct", "raw happybase")


async def _async_publishes(client: AsyncGatewayClient, topic: TopicId, messages: int, message: bytes) -> float:
    """``messages`` single-message publishes by CONCURRENCY tasks; wall seconds."""
    per_task = messages // CONCURRENCY

    async def task() -> None:
        for _ in range(per_task):
            await client.publish(topic, [message])

    start = time.perf_counter()
    await asyncio.gather(*(task() for _ in range(CONCURRENCY)))
    return time.perf_counter() - start


def run(settings: Settings) -> Result:
    messages = settings.pick(6_400, 640)  # per round and side
    result = Result(
        "gateway-aio",
        f"Single-message publishes by {CONCURRENCY} concurrent publishers in one process: the gateway's asyncio "
        f"client vs its blocking one ({messages:,} × {PAYLOAD_SIZE} B messages a round and side)",
    )
    (message,) = payloads(1, PAYLOAD_SIZE)
    rates: dict[str, list[float]] = {side: [] for side in SIDES}
    cpu: dict[str, list[float]] = {side: [] for side in SIDES}  # this process's CPU µs per message
    loads: list[str] = []
    with bench_tables(settings, "gwaio") as (direct, raw, raw_name):
        create_raw_table(raw, raw_name)
        proc, url = start_gateway(settings, direct.installation.prefix)
        topics = {side: new_topic(direct, f"aio-{i}") for i, side in enumerate(SIDES)}
        keys = iter(range(1 << 62))
        try:
            with GatewayClient(url, timeout_seconds=120, pool_size=CONCURRENCY) as sync_client:
                loop = asyncio.new_event_loop()
                async_client = AsyncGatewayClient(
                    url, timeout_seconds=120, pool_size=CONCURRENCY, max_connections=CONCURRENCY
                )

                def sync_side(client: GatewayClient | MessagingClient, topic: TopicId, n: int) -> float:
                    per_thread = messages // n

                    def job(_i: int) -> list[float]:
                        for _ in range(per_thread):
                            client.publish(topic, [message])
                        return []

                    return _concurrently(n, job)[0]

                def raw_side() -> float:
                    # connections of their own each round (the Thrift server closes those idle for 60 s),
                    # opened before the clock starts
                    per_thread = messages // CONCURRENCY
                    first = next(keys) * messages
                    conns = [raw_connection(settings) for _ in range(CONCURRENCY)]
                    try:

                        def job(i: int) -> list[float]:
                            table = conns[i].table(raw_name)
                            for j in range(per_thread):
                                table.put(raw_key(b"r", first + i * per_thread + j), {RAW_COLUMN: message})
                            return []

                        return _concurrently(CONCURRENCY, job)[0]
                    finally:
                        for conn in conns:
                            conn.close()

                rounds: dict[str, Callable[[], float]] = {
                    "async gateway": lambda: loop.run_until_complete(
                        _async_publishes(async_client, topics["async gateway"], messages, message)
                    ),
                    "sync gateway": lambda: sync_side(sync_client, topics["sync gateway"], CONCURRENCY),
                    "sync gateway, 1 thread": lambda: sync_side(sync_client, topics["sync gateway, 1 thread"], 1),
                    "direct": lambda: sync_side(direct, topics["direct"], CONCURRENCY),
                    "raw happybase": raw_side,
                }
                try:
                    for side in SIDES:  # warm-up: connections, pools, first-call costs
                        rounds[side]()
                    for r in range(settings.rounds):
                        order = SIDES[r % len(SIDES) :] + SIDES[: r % len(SIDES)]
                        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
                        loads.append(load)
                        for side in order:
                            started = time.process_time()
                            rates[side].append(messages / rounds[side]())
                            cpu[side].append((time.process_time() - started) / messages * 1e6)
                        progress(
                            f"gateway-aio round {r + 1}/{settings.rounds} (load {load}): "
                            + ", ".join(f"{side} {rates[side][-1]:,.0f}/s" for side in SIDES)
                        )
                finally:
                    loop.run_until_complete(async_client.close())
                    loop.close()
                stored = sum(1 for _ in direct.fetch(topics["async gateway"]))
                expected = messages * (settings.rounds + 1)
                if stored != expected:
                    raise AssertionError(f"the asyncio client stored {stored} messages, expected {expected}")
        finally:
            proc.terminate()
            proc.wait(30)
    medians = {side: median(rates[side]) for side in SIDES}
    result.table(
        ["Side", "Messages/s (median)", "vs async gateway", "client CPU µs per message (median)"],
        [[side, medians[side], ratio(medians[side], medians["async gateway"]), median(cpu[side])] for side in SIDES],
    )
    async_vs_one = ratio(medians["async gateway"], medians["sync gateway, 1 thread"])
    result.goal(
        f"asyncio gateway client, {CONCURRENCY} tasks ≥ 4× the blocking client's single-caller rate",
        f"{async_vs_one:.2f}×",
        async_vs_one >= 4.0,
    )
    async_vs_sync = ratio(medians["async gateway"], medians["sync gateway"])
    result.goal(
        f"asyncio gateway client ≥ the blocking one with {CONCURRENCY} threads",
        f"{async_vs_sync:.2f}×",
        async_vs_sync >= 1.0,
    )
    result.notes.append(f"load average (1, 5, 15 min) before each round: {'; '.join(loads)}")
    result.notes.append("this machine is shared and busy: compare the ratios within this run, not the rates")
    result.notes.append(
        "the asyncio client puts the publishes made while one to the topic is in flight in the next request "
        "(one batch row); the blocking one sends a request per publish"
    )
    result.samples = {"rates": rates, "cpu_us_per_message": cpu, "load": loads}
    return result
