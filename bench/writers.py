"""Benchmark 2: 4 writer processes on one topic vs 1 (aggregate messages/s), raw happybase alongside,
for both orderings of a generation: the chain and the sequencer, which also runs 16 writers
(4 processes × 4 threads sharing each process's client, so their publishes share increments).

Four worker processes (spawn start method) are started once; each opens its own MessagingClient
and happybase connection. A trial gives k of them a common start time (the wall clock is shared on
one machine) and a duration; each publishes batches of 100 × 1 KiB until the time is up and reports
how many it wrote. Every tms-hbase trial uses a fresh topic, so all k writers race for one tail;
raw writers write disjoint keys of one table (no ordering at all: the ceiling of this architecture).

Besides msg/s, the CPU each publish costs, by process: the writers' own (``time.process_time``), and, when
the address is served by the local launcher's HBase (``tms-admin hbase start``, ``$TMS_HBASE_HOME``), its
JVM's (from /proc, ticks of 10 ms): one JVM runs the master, ZooKeeper, the region server and the Thrift
gateway, whose puts reach the region server through its short-circuit connection. On two cores throughput
is CPU per publish times publishes, so this says where a publish's cost is, and a loaded machine moves it
much less than the rate (the JVM's figure includes whatever else it serves meanwhile: other clients of a
shared HBase).
"""

from __future__ import annotations

import socket
import threading
import time

from tms_hbase.config import thrift_address
from tms_hbase_launcher import LocalHBase

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
from .gateway import tree_cpu
from .procs import Workers

BATCH = 100
PAYLOAD_SIZE = 1024
WRITERS = 4
THREADS = 4  # per process, in the 16-writer row
SEQ4_GOAL = 1.3  # four sequencer writer processes against one chain writer

_open: dict[tuple[str, str], tuple[object, object, list[bytes]]] = {}  # per worker process


def write_for(
    address: str,
    prefix: str,
    raw_name: str,
    worker: int,
    topic_name: str,
    start_at: float,
    duration: float,
    threads: int = 1,
) -> tuple[int, float, int, int, float]:
    """Worker job: publish (``topic_name``) or raw-put (``""``) batches from ``start_at`` for ``duration`` s,
    from ``threads`` threads sharing this process's client (publishes only).

    Returns (messages written, end time, HBase calls made, publish calls, this process's CPU seconds).
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
    cpu = time.process_time()
    end_at = start_at + duration
    counts = [0] * threads

    def publish(i: int) -> None:
        while time.time() < end_at:
            client.publish(topic, batch)
            counts[i] += 1

    if topic is not None and threads > 1:
        running = [threading.Thread(target=publish, args=(i,)) for i in range(threads)]
        for t in running:
            t.start()
        for t in running:
            t.join()
    elif topic is not None:
        publish(0)
    else:
        while time.time() < end_at:
            raw_put_batch(table, key_prefix, counts[0] * BATCH, batch)
            counts[0] += 1
    count = sum(counts)
    return count * BATCH, time.time(), client.installation.calls - calls, count, time.process_time() - cpu


def close_all() -> None:
    """Worker job: close what ``write_for`` opened."""
    for client, conn, _ in _open.values():
        client.close()
        conn.close()
    _open.clear()


def _trial(
    workers: Workers,
    settings: Settings,
    prefix: str,
    raw_name: str,
    topic: str,
    count: int,
    duration: float,
    threads: int = 1,
    jvms: dict[str, int] | None = None,
) -> tuple[float, float, dict[str, float]]:
    """Aggregate messages/s of ``count`` writer processes (``threads`` each), HBase calls per publish, and
    CPU µs per publish (or raw batch put) of the writers and of each of ``jvms`` (name: pid) over the trial."""
    jvms = jvms or {}
    start_at = time.time() + 0.5
    for i in range(count):
        workers.submit(i, write_for, settings.address, prefix, raw_name, i, topic, start_at, duration, threads)
    wait_until(start_at)
    before = {name: tree_cpu(pid) for name, pid in jvms.items()}
    answers = [workers.result(i, duration + 60) for i in range(count)]
    spent = {"writers": sum(a[4] for a in answers)} | {name: tree_cpu(pid) - before[name] for name, pid in jvms.items()}
    messages = sum(a[0] for a in answers)
    elapsed = max(a[1] for a in answers) - start_at
    publishes = max(1, sum(a[3] for a in answers) if topic else messages // BATCH)
    cpu = {name: seconds * 1e6 / publishes for name, seconds in spent.items()}
    return messages / elapsed, sum(a[2] for a in answers) / publishes, cpu


def local_jvms(address: str) -> dict[str, int]:
    """The local launcher's JVM (``$TMS_HBASE_HOME``: region server and Thrift gateway in one) by role, if it
    serves ``address``; else none."""
    status = LocalHBase(progress=lambda _message: None).status()
    if not status.running or not status.thrift_address or _endpoint(status.thrift_address) != _endpoint(address):
        return {}
    return {"HBase JVM (region server + Thrift)": status.pids["master"]}


def _endpoint(address: str) -> tuple[str, int]:
    """``host:port`` as (IPv4 address, port), so that ``localhost:9090`` and ``127.0.0.1:9090`` are one."""
    host, port = thrift_address(address)
    return socket.gethostbyname(host), port


TRIALS = [  # (row, ordering or "raw", processes, threads per process)
    ("tms1", "chain", 1, 1),  # the two single writers next to each other: an A/B pair in every round
    ("seq1", "sequencer", 1, 1),
    ("tms4", "chain", WRITERS, 1),
    ("seq4", "sequencer", WRITERS, 1),
    ("seq16", "sequencer", WRITERS, THREADS),
    ("raw1", "raw", 1, 1),
    ("raw4", "raw", WRITERS, 1),
]


def run(settings: Settings) -> Result:
    duration = settings.pick(2.0, 1.5)
    result = Result(
        "writers",
        f"{WRITERS} writer processes on one topic vs 1 ({BATCH} × {PAYLOAD_SIZE} B batches, {duration:g} s a trial), "
        f"chain and sequencer generations, and {WRITERS} × {THREADS} sequencer writer threads",
    )
    rates: dict[str, list[float]] = {name: [] for name, *_ in TRIALS}
    calls: dict[str, list[float]] = {name: [] for name, kind, *_ in TRIALS if kind != "raw"}
    cpu: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in TRIALS}
    jvms = local_jvms(settings.address)
    with bench_tables(settings, "wr") as (client, conn, raw_name), Workers(WRITERS) as workers:
        create_raw_table(conn, raw_name)
        prefix = client.installation.prefix
        try:
            for r in range(settings.rounds):
                for name, kind, count, threads in TRIALS if r % 2 == 0 else list(reversed(TRIALS)):
                    topic = "" if kind == "raw" else str(new_topic(client, f"w{r}_{name}", {"ordering": kind}))
                    rate, per_publish, spent = _trial(
                        workers, settings, prefix, raw_name, topic, count, duration, threads, jvms
                    )
                    rates[name].append(rate)
                    cpu[name].append(spent)
                    if kind != "raw":
                        calls[name].append(per_publish)
                progress(
                    f"writers round {r + 1}/{settings.rounds}: "
                    + ", ".join(f"{name} {rates[name][-1]:,.0f}" for name, *_ in TRIALS)
                    + " msg/s"
                )
        finally:
            for i in range(WRITERS):
                workers.submit(i, close_all)
            for i in range(WRITERS):
                workers.result(i, 30)

    m = {k: median(v) for k, v in rates.items()}
    c = {k: median(v) for k, v in calls.items()}
    tms_scale, seq_scale, raw_scale = (
        ratio(m["tms4"], m["tms1"]),
        ratio(m["seq4"], m["seq1"]),
        ratio(m["raw4"], m["raw1"]),
    )
    result.table(
        ["", "1 process, msg/s", f"{WRITERS} processes, msg/s", f"{WRITERS} vs 1", "HBase calls per publish (1 → 4)"],
        [
            ["tms-hbase, chain", m["tms1"], m["tms4"], f"{tms_scale:.2f}×", f"{c['tms1']:.2f} → {c['tms4']:.2f}"],
            ["tms-hbase, sequencer", m["seq1"], m["seq4"], f"{seq_scale:.2f}×", f"{c['seq1']:.2f} → {c['seq4']:.2f}"],
            ["raw happybase, one table", m["raw1"], m["raw4"], f"{raw_scale:.2f}×", "1 → 1"],
            ["chain ÷ raw", f"{ratio(m['tms1'], m['raw1']):.2f}×", f"{ratio(m['tms4'], m['raw4']):.2f}×", "", ""],
            ["sequencer ÷ raw", f"{ratio(m['seq1'], m['raw1']):.2f}×", f"{ratio(m['seq4'], m['raw4']):.2f}×", "", ""],
        ],
    )
    result.table(
        ["sequencer", "msg/s", "÷ 4 processes", "HBase calls per publish"],
        [
            [
                f"{WRITERS} processes × {THREADS} threads",
                m["seq16"],
                f"{ratio(m['seq16'], m['seq4']):.2f}×",
                f"{c['seq16']:.2f}",
            ]
        ],
    )
    parties = ["writers", *jvms]
    labels = {"tms1": "chain, 1", "seq1": "sequencer, 1", "tms4": "chain, 4", "seq4": "sequencer, 4"}
    labels |= {"seq16": f"sequencer, {WRITERS} × {THREADS} threads", "raw1": "raw, 1", "raw4": "raw, 4"}
    per_party = {name: {p: median([c[p] for c in cpu[name]]) for p in parties} for name in cpu}
    result.table(
        ["CPU µs per publish (raw: per batch put), median", *parties, "all"],
        [[labels[n], *(f"{v[p]:,.0f}" for p in parties), f"{sum(v.values()):,.0f}"] for n, v in per_party.items()],
    )
    if not jvms:
        result.notes.append(
            f"{settings.address} is not the local launcher's HBase ($TMS_HBASE_HOME): the CPU of its JVMs is not known"
        )
    seq_raw = ratio(m["seq4"], m["raw4"])
    result.goal(f"{WRITERS} sequencer writers ≥ 0.9× {WRITERS} raw", f"{seq_raw:.2f}×", seq_raw >= 0.9)
    seq4_chain1 = ratio(m["seq4"], m["tms1"])
    # the rounds' ratios too: a round's trials run seconds apart, so a load drift between rounds cancels
    paired4 = median([ratio(s, t) for s, t in zip(rates["seq4"], rates["tms1"], strict=True)])
    result.goal(
        f"{WRITERS} sequencer writers ≥ {SEQ4_GOAL}× one chain writer (medians' ratio; median of the rounds' ratios)",
        f"{seq4_chain1:.2f}× ({paired4:.2f}×)",
        seq4_chain1 >= SEQ4_GOAL,
    )
    result.goal("16 sequencer writers ≥ 4", f"{ratio(m['seq16'], m['seq4']):.2f}×", m["seq16"] >= m["seq4"])
    # A/B within each round (the two trials ran seconds apart, so load drifts cancel): the median ratio
    paired = median([ratio(s, t) for s, t in zip(rates["seq1"], rates["tms1"], strict=True)])
    result.goal(
        "one sequencer writer ≥ 0.9× one chain writer (median of the rounds' ratios; medians' ratio)",
        f"{paired:.2f}× ({ratio(m['seq1'], m['tms1']):.2f}×)",
        paired >= 0.9,
    )
    result.samples = {
        "msgs_per_s": rates,
        "calls_per_publish": calls,
        "scale_tms": tms_scale,
        "scale_sequencer": seq_scale,
        "scale_raw": raw_scale,
        "seq1_over_tms1_paired": paired,
        "seq4_over_tms1": seq4_chain1,
        "seq4_over_tms1_paired": paired4,
        "cpu_us_per_publish": cpu,
    }
    return result
