"""CPU per publish (or consume) call through the gateway, by process and (with ``--profile``) by layer.

    python -m bench.gateway_cpu [--kind publish|consume] [--calls N] [--rounds R] [--workers W]
                                [--media avro|json] [--profile] [--gateway PATH]

Throughput on a shared two-core machine moves with everyone else's load; CPU time per call hardly does. This
starts one ``tms-gateway`` (``--gateway``: another build's executable, for an A/B against it) on fresh
``bench…`` tables and publishes batches of 100 × 1 KiB, alternating rounds of direct
``MessagingClient.publish`` and ``GatewayClient.publish`` (``--kind consume``: a subscription's consumer
reading a topic of ``--calls`` × 1,000 messages in pages of 1,000 with a commit after each, directly and
through the gateway's consumer sessions; a call is one page with the previous page's commit,
``poll(commit=True)``); per call it reports the wall time, this process's CPU (``time.process_time``: the
client) and the gateway processes' (from /proc, ticks of 10 ms: use a few thousand calls). ``--profile``
samples the gateway worker and this process with py-spy (``pip install py-spy``; it needs ptrace rights)
during one more gateway round and prints where the time holding the GIL went, by layer (the innermost frame's
file) and by function; time in system calls that release the GIL (socket reads and writes) is not in it.
Progress on stderr, the report on stdout.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tms_hbase import MessagingClient, TopicId
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.rest import codec as rest

from .common import Settings, bench_tables, check_loopback, median, new_topic, payloads, progress
from .gateway import BATCH, PAGE, PAYLOAD_SIZE, start_gateway, tree_cpu

# Where a sampled frame's file belongs, first match wins (a path fragment -> layer); see --profile.
LAYERS = [
    ("uvicorn/", "uvicorn (HTTP protocol, httptools callbacks)"),
    ("httptools", "uvicorn (HTTP protocol, httptools callbacks)"),
    ("starlette/", "starlette (routing, request, response, middleware)"),
    ("tms_hbase/runtime/", "library on the event loop: greenlets, asyncio streams"),
    ("tms_hbase/storage/aio.py", "library on the event loop: greenlets, asyncio streams"),
    ("greenlet", "library on the event loop: greenlets, asyncio streams"),
    ("tms_hbase_gateway/access.py", "gateway: access log and metrics"),
    ("tms_hbase_gateway/metrics.py", "gateway: access log and metrics"),
    ("prometheus_client/", "gateway: access log and metrics"),
    ("logging/", "gateway: access log and metrics"),
    ("tms_hbase/ops/log_options.py", "gateway: access log and metrics"),
    ("tms_hbase_gateway/", "gateway: routes, auth, bodies"),
    ("tms_hbase/rest/codec.py", "codecs (rest.py, wire.py)"),
    ("tms_hbase/model/wire.py", "codecs (rest.py, wire.py)"),
    ("fastavro", "codecs (rest.py, wire.py)"),
    ("tms_hbase/gateway_client/http.py", "client: tms_hbase/gateway_client/http.py"),
    ("http/client.py", "client: http.client"),
    ("email/", "client: http.client"),
    ("thriftpy2", "library: Thrift to HBase"),
    ("happybase", "library: Thrift to HBase"),
    ("tms_hbase/", "library: publish"),
    ("asyncio/", "event loop (asyncio, uvloop)"),
    ("uvloop", "event loop (asyncio, uvloop)"),
    ("threading.py", "threads (waits, wake-ups)"),
    ("queue.py", "threads (waits, wake-ups)"),
    ("socket.py", "sockets"),
    ("ssl.py", "sockets"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway_cpu", description=__doc__.split("\n")[0])
    parser.add_argument("--kind", choices=("publish", "consume"), default="publish", help="what a call is [publish]")
    parser.add_argument("--calls", type=int, default=2000, help="calls per round and side [2000]")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side, alternating [3]")
    parser.add_argument("--workers", type=int, default=1, help="gateway worker processes [1]")
    parser.add_argument("--media", choices=("avro", "json"), default="avro", help="the client's body encoding")
    parser.add_argument("--profile", action="store_true", help="one more gateway round sampled by py-spy")
    parser.add_argument("--gateway", metavar="PATH", help="the tms-gateway executable [this interpreter's]")
    parser.add_argument("--address", default=os.environ.get("TMS_HBASE_THRIFT", "127.0.0.1:9090"))
    args = parser.parse_args(argv)
    check_loopback(args.address)
    settings = Settings(address=args.address, rounds=args.rounds)
    media = rest.AVRO if args.media == "avro" else rest.JSON
    batch = payloads(BATCH, PAYLOAD_SIZE)
    rows: dict[str, list[tuple[float, float, float]]] = {"direct": [], "gateway": []}  # wall, client, gateway µs
    with bench_tables(settings, "gwcpu") as (direct, _raw, _raw_name):
        proc, url = start_gateway(settings, direct.installation.prefix, workers=args.workers, command=args.gateway)
        try:
            with GatewayClient(url, timeout_seconds=60, media=media) as gateway:
                clients: dict[str, MessagingClient | GatewayClient] = {"direct": direct, "gateway": gateway}
                topics = {side: new_topic(direct, f"cpu-{side}") for side in clients}
                if args.kind == "consume":
                    source = new_topic(direct, "cpu-consume")
                    for _ in range(args.calls * PAGE // BATCH):
                        direct.publish(source, batch)
                    subscriptions = itertools.count()

                def publishes(side: str, calls: int) -> Callable[[], None]:
                    client, topic = clients[side], topics[side]
                    return lambda: [client.publish(topic, batch) for _ in range(calls)]

                def consumes(side: str, calls: int) -> Callable[[], None]:
                    client, name = clients[side], f"{side}-{next(subscriptions)}"
                    return lambda: _consume(client, source, name, calls)

                job = consumes if args.kind == "consume" else publishes
                for side in clients:  # warm-up: connections, caches, the pool's threads
                    job(side, 300 if args.kind == "publish" else 20)()
                for r in range(args.rounds):
                    for side in ("direct", "gateway") if r % 2 == 0 else ("gateway", "direct"):
                        rows[side].append(_measure(proc.pid, job(side, args.calls), args.calls))
                        wall, client, server = rows[side][-1]
                        progress(
                            f"round {r + 1} {side}: {wall:,.0f} µs/call; CPU µs/call: client {client:,.0f}, "
                            f"gateway {server:,.0f}"
                        )
                if args.profile:
                    profile = _profile(proc.pid, job("gateway", args.calls))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    what = f"publish of {BATCH}" if args.kind == "publish" else f"consume page (and commit) of {PAGE}"
    print(f"# CPU per {what} × {PAYLOAD_SIZE} B ({args.calls} calls × {args.rounds} rounds, medians)\n")
    print(
        f"gateway: {args.gateway or 'this build'}, {args.workers} worker(s), {media}; load {os.getloadavg()[0]:.2f}\n"
    )
    print("| side | wall µs/call | client CPU µs/call | gateway CPU µs/call | total CPU µs/call |")
    print("|---|---|---|---|---|")
    for side, samples in rows.items():
        wall, client, server = (median([s[i] for s in samples]) for i in range(3))
        print(f"| {side} | {wall:,.0f} | {client:,.0f} | {server:,.0f} | {client + server:,.0f} |")
    if args.profile:
        print(profile)
    return 0


def _consume(client: MessagingClient | GatewayClient, topic: TopicId, name: str, calls: int) -> None:
    """Read ``calls`` pages of PAGE messages through a new subscription, committing after each (with the
    next poll, ``poll(commit=True)``, as ``bench.gateway`` does)."""
    client.create_subscription(topic, name, start="earliest")
    with client.consumer(topic, name) as consumer:
        for _ in range(calls):
            if not consumer.poll(max_messages=PAGE, timeout_seconds=5.0, commit=True):
                raise AssertionError(f"the consumer of {name} found no messages")
        consumer.commit()
    client.delete_subscription(topic, name)


def _measure(gateway_pid: int, job: Callable[[], None], calls: int) -> tuple[float, float, float]:
    """(wall, this process's CPU, the gateway's CPU) in µs per call of ``job``."""
    wall, cpu, server = time.perf_counter(), time.process_time(), tree_cpu(gateway_pid)
    job()
    wall, cpu, server = time.perf_counter() - wall, time.process_time() - cpu, tree_cpu(gateway_pid) - server
    return wall * 1e6 / calls, cpu * 1e6 / calls, server * 1e6 / calls


def _profile(gateway_pid: int, job: Callable[[], None]) -> str:
    """Run ``job`` while py-spy samples the gateway's processes and this one; the report as markdown."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("--profile needs py-spy: pip install py-spy")
    pids = {"gateway": _workers(gateway_pid), "client": [os.getpid()]}
    with tempfile.TemporaryDirectory(prefix="gwcpu-") as tmp:
        spies = {
            (who, pid): subprocess.Popen(
                [
                    spy,
                    "record",
                    "--pid",
                    str(pid),
                    "--rate",
                    "1000",
                    "--format",
                    "raw",
                    "--output",
                    f"{tmp}/{pid}",
                    "--nonblocking",
                    "--gil",
                    "--threads",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for who, group in pids.items()
            for pid in group
        }
        time.sleep(1.0)  # py-spy attaches
        job()
        for spy_proc in spies.values():
            spy_proc.send_signal(signal.SIGINT)
        for spy_proc in spies.values():
            spy_proc.wait(60)
        out = []
        for who in pids:
            stacks: collections.Counter[str] = collections.Counter()
            for (owner, pid), _ in spies.items():
                path = Path(f"{tmp}/{pid}")
                if owner == who and path.exists():
                    for line in path.read_text().splitlines():
                        stack, _, count = line.rpartition(" ")
                        stacks[stack] += int(count)
            out.append(_report(who, stacks))
    return "\n".join(out)


def _workers(pid: int) -> list[int]:
    """The gateway's worker processes (the process itself when it serves alone)."""
    children = [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]
    # uvicorn with several workers: a supervisor and the workers; the supervisor's idle loop is left out
    workers = [c for c in children if "multiprocessing" not in Path(f"/proc/{c}/cmdline").read_text()]
    return workers or [pid]


def _report(who: str, stacks: collections.Counter[str]) -> str:
    """Samples by layer (the innermost frame's file) and the top functions by self samples."""
    total = sum(stacks.values()) or 1
    layers: collections.Counter[str] = collections.Counter()
    functions: collections.Counter[str] = collections.Counter()
    for stack, count in stacks.items():
        frames = stack.split(";")
        innermost = frames[-1]
        layers[_layer(frames)] += count
        functions[innermost] += count
    lines = [f"\n## {who}: {total} samples (1 ms each while holding the GIL)\n", "| layer | share |", "|---|---|"]
    lines += [f"| {layer} | {n * 100 / total:.1f}% |" for layer, n in layers.most_common()]
    lines += ["", "| function (self) | share |", "|---|---|"]
    lines += [f"| `{name}` | {n * 100 / total:.1f}% |" for name, n in functions.most_common(25)]
    return "\n".join(lines)


def _layer(frames: list[str]) -> str:
    """The layer of the innermost frame that belongs to one; C code run from Python counts for its caller."""
    for frame in reversed(frames):
        for fragment, layer in LAYERS:
            if fragment in frame:
                return layer
    return "other"


if __name__ == "__main__":
    sys.exit(main())
