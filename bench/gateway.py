"""Gateway throughput and latency next to direct library calls on the same data.

A real ``tms-gateway`` process (2 workers) serves the benchmark's tables. Publish: batches of 100 × 1 KiB,
from 1 and from 8 concurrent clients (threads sharing one client, as an application would): direct
``MessagingClient.publish`` vs ``GatewayClient.publish`` (avro/binary). Each side writes to a topic of
its own. Poll: a topic of N messages read whole, in pages of 1,000 (``fetch(limit=1000)`` from the last
id vs one ``poll`` call per page), by 1 and by 8 concurrent readers. Consume: the same topic read whole
through subscriptions, a page of 1,000 per poll and a commit after each, stored before the next page
is asked for: ``poll(commit=True)`` on both sides (the direct consumer commits, then polls;
``GatewayClient.consumer`` sends one long-poll ``GET .../messages?commit=true`` a page), by 1 and by 8
consumers, each of a subscription of its own. Throughput is messages per second over all clients; latency
is per call (one batch, one page; for consume, one poll with the previous page's commit). The order of
the sides alternates per round. After each round's single-client publish, the floor trial
(:mod:`bench.gateway_floor`): the same publishes through servers that do no work, the least any Python
gateway's round trip costs, and through the two structures a gateway's publish can have.

CPU per call, which a loaded machine changes much less than throughput: the benchmark process's CPU time
(the client side: ``time.process_time``) and the gateway processes' (from /proc, Linux only, in 10 ms
ticks: use a full run), divided by the calls of the round; the direct side has only the client's.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from tms_hbase import MessagingClient, TopicId
from tms_hbase.config import PREFIX_ENV, THRIFT_ENV
from tms_hbase.errors import TmsError
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.model.requests import ConsumeRequest
from tms_hbase.rest import codec as rest

from . import gateway_floor
from .common import Result, Settings, bench_tables, median, new_topic, payloads, percentile, progress, ratio, rotated

BATCH = 100
PAYLOAD_SIZE = 1024
PAGE = 1000
CLIENTS = (1, 8)
WORKERS = 2
GOALS = {  # gateway ÷ direct, by kind and clients: publish and poll ≥ 0.5× (1 and 8 clients), single-client
    # publish ≥ 0.7×, consume ≥ 0.6× (1 and 8 consumers)
    ("publish", 1): 0.7,
    ("publish", 8): 0.5,
    ("poll", 1): 0.5,
    ("poll", 8): 0.5,
    ("consume", 1): 0.6,
    ("consume", 8): 0.6,
}


def start_gateway(
    settings: Settings, prefix: str, *, workers: int = WORKERS, command: str | None = None
) -> tuple[subprocess.Popen, str]:
    """``tms-gateway`` (``command``: another build's, default this interpreter's) on a free loopback port,
    once its /health answers 200."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, THRIFT_ENV: settings.address, PREFIX_ENV: prefix}
    executable = command or str(Path(sys.executable).with_name("tms-gateway"))
    proc = subprocess.Popen(
        [executable, "--port", str(port), "--workers", str(workers)], env=env, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with GatewayClient(url, timeout_seconds=5) as client:
                client.ping()
            return proc, url
        except TmsError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("tms-gateway did not start") from None
            time.sleep(0.2)


def _concurrently(clients: int, job: Callable[[int], list[float]]) -> tuple[float, list[float]]:
    """Run ``job(i)`` in ``clients`` threads at once; (wall seconds, every call's latency)."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(clients + 1)

    def run(i: int) -> None:
        barrier.wait()
        try:
            latencies[i] = job(i)
        except BaseException as exc:  # reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return elapsed, [x for per_thread in latencies for x in per_thread]


class _Cpu(NamedTuple):
    """CPU seconds of this process and of the gateway's processes at one moment."""

    client: float
    gateway: float

    @classmethod
    def now(cls, gateway: subprocess.Popen) -> _Cpu:
        return cls(time.process_time(), tree_cpu(gateway.pid))


def tree_cpu(pid: int) -> float:
    """User + system CPU seconds of a process and of its children (the gateway's workers), threads that
    ended included (so in 10 ms ticks: meaningful over a full run's rounds); 0 without /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def run(settings: Settings) -> Result:
    batches = settings.pick(240, 48)  # per round and side, shared by the clients
    total = settings.pick(50_000, 10_000)  # messages in the poll topic
    result = Result(
        "gateway",
        f"Gateway vs direct: publish ({BATCH} × {PAYLOAD_SIZE} B batches, {batches} a round) and poll "
        f"({total:,} messages in pages of {PAGE:,}), {WORKERS} gateway workers",
    )
    batch = payloads(BATCH, PAYLOAD_SIZE)
    rates: dict[tuple[str, str, int], list[float]] = {}
    p99s: dict[tuple[str, str, int], list[float]] = {}
    cpus: dict[tuple[str, str, int], list[tuple[float, float]]] = {}  # µs per call: client, gateway
    floor_ms: dict[str, list[float]] = {}  # ms per publish through each server of the floor trial
    floor_cpu: dict[str, list[float]] = {}  # that server's CPU µs per publish
    with bench_tables(settings, "gw") as (direct, _raw, _raw_name):
        proc, url = start_gateway(settings, direct.installation.prefix)
        try:
            with (
                GatewayClient(url, timeout_seconds=120, media=rest.AVRO, pool_size=max(CLIENTS)) as gateway,
                gateway_floor.servers(settings, direct, batch) as floors,
            ):
                clients: dict[str, MessagingClient | GatewayClient] = {"direct": direct, "gateway": gateway}
                topics = {side: new_topic(direct, f"pub-{side}") for side in clients}
                source = new_topic(direct, "poll")
                for _ in range(total // BATCH):
                    direct.publish(source, batch)
                progress(f"gateway setup: {total:,} messages to poll, gateway at {url}")

                def publish_round(side: str, n: int) -> tuple[float, list[float]]:
                    client, topic = clients[side], topics[side]
                    per_client = batches // n

                    def job(_i: int) -> list[float]:
                        return [_timed(lambda: client.publish(topic, batch)) for _ in range(per_client)]

                    elapsed, latencies = _concurrently(n, job)
                    return per_client * n * BATCH / elapsed, latencies

                def poll_round(side: str, n: int) -> tuple[float, list[float]]:
                    page = _pager(clients[side], source)

                    def job(_i: int) -> list[float]:
                        latencies, last, count = [], None, 0
                        while True:
                            start = time.perf_counter()
                            messages = page(last)
                            latencies.append(time.perf_counter() - start)
                            if not messages:
                                break
                            count += len(messages)
                            last = messages[-1].id
                        if count != total:
                            raise AssertionError(f"{side} poll read {count} messages, expected {total}")
                        return latencies

                    elapsed, latencies = _concurrently(n, job)
                    return n * total / elapsed, latencies

                subscriptions = itertools.count()

                def consume_round(side: str, n: int) -> tuple[float, list[float]]:
                    client = clients[side]
                    names = [f"{side}-{next(subscriptions)}" for _ in range(n)]
                    for name in names:
                        client.create_subscription(source, name, start="earliest")

                    def job(i: int) -> list[float]:
                        latencies, count = [], 0
                        with client.consumer(source, names[i]) as consumer:
                            while count < total:
                                start = time.perf_counter()
                                messages = consumer.poll(max_messages=PAGE, timeout_seconds=5.0, commit=True)
                                latencies.append(time.perf_counter() - start)
                                if not messages:
                                    raise AssertionError(f"{side} consumer stopped at {count} of {total} messages")
                                count += len(messages)
                            consumer.commit()  # the last page's
                        return latencies

                    elapsed, latencies = _concurrently(n, job)
                    for name in names:
                        client.delete_subscription(source, name)
                    return n * total / elapsed, latencies

                kinds = {"publish": publish_round, "poll": poll_round, "consume": consume_round}
                for measure in kinds.values():  # warm-up: connections, caches, JIT
                    for side in clients:
                        measure(side, max(CLIENTS))
                progress("gateway: warm-up done")
                for r in range(settings.rounds):
                    for kind, measure in kinds.items():
                        for n in CLIENTS:
                            for side in ("direct", "gateway") if r % 2 == 0 else ("gateway", "direct"):
                                before = _Cpu.now(proc)
                                rate, latencies = measure(side, n)
                                after = _Cpu.now(proc)
                                per_call = [(b - a) * 1e6 / len(latencies) for a, b in zip(before, after, strict=True)]
                                cpus.setdefault((kind, side, n), []).append((per_call[0], per_call[1]))
                                rates.setdefault((kind, side, n), []).append(rate)
                                p99s.setdefault((kind, side, n), []).append(percentile(latencies, 99) * 1000)
                            progress(
                                f"gateway round {r + 1}/{settings.rounds} {kind} × {n}: direct "
                                f"{rates[(kind, 'direct', n)][-1]:,.0f} msg/s, gateway "
                                f"{rates[(kind, 'gateway', n)][-1]:,.0f} msg/s"
                            )
                            if (kind, n) == ("publish", 1):  # the floor trial, right after the sides it bounds
                                for server in rotated(list(gateway_floor.SIDES), r):  # none always first
                                    ms, cpu = floors.measure(server, batch, batches)
                                    floor_ms.setdefault(server, []).append(ms)
                                    floor_cpu.setdefault(server, []).append(cpu)
                                progress(
                                    f"gateway round {r + 1}/{settings.rounds} floor, ms a publish: "
                                    + ", ".join(f"{s} {floor_ms[s][-1]:.3f}" for s in gateway_floor.SIDES)
                                )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)

    rows = []
    for kind in ("publish", "poll", "consume"):
        for n in CLIENTS:
            d, g = median(rates[(kind, "direct", n)]), median(rates[(kind, "gateway", n)])
            dp, gp = median(p99s[(kind, "direct", n)]), median(p99s[(kind, "gateway", n)])
            rows.append([kind, n, d, g, f"{ratio(g, d):.2f}×", dp, gp])
            goal = f"gateway {kind}, {n} client{'s' if n > 1 else ''} ≥ {GOALS[(kind, n)]}× direct"
            result.goal(goal, f"{ratio(g, d):.2f}×", ratio(g, d) >= GOALS[(kind, n)])
    result.table(
        [
            "",
            "concurrent clients",
            "direct msg/s (median)",
            "gateway msg/s (median)",
            "gateway ÷ direct",
            "direct p99 ms",
            "gateway p99 ms",
        ],
        rows,
    )
    cpu_rows = []
    for kind in ("publish", "poll", "consume"):
        for n in CLIENTS:
            d, g = cpus[(kind, "direct", n)], cpus[(kind, "gateway", n)]
            gateway_client, gateway_server = median([c for c, _ in g]), median([w for _, w in g])
            cpu_rows.append(
                [kind, n, median([c for c, _ in d]), gateway_client, gateway_server, gateway_client + gateway_server]
            )
    result.table(
        [
            "",
            "concurrent clients",
            "direct: client CPU µs/call",
            "gateway: client CPU µs/call",
            "gateway: gateway CPU µs/call",
            "gateway: total CPU µs/call",
        ],
        cpu_rows,
    )
    gateway_floor.report(
        result,
        [BATCH * 1000 / rate for rate in rates[("publish", "direct", 1)]],
        [BATCH * 1000 / rate for rate in rates[("publish", "gateway", 1)]],
        median([w for _, w in cpus[("publish", "gateway", 1)]]),
        floor_ms,
        floor_cpu,
    )
    result.notes.append(
        f"p99 is per call (a {BATCH}-message publish, a {PAGE:,}-message page, a consume page with its commit); "
        "the median of the rounds' p99s"
    )
    result.notes.append(f"load average when the benchmark ended: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    result.samples |= {
        f"{kind}_{side}_{n}": {
            "msgs_per_s": rates[(kind, side, n)],
            "p99_ms": p99s[(kind, side, n)],
            "cpu_us_per_call": cpus[(kind, side, n)],
        }
        for kind, side, n in rates
    }
    return result


def _pager(client: MessagingClient | GatewayClient, topic: TopicId) -> Callable[[bytes | None], list]:
    """One page of at most PAGE messages after ``last`` (from the start when None): one fetch or one poll."""
    if isinstance(client, GatewayClient):
        return lambda last: client.poll(topic, ConsumeRequest(last, last is None, PAGE))
    return lambda last: list(client.fetch(topic, start_message=last, inclusive=last is None, limit=PAGE))
