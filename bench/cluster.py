"""The local HBase cluster side by side with the standalone HBase, in one run.

    python -m bench.cluster [--rounds N] [--kills N] [--seconds S] [--json OUT] [--standalone HOST:PORT]

Each round measures both HBases, one after the other (the order alternates from round to round), on fresh
``bench…`` tables of each:

- publish throughput: one client publishing batches of BATCH messages of PAYLOAD_SIZE bytes for ``--seconds``,
  and raw happybase putting the same batches as rows (one mutateRows each) for as long;
- consume throughput: a consumer of a subscription (``auto_commit``) reading what was just published;
- publish-to-visible latency: a publisher thread paced to RATE messages/s for ``--seconds`` and a tailing
  ``fetch`` reader in another (benchmark 4's pacing and reader, at a lower rate);

then, on the cluster only (the standalone HBase is shared and never hurt), ``--kills`` times: SIGKILL the region
server holding the topic's region while a publisher and a consumer run, and measure how long each stopped
(the longest pause between two acknowledgements, or two consumed messages, from the last one before the kill
until both have run KEEP seconds past it), then start a new region server on its ports.

The cluster (``tms-admin hbase cluster start``, 8 JVMs) is started if it is not running and then stopped; the
standalone HBase must be running. Clients use the cluster's first gateway only (no gateway is hurt here). Not
part of ``bench.run`` (``make bench-quick``): starting the cluster costs minutes, and CI starts it for ``make
test-cluster`` already. Progress goes to stderr, a markdown report to stdout.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tms_hbase import MessagingClient, TopicId
from tms_hbase.errors import TmsError
from tms_hbase_launcher.cluster import ClusterHBase

from .common import (
    RawConnection,
    Settings,
    bench_tables,
    create_raw_table,
    median,
    percentile,
    progress,
    raw_put_batch,
    stamped,
)
from .latency import FetchPoller, follow, pace

BATCH = 10
PAYLOAD_SIZE = 100
RATE = 200.0
"""Messages per second of the latency publisher: well below what either HBase takes."""
KEEP = 5.0
"""Seconds both the publisher and the consumer must have run past a kill before its stall is measured."""
RESUME_BOUND = 180.0


@dataclass
class Figures:
    """One HBase's samples, a round each (kills: one sample each)."""

    publish: list[float] = field(default_factory=list)  # messages/s
    raw_put: list[float] = field(default_factory=list)  # rows/s, raw happybase
    consume: list[float] = field(default_factory=list)  # messages/s
    latency_p50: list[float] = field(default_factory=list)  # ms
    latency_p99: list[float] = field(default_factory=list)  # ms
    publish_stall: list[float] = field(default_factory=list)  # s, after a region server kill
    consume_stall: list[float] = field(default_factory=list)  # s


def _topic(client: MessagingClient, name: str) -> TopicId:
    topic = TopicId("bench", name)
    client.create_topic(topic)
    client.create_subscription(topic, "reader")
    return topic


def _throughput(client: MessagingClient, raw: RawConnection, raw_name: str, seconds: float, figures: Figures) -> None:
    topic = _topic(client, "throughput")
    batch = [os.urandom(PAYLOAD_SIZE) for _ in range(BATCH)]
    table = create_raw_table(raw, raw_name)
    put, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        raw_put_batch(table, b"raw", put, batch)
        put += BATCH
    figures.raw_put.append(put / (time.perf_counter() - started))
    sent, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        client.publish(topic, batch)
        sent += BATCH
    figures.publish.append(sent / (time.perf_counter() - started))
    got, started = 0, time.perf_counter()
    with client.consumer(topic, "reader", max_wait_seconds=2.0, auto_commit=True) as consumer:
        for _ in consumer:
            got += 1
            if got == sent:
                break
    figures.consume.append(got / (time.perf_counter() - started))
    if got != sent:
        raise RuntimeError(f"the consumer read {got} of {sent} messages")


def _latency(client: MessagingClient, seconds: float, figures: Figures) -> None:
    topic = _topic(client, "latency")
    start_at = time.time() + 0.5
    publisher = threading.Thread(
        target=pace, args=(start_at, seconds, PAYLOAD_SIZE, lambda b: client.publish(topic, b)), daemon=True
    )
    poller = FetchPoller(client, topic)
    list(poller.poll())
    publisher.start()
    latencies, _ = follow(poller.poll, start_at + seconds + 30, start_at + seconds)
    publisher.join()
    if len(latencies) < RATE * seconds * 0.9:
        raise RuntimeError(f"the reader saw {len(latencies)} messages of about {RATE * seconds:.0f}")
    figures.latency_p50.append(median(latencies))
    figures.latency_p99.append(percentile(latencies, 99))


def longest_pause(stamps: list[float], began: float) -> float:
    """The longest pause between ``stamps`` (times of acknowledgements or consumed messages, in order) from the
    last one before ``began`` (a fault) on: how long the fault stopped that work (a call in flight that returns
    after the fault does not count as resuming)."""
    before = [t for t in stamps if t <= began]
    window = ([before[-1]] if before else [began]) + [t for t in stamps if t > began]
    return max(b - a for a, b in itertools.pairwise(window))


def _kills(cluster: ClusterHBase, client: MessagingClient, table: str, kills: int, figures: Figures) -> None:
    """Publish and consume in two threads while region servers are killed; a stall of each per kill."""
    topic = _topic(client, "kills")
    acks: list[float] = []
    consumed: list[float] = []
    stop = threading.Event()

    def keep_going(work: Callable[[], None]) -> None:
        while not stop.is_set():
            try:
                work()
            except TmsError:
                time.sleep(0.2)

    def publish() -> None:
        client.publish(topic, [stamped(time.time(), PAYLOAD_SIZE)])
        acks.append(time.time())
        time.sleep(0.01)

    def consume() -> None:
        with client.consumer(topic, "reader", max_wait_seconds=1.0, auto_commit=True, wait_for_lease=30.0) as consumer:
            for _ in consumer:
                consumed.append(time.time())
                if stop.is_set():
                    return

    threads = [threading.Thread(target=keep_going, args=(w,), daemon=True) for w in (publish, consume)]
    for thread in threads:
        thread.start()
    try:
        for n in range(kills):
            time.sleep(3)
            victim = cluster.server_of_last_region(table)
            began = time.time()
            cluster.kill(victim)
            deadline = time.monotonic() + RESUME_BOUND
            while not (acks and consumed and min(acks[-1], consumed[-1]) > time.time() - 1 > began + KEEP):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"publishing or consuming did not resume within {RESUME_BOUND:.0f}s")
                time.sleep(0.2)
            figures.publish_stall.append(longest_pause(acks, began))
            figures.consume_stall.append(longest_pause(consumed, began))
            progress(
                f"kill {n + 1} ({victim}): publishing stopped {figures.publish_stall[-1]:.1f}s, "
                f"consuming {figures.consume_stall[-1]:.1f}s"
            )
            cluster.start_process(victim, timeout=300)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the throughput and latency runs [5]")
    parser.add_argument("--kills", type=int, default=5, help="region server kills on the cluster [5]")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each publish and latency run [10]")
    parser.add_argument("--json", metavar="OUT", help="also write every sample to this JSON file")
    parser.add_argument(
        "--standalone", default="127.0.0.1:9090", help="the standalone HBase's Thrift gateway [127.0.0.1:9090]"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= 50 or not 0 <= args.kills <= 50 or not 1 <= args.seconds <= 600:
        parser.error("--rounds within 1..50, --kills within 0..50, --seconds within 1..600")
    return args


def report(figures: dict[str, Figures], command: str, began: str, loads: list[str]) -> str:
    """The markdown table of medians, the cluster's against the standalone's."""
    alone, cluster = figures["standalone"], figures["cluster"]
    rows = [
        ("raw happybase put, rows/s (batches of 10 × 100 B)", alone.raw_put, cluster.raw_put),
        ("publish, msg/s (batches of 10 × 100 B)", alone.publish, cluster.publish),
        ("consume, msg/s (a subscription, auto-commit)", alone.consume, cluster.consume),
        (f"publish → visible p50, ms ({RATE:.0f} msg/s)", alone.latency_p50, cluster.latency_p50),
        (f"publish → visible p99, ms ({RATE:.0f} msg/s)", alone.latency_p99, cluster.latency_p99),
    ]
    lines = [
        f"- command: `{command}`",
        f"- began {began}; load average (1, 5, 15 min) before each round: {'; '.join(loads)}",
        "",
        "| median of the rounds | standalone | cluster | cluster / standalone |",
        "|---|---|---|---|",
    ]
    for label, a, c in rows:
        lines.append(f"| {label} | {median(a):,.1f} | {median(c):,.1f} | {median(c) / median(a):.2f} |")
    if cluster.publish_stall:
        for label, values in (("publishing", cluster.publish_stall), ("consuming", cluster.consume_stall)):
            lines.append(
                f"| {label} stopped by a region server kill, s (median, max of {len(values)}) | – | "
                f"{median(values):.1f}, {max(values):.1f} | – |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python -m bench.cluster " + " ".join(sys.argv[1:] if argv is None else argv)
    began = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    cluster = ClusterHBase(progress=progress)
    started = not cluster.status(probe=False).running
    targets = {"standalone": args.standalone, "cluster": cluster.start()[0]}  # one gateway: raw happybase too
    settings = Settings()
    figures = {name: Figures() for name in targets}
    loads: list[str] = []
    try:
        for n in range(args.rounds):
            loads.append(", ".join(f"{x:.1f}" for x in os.getloadavg()))
            order = list(targets) if n % 2 == 0 else list(reversed(targets))
            for name in order:
                progress(f"round {n + 1}: {name}")
                with bench_tables(Settings(address=targets[name], run_id=settings.run_id), f"cl{n}") as tables:
                    client, raw, raw_name = tables
                    _throughput(client, raw, raw_name, args.seconds, figures[name])
                    _latency(client, args.seconds, figures[name])
        if args.kills:
            progress(f"{args.kills} region server kills on the cluster")
            on_cluster = Settings(address=targets["cluster"], run_id=settings.run_id)
            with bench_tables(on_cluster, "clkill") as (client, *_):
                _kills(cluster, client, f"{on_cluster.prefix('clkill')}_messages", args.kills, figures["cluster"])
        loads.append(", ".join(f"{x:.1f}" for x in os.getloadavg()) + " (at the end)")
    finally:
        if started:
            cluster.stop()
    print(report(figures, command, began, loads))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(
                {"command": command, "began": began, "loads": loads, **{k: v.__dict__ for k, v in figures.items()}},
                out,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
