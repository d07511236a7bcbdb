"""The six peer workloads (docs/benchmarks.md#peers), each run on every started system with the same code
(bench/peers/jobs.py in worker processes). Within a case the systems take turns, and the order rotates every round, so a
disturbance on this shared machine does not always hit the same system. A system that fails a workload
is reported as failed there and skipped for the rest of that workload; the others go on."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from .. import latency
from ..common import Settings, fmt, median, percentile, progress
from ..procs import Workers
from . import jobs
from .report import Workload
from .system import BASELINE, Endpoint, by_key, has_queues, has_transactions, label

T = TypeVar("T")
WORKERS = 8  # worker processes: the most consumers of one case
SIZES = (1024, 100)  # payload bytes
BATCHES = (100, 1)  # messages per publish (transactions)
# how a producer publishes: (label, messages per call, pipelined)
PUBLISH_MODES = (("batch 100", 100, False), ("pipelined", 1000, True), ("sync, batch 1", 1, False))
PRODUCERS = (1, 4)  # producer processes on one topic
SEEKS = 20  # per round
SEEK_SIZE = 100  # the seek topic's payloads (as bench/seek.py)
QUEUE_CONSUMERS = (1, 4)  # consumer processes on one work queue
KEYED_CONSUMERS = (1, 8)  # consumer processes on one key-ordered work queue (as bench/shared_keyed.py)
KEYS = 1000  # keys of the key-ordered work queue's messages, in turn (as bench/shared_keyed.py)
QUEUE_BATCH = 32  # messages a consumer takes at a time
QUEUE_WORK = 0.005  # seconds of work per message (the with-work cases)
QUEUE_IDLE = 2.0  # a consumer ends once nothing comes for this long


def size_label(size: int) -> str:
    return "1 KiB" if size == 1024 else f"{size} B"


def _summary(exc: BaseException) -> str:
    """The last line of a worker's traceback (or the error itself): what failed, in one line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


class Run:
    """The started systems, a pool of worker processes (replaced after a failed job, which may have left
    a worker stuck), topic names, and the filled topics the consume and seek workloads share."""

    def __init__(self, settings: Settings, endpoints: dict[str, Endpoint], workloads: list[Workload]) -> None:
        self.settings = settings
        self.endpoints = endpoints
        self.systems = list(endpoints)
        self.workloads = workloads  # every workload begun, also one cut short by Ctrl-C
        self._workers: Workers | None = None
        self._topics = 0
        self._fixtures: dict[tuple[str, int, int, int], tuple[str, int, int]] = {}
        self.fill_notes: dict[tuple[int, int], list[str]] = {}

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._workers is not None:
            try:
                self.jobs([(i, jobs.close_clients, ()) for i in range(WORKERS)], 60)
            finally:
                self.reset()

    @property
    def workers(self) -> Workers:
        if self._workers is None:
            self._workers = Workers(WORKERS)
            for name, endpoint in self.endpoints.items():  # clients open before any timed job
                for i in range(WORKERS):
                    self._workers.submit(i, jobs.connect, name, endpoint)
                for i in range(WORKERS):
                    self._workers.result(i, 120)
        return self._workers

    def reset(self) -> None:
        """Stop the workers (a stuck one is terminated); the next job starts fresh ones."""
        if self._workers is not None:
            workers, self._workers = self._workers, None
            workers.close()

    def jobs(self, calls: list[tuple[int, Callable[..., Any], tuple[Any, ...]]], timeout: float) -> list[Any]:
        """Submit each (worker, function, args), then collect the answers in the same order."""
        workers = self.workers
        for worker, function, args in calls:
            workers.submit(worker, function, *args)
        deadline = time.monotonic() + timeout
        return [workers.result(worker, max(1.0, deadline - time.monotonic())) for worker, _, _ in calls]

    def job(self, function: Callable[..., T], *args: Any, timeout: float = 120) -> T:
        return self.jobs([(0, function, args)], timeout)[0]

    def workload(self, name: str, title: str) -> Workload:
        """A new workload's results, in the report from now on."""
        self.workloads.append(Workload(name, title))
        return self.workloads[-1]

    def topic(self, kind: str) -> str:
        self._topics += 1
        return f"{kind}_{self.settings.run_id}_{self._topics}"

    def order(self, round_: int, w: Workload) -> list[str]:
        """The systems still in ``w`` this round, the order rotated by the round."""
        names = [n for n in self.systems if n not in w.failed and n not in w.no_equivalent]
        k = round_ % len(names) if names else 0
        return names[k:] + names[:k]

    def attempt(self, w: Workload, name: str, trial: Callable[[], T]) -> T | None:
        """``trial()``, or None after recording in ``w`` that ``name`` failed (workers are replaced)."""
        try:
            return trial()
        except Exception as exc:
            why = _summary(exc)
            w.fail(name, why)
            progress(f"{w.name}: {label(name)} failed: {why}")
            self.reset()
            return None

    def fixture(self, w: Workload, name: str, size: int, total: int, keys: int = 0) -> tuple[str, int, int] | None:
        """A topic of ``total`` messages of ``size`` B (batches of 100; with ``keys``, of that many keys in turn),
        filled once per run: (topic, ms before the first publish, ms before the last). None if filling failed
        (recorded in ``w``)."""
        key = (name, size, total, keys)
        if key not in self._fixtures:
            endpoint, topic = self.endpoints[name], self.topic("fill")

            def fill() -> tuple[int, int, float]:
                self.job(jobs.create_topic, name, endpoint, topic)
                return self.job(jobs.fill, name, endpoint, topic, size, total, 100, keys, timeout=1800)

            filled = self.attempt(w, name, fill)
            if filled is None:
                return None
            first, last, seconds = filled
            self._fixtures[key] = (topic, first, last)
            self.fill_notes.setdefault((size, total), []).append(f"{label(name)} {seconds:.0f} s")
            progress(f"{label(name)}: {total:,} × {size_label(size)} published in {seconds:.1f} s")
        return self._fixtures[key]


def warm_up(run: Run) -> list[str]:
    """One untimed round of publishing and reading on every system before any workload: the JVMs' JIT
    (Kafka's broker, HBase) warms up and connections open. A system that fails it leaves the run; returns
    what failed."""
    s = run.settings
    seconds, cap = s.pick(3.0, 1.0), s.pick(50_000, 20_000)
    w = Workload("warm-up", "")
    for name in list(run.systems):
        if run.attempt(w, name, partial(_warm_up, run, name, seconds, cap)) is None:
            run.systems.remove(name)
        progress(f"{label(name)} warmed up")
    return [f"{label(n)} failed the warm-up: {why}" for n, why in w.failed.items()]


def _warm_up(run: Run, name: str, seconds: float, cap: int) -> bool:
    endpoint, topic = run.endpoints[name], run.topic("warm")
    run.job(jobs.create_topic, name, endpoint, topic)
    written, _ = run.job(jobs.publish_for, name, endpoint, topic, 1024, 100, time.time(), seconds, cap)
    run.job(jobs.publish_for, name, endpoint, topic, 1024, 1, time.time(), seconds / 3, cap)
    run.job(jobs.read_all, name, endpoint, topic, 1024, written)
    run.job(jobs.delete_topic, name, endpoint, topic)
    return True


def publish(run: Run) -> Workload:
    s = run.settings
    # the cap bounds what a trial writes into the shared HBase (100 MB at 1 KiB)
    duration, cap = s.pick(2.0, 0.5), s.pick(100_000, 20_000)
    w = run.workload(
        "publish",
        f"Publish throughput, messages/s into one topic ({duration:g} s trials, or {cap:,} messages if sooner)",
    )
    for size in SIZES:
        for mode, batch, pipelined in PUBLISH_MODES:
            for k in PRODUCERS:
                case = f"{size_label(size)}, {mode}, {k} producer{'s' if k > 1 else ''}"
                for r in range(s.rounds):
                    for name in run.order(r, w):
                        trial = partial(_publish_trial, run, name, size, batch, k, duration, cap, pipelined)
                        rate = run.attempt(w, name, trial)
                        if rate is not None:
                            w.add(case, "msg/s", name, rate)
                    progress(f"publish {case}, round {r + 1}/{s.rounds} done")
    w.notes.append(
        "Each producer is its own process, in one of three modes. **sync, batch 1**: one message per call, each "
        "acknowledged before the next (Kafka: produce + flush; JetStream: `publish`; Redis: `XADD`; tms-hbase: "
        "`publish`). **pipelined**: single messages sent without waiting, 1,000 at a time, all acknowledged "
        "before the next 1,000 (Kafka: produce each, then flush; JetStream: `publish_async` each, then the acks; "
        "Redis: one pipeline of 1,000 XADDs; tms-hbase: the background publisher, `BackgroundPublisher.publish` of "
        "each message, then `flush`). **batch 100**: one call per 100 messages, acknowledged whole (tms-hbase: one "
        "`publish` call, one batch row; the peers have no batch of their own, so theirs is the pipelined code "
        "with 100 at a time). A fresh topic per trial."
    )
    w.notes += batch_goals(w)
    return w


def batch_goals(w: Workload) -> list[str]:
    """The goal lines of the batch cases: tms-hbase's batch publish of 1 KiB × 100 at least Kafka's rate, with 1
    and with 4 producers (medians of the rounds; a case without both systems' samples has no line)."""
    lines = []
    for k in PRODUCERS:
        case = f"{size_label(1024)}, batch 100, {k} producer{'s' if k > 1 else ''}"
        row = next((r for r in w.rows if r.case == case and r.samples.get(BASELINE) and r.samples.get("kafka")), None)
        if row is not None:
            tms, kafka = w.value(row, BASELINE), w.value(row, "kafka")
            lines.append(
                w.goal(
                    f"batch publish ≥ Kafka's ({case})",
                    f"{fmt(tms)} vs {fmt(kafka)} msg/s, {tms / kafka:.2f}×",
                    tms >= kafka,
                )
            )
    return lines


def _publish_trial(
    run: Run, name: str, size: int, batch: int, k: int, duration: float, cap: int, pipelined: bool
) -> float:
    endpoint, topic = run.endpoints[name], run.topic("pub")
    run.job(jobs.create_topic, name, endpoint, topic)
    start_at = time.time() + 0.5
    args = (name, endpoint, topic, size, batch, start_at, duration, cap // k, pipelined)
    answers = run.jobs([(i, jobs.publish_for, args) for i in range(k)], duration + 120)
    run.job(jobs.delete_topic, name, endpoint, topic)
    return sum(a[0] for a in answers) / (max(a[1] for a in answers) - start_at)


def consume(run: Run) -> Workload:
    s = run.settings
    cases = [(SEEK_SIZE, s.pick(1_000_000, 50_000)), (1024, s.pick(200_000, 20_000))]
    w = run.workload("consume", "Consume throughput, messages/s read from the beginning of a topic by a fresh reader")
    for size, total in cases:
        case = f"{total:,} × {size_label(size)}"
        topics = {name: run.fixture(w, name, size, total) for name in run.systems}
        for r in range(s.rounds):
            for name in run.order(r, w):
                fixture = topics[name]
                if fixture is None:
                    continue
                endpoint = run.endpoints[name]
                read = partial(run.job, jobs.read_all, name, endpoint, fixture[0], size, total, timeout=1800)
                seconds = run.attempt(w, name, read)
                if seconds is not None:
                    w.add(case, "msg/s", name, total / seconds)
            progress(f"consume {case}, round {r + 1}/{s.rounds} done")
        filled = ", ".join(run.fill_notes.get((size, total), [])) or "–"
        w.notes.append(f"{case} written in batches of 100 by one producer in: {filled}.")
    w.notes.append(
        "Readers: tms-hbase a consumer of a new subscription from the earliest message (`consumer.poll(1000)`, "
        "one commit at the end; the subscription's creation and deletion are timed too); "
        "Kafka an assigned consumer (`consume(1000)`); "
        "JetStream an ordered push consumer with a callback; Redis `XRANGE … COUNT 1000` pages. "
        "Every payload is touched and the count and bytes checked. The 1 KiB topic is 200,000 messages, not 1M: "
        "1M × 1 KiB is 1 GiB written into the shared standalone HBase (bench/seek.py says what that did)."
    )
    return w


def seek(run: Run) -> Workload:
    s = run.settings
    total = s.pick(1_000_000, 50_000)
    w = run.workload("seek", f"Time seek: first message at or after a random time t, on a topic of {total:,} messages")
    case = f"{total:,} × {size_label(SEEK_SIZE)}"
    rng = random.Random(17)
    pooled: dict[str, list[float]] = {}
    topics = {name: run.fixture(w, name, SEEK_SIZE, total) for name in run.systems}
    for r in range(s.rounds):
        where = [rng.random() for _ in range(SEEKS)]  # the same relative times on every system
        for name in run.order(r, w):
            fixture = topics[name]
            if fixture is None:
                continue
            topic, first, last = fixture
            targets = [first + int(u * (last - first)) for u in where]
            ms = run.attempt(w, name, partial(run.job, jobs.seek, name, run.endpoints[name], topic, targets))
            if ms is not None:
                w.add(case, "ms per seek (median)", name, median(ms))
                pooled.setdefault(name, []).extend(ms)
        progress(f"seek round {r + 1}/{s.rounds} done")
    for name, ms in pooled.items():
        w.add(case, "ms per seek (p90, all rounds)", name, percentile(ms, 90))
    w.notes.append(
        f"{SEEKS} seeks a round at random times between the first and last publish; each result is checked to "
        "be at or after t. tms-hbase `fetch(start_time_ms=t, limit=1)` (a search by the rows' dates); Kafka "
        "`offsets_for_times` then one message from that offset; JetStream a pull consumer with "
        "`DeliverPolicy.BY_START_TIME` and `opt_start_time=t`, one message, consumer deleted; Redis "
        "`XRANGE key <t>-0 + COUNT 1`. The topic is the consume workload's (batches of 100)."
    )
    return w


def visible_latency(run: Run) -> Workload:
    s = run.settings
    duration = s.pick(5.0, 2.0)
    w = run.workload(
        "latency",
        f"Publish → visible latency at {latency.RATE:,.0f} msg/s with one tailing consumer ({duration:g} s trials)",
    )
    missed: dict[str, int] = {}
    for size in SIZES:
        case = size_label(size)
        for r in range(s.rounds):
            for name in run.order(r, w):
                answer = run.attempt(w, name, partial(_latency_trial, run, name, size, duration))
                if answer is None:
                    continue
                sent, latencies, calls = answer
                w.add(case, "p50 ms", name, percentile(latencies, 50))
                w.add(case, "p99 ms", name, percentile(latencies, 99))
                w.add(case, "publish call p99 ms", name, percentile(calls, 99))
                missed[name] = missed.get(name, 0) + sent - len(latencies)
            progress(f"latency {case}, round {r + 1}/{s.rounds} done")
    lost = [f"{label(n)} {m:,}" for n, m in missed.items() if m]
    w.notes.append(
        "A publisher process paced as bench/latency.py (every message due by now in one publish, one while "
        "the system keeps up); payloads carry their send time; a tailing consumer in another process notes "
        "when each comes out; publish call p99 is the publisher's own call (produce and flush, the put) "
        "of the same messages, the part of the latency the store's acknowledgement takes. Consumers: "
        "tms-hbase a consumer of a subscription from the earliest message (`consumer.poll`, woken by the "
        "publisher's doorbell; no commits, as Kafka's assigned consumer); "
        "Kafka an assigned consumer (the broker holds each fetch "
        "until data arrives); JetStream an ordered push consumer; Redis `XREAD BLOCK`. "
        + (f"Messages never seen by the consumer: {', '.join(lost)}." if lost else "Every message was received.")
    )
    for size in SIZES:
        row = next((r for r in w.rows if r.case == size_label(size) and r.metric == "p99 ms"), None)
        if row is not None and row.samples.get(BASELINE) and row.samples.get("kafka"):
            ours, kafka = w.value(row, BASELINE), w.value(row, "kafka")
            goal = w.goal(
                f"{label(BASELINE)} p99 ≤ Kafka's at {size_label(size)}", f"{ours:.2f} vs {kafka:.2f} ms", ours <= kafka
            )
            w.notes.append(goal)
            progress(goal)
    return w


def _latency_trial(run: Run, name: str, size: int, duration: float) -> tuple[int, list[float], list[float]]:
    endpoint, topic = run.endpoints[name], run.topic("lat")
    run.job(jobs.create_topic, name, endpoint, topic)
    start_at = time.time() + 1.0
    expected_at = start_at + duration
    deadline = expected_at + 15
    calls = [
        (1, jobs.tail, (name, endpoint, topic, deadline, expected_at)),
        (0, jobs.publish_paced, (name, endpoint, topic, size, start_at, duration)),
    ]
    latencies, (sent, publish_calls) = run.jobs(calls, deadline - time.time() + 60)
    run.job(jobs.delete_topic, name, endpoint, topic)
    if not latencies:
        raise RuntimeError(f"the tailing consumer received none of {sent} messages")
    return sent, latencies, publish_calls


def transactions(run: Run) -> Workload:
    s = run.settings
    duration = s.pick(3.0, 1.0)
    w = run.workload("tx", f"Transactional publish: one batch per transaction, back to back for {duration:g} s")
    w.no_equivalent.update(n for n in run.systems if not has_transactions(n))
    for batch in BATCHES:
        for size in SIZES:
            case = f"{size_label(size)}, batch {batch}"
            for r in range(s.rounds):
                for name in run.order(r, w):
                    answer = run.attempt(w, name, partial(_tx_trial, run, name, size, batch, duration))
                    if answer is None:
                        continue
                    totals, commits = answer
                    w.add(case, "commit p50 ms", name, percentile(commits, 50) * 1000)
                    w.add(case, "commit p99 ms", name, percentile(commits, 99) * 1000)
                    w.add(case, "transactions/s", name, len(totals) / sum(totals))
                    w.add(case, "messages/s", name, len(totals) * batch / sum(totals))
                progress(f"tx {case}, round {r + 1}/{s.rounds} done")
    w.notes.append(
        "Kafka: a transactional producer (`begin_transaction`, produce the batch, `commit_transaction`), read back "
        "with an `isolation.level=read_committed` consumer. tms-hbase: a `TransactionContext` with a "
        "`TransactionalPublisher` against a real transaction server (`tms-admin tx serve`, bench/txlatency.py's "
        "starter), read back with a `TransactionalReader`. Commit = `commit_transaction` / `finish()` alone; "
        "transactions/s and messages/s count whole transactions, one after the other in one process. After each "
        "trial every committed message is read back with transactional isolation and counted (not timed: on "
        "topics this small it would time the reader's start). JetStream and Redis have no transaction that spans "
        "topics and hides uncommitted messages from readers (JetStream ≥ 2.12 has atomic batch publish into one "
        "stream, Redis MULTI/EXEC runs commands atomically on one server), so they have no row here."
    )
    return w


def _tx_trial(run: Run, name: str, size: int, batch: int, duration: float) -> tuple[list[float], list[float]]:
    endpoint, topic = run.endpoints[name], run.topic("tx")
    run.job(jobs.create_topic, name, endpoint, topic)
    totals, commits = run.job(jobs.transact_for, name, endpoint, topic, size, batch, duration, timeout=duration + 120)
    count = (len(totals) + 1) * batch  # and the warm-up transaction
    run.job(jobs.read_all, name, endpoint, topic, size, count, True, timeout=600)
    run.job(jobs.delete_topic, name, endpoint, topic)
    return totals, commits


def queue(run: Run) -> Workload:
    s = run.settings
    w = run.workload(
        "queue", "Work queue: consumer processes sharing one topic's messages, each acknowledged on its own, msg/s"
    )
    w.no_equivalent.update(n for n in run.systems if not has_queues(n))
    for work, total in ((QUEUE_WORK, s.pick(1_000, 300)), (0.0, s.pick(5_000, 1_000))):
        _queue_cases(run, w, total, work, QUEUE_CONSUMERS, keys=0)
    w.notes.append(
        f"A new consumer group on a filled topic per trial; {'/'.join(map(str, QUEUE_CONSUMERS))} consumer processes "
        f"each take up to {QUEUE_BATCH} messages at a time, sleep the work (5 ms or none) and acknowledge each message "
        "with a confirmed round trip; rate = messages / (last acknowledgement − the common start); ack p50: the median "
        "wall time of one acknowledgement call (its cost to the consumer). tms-hbase: a shared "
        "subscription (`shared_consumer`, `receive`, `ack`; claim_size 128); Redis: `XREADGROUP … >` and `XACK`; "
        "JetStream: a durable pull consumer with explicit acks shared by the processes (`fetch`, `ack_sync`). Kafka's "
        "share groups (KIP-932) have no client in confluent-kafka, so Kafka has no row."
    )
    return w


def keyed(run: Run) -> Workload:
    """The queue workload on messages of KEYS keys in turn, tms-hbase keeping each key in order
    (bench/shared_keyed.py's work): the peers run their closest mode, which does not order by key."""
    s = run.settings
    w = run.workload(
        "keyed", f"Key-ordered work queue: {KEYS:,} keys in turn, consumer processes, each message acknowledged, msg/s"
    )
    w.no_equivalent.update(n for n in run.systems if not has_queues(n))
    _queue_cases(run, w, s.pick(3_200, 800), QUEUE_WORK, KEYED_CONSUMERS, keys=KEYS)
    unordered = ", ".join(label(n) for n in run.systems if n not in w.no_equivalent and not by_key(n))
    w.notes.append(
        f"The queue workload's trial on a topic whose messages have {KEYS:,} keys in turn (a key's messages "
        f"{KEYS:,} apart), 5 ms of work each, {'/'.join(map(str, KEYED_CONSUMERS))} consumer processes: tms-hbase "
        'a key-ordered shared subscription (`ordering="key"`: a key\'s next message only after its previous one '
        f"was acknowledged, keys spread over any consumers). {unordered or 'The peers'}: the closest mode each has, "
        "the same queue as in the queue workload (Redis Streams consumer groups, JetStream pull consumers), which "
        "**does not order by key**: what tms-hbase's figure costs against none. Neither has a key-ordered shared "
        "mode: JetStream's ordered consumers have one reader, Redis's consumer groups none."
    )
    return w


def _queue_cases(run: Run, w: Workload, total: int, work: float, consumers: tuple[int, ...], keys: int) -> None:
    """The work-queue trials of ``total`` messages (of ``keys`` keys in turn; 0: no keys) with ``work`` s per
    message, for each number of ``consumers``, every round."""
    s = run.settings
    size = SEEK_SIZE
    topics = {name: run.fixture(w, name, size, total, keys) for name in run.systems if name not in w.no_equivalent}
    for k in consumers:
        doing = "5 ms work" if work else "no work"
        case = f"{total:,} × {size_label(size)}, {doing}, {k} consumer{'s' * (k > 1)}"
        for r in range(s.rounds):
            for name in run.order(r, w):
                fixture = topics.get(name)
                if fixture is None:
                    continue
                got = run.attempt(w, name, partial(_queue_trial, run, name, fixture[0], total, k, work, bool(keys)))
                if got is not None:
                    w.add(case, "msg/s", name, got[0])
                    w.add(case, "ack p50 ms", name, got[1] * 1000)
            progress(f"{w.name} {case}, round {r + 1}/{s.rounds} done")


def _queue_trial(run: Run, name: str, topic: str, total: int, k: int, work: float, keyed: bool) -> tuple[float, float]:
    """(msg/s, the median wall time of one acknowledgement in seconds); ``keyed``: the system's queue closest to
    one that keeps each key in order."""
    endpoint, group = run.endpoints[name], run.topic("grp")
    run.job(jobs.create_queue, name, endpoint, topic, group, keyed)
    start_at = time.time() + 1.0
    args = (name, endpoint, topic, group, work, QUEUE_BATCH, QUEUE_IDLE, start_at)
    answers = run.jobs([(i, jobs.work_queue, args) for i in range(k)], total * (work + 0.05) + 300)
    count = sum(a[0] for a in answers)
    if count != total:
        raise AssertionError(f"{k} consumers acknowledged {count} messages, expected {total}")
    acks = sorted(t for a in answers for t in a[2])
    return count / (max(a[1] for a in answers) - start_at), acks[len(acks) // 2]


WORKLOADS: dict[str, Callable[[Run], Workload]] = {
    "publish": publish,
    "consume": consume,
    "latency": visible_latency,
    "tx": transactions,
    "seek": seek,
    "queue": queue,
    "keyed": keyed,
}
