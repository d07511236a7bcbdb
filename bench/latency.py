"""Benchmark 4: publish-to-visible latency at ~1,000 msg/s with a tailing reader.

Two worker processes: a publisher paced to RATE messages/s (each loop publishes every message
that is due by now, so one message per publish when HBase keeps up, a small batch when it falls
behind; each payload starts with the wall-clock time just before its publish call) and a tailing
reader that polls ``fetch(topic, start_message=last_id, inclusive=False)`` and sleeps POLL_SLEEP
after a poll that found nothing. Latency = reader's clock when the message came out of fetch −
the send time in the payload (one machine, one clock). Raw happybase alongside: the publisher puts
one row per message (one mutateRows per loop) and the reader scans from the row after the last one.
tms-hbase runs three times: a ``fetch`` loop on a chain topic and on a sequencer topic (``ordering``,
docs/ordering.md), and the consumer API on a sequencer topic (``consumer.poll``, woken by the publisher's
doorbell, whose ring carries a row of up to 8 KiB so that the consumer delivers it without reading HBase),
which is how an application tails a topic; its p50 and p99 are checked against the raw put → scan's, and
the table says how many rows the consumer took from a ring's datagram and how many it read. The consumer also
runs with 100 B payloads (the size where its p99 trails Kafka's in bench.peers), and a second table splits each
consumer's latency into its stages, for all messages and for the slowest 1 %: the put (send → the publish's
put acknowledged, when it starts ringing), the ring (→ its datagrams sent), the wake-up (→ the consumer's poll
woke or, if it was busy, started; 0 if it was awake already) and the delivery (→ the message came out of
``poll``: decoding a ring's row, or a read when the poll was awake before the ring was sent).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import REGISTRY

from tms_hbase import MessagingClient, TopicId
from tms_hbase.model.metrics import CLIENT_METRICS

from .common import (
    RAW_COLUMN,
    RawConnection,
    Result,
    Settings,
    bench_tables,
    create_raw_table,
    median,
    new_topic,
    percentile,
    progress,
    raw_key,
    raw_put_batch,
    send_time_of,
    stamped,
    wait_until,
)
from .procs import Workers

RATE = 1000.0
PAYLOAD_SIZE = 1024
POLL_SLEEP = 0.002
MAX_BATCH = 100
GOAL_P99_MS = 50.0
P50_GOAL = 1.3  # the consumer's p50 at most this × raw happybase's put → scan
SMALL_SIZE = 100
KINDS = {  # kind: (row label, topic properties (None: raw happybase), payload bytes)
    "tms": ("tms-hbase publish → fetch, chain", {"ordering": "chain"}, PAYLOAD_SIZE),
    "seq": ("tms-hbase publish → fetch, sequencer", {"ordering": "sequencer"}, PAYLOAD_SIZE),
    "con": ("tms-hbase publish → `consumer.poll` (doorbell), sequencer", {"ordering": "sequencer"}, PAYLOAD_SIZE),
    "c100": (
        f"tms-hbase publish → `consumer.poll` (doorbell), sequencer, {SMALL_SIZE} B",
        {"ordering": "sequencer"},
        SMALL_SIZE,
    ),
    "raw": ("raw happybase put → scan", None, PAYLOAD_SIZE),
}
CONSUMERS = ("con", "c100")
STAGES = ("put", "ring", "wake-up", "delivery")
CONSUMER_WAIT = 0.1  # seconds a consumer poll waits for a message (a doorbell ends the wait at once)

_open: dict[tuple[str, str], tuple[object, object]] = {}  # per worker process


def _handles(address: str, prefix: str) -> tuple[object, object]:
    if (address, prefix) not in _open:
        _open[(address, prefix)] = (
            MessagingClient(address, prefix=prefix, create_tables=False),
            RawConnection(Settings(address=address)),
        )
    return _open[(address, prefix)]


def pace(
    start_at: float,
    duration: float,
    size: int,
    publish: Callable[[list[bytes]], object],
    calls: list[float] | None = None,
) -> tuple[int, int]:
    """Call ``publish`` at RATE messages/s from ``start_at`` for ``duration`` s, each time with every
    message due by now (at most MAX_BATCH), each payload of ``size`` bytes stamped with the time just
    before the call; returns (messages, publishes). ``calls`` gets each call's milliseconds (the publish
    alone: how much of a latency is the store's acknowledgement)."""
    wait_until(start_at)
    sent = publishes = 0
    end_at = start_at + duration
    while True:
        now = time.time()
        if now >= end_at:
            break
        due = min(MAX_BATCH, int((now - start_at) * RATE) + 1 - sent)
        if due <= 0:
            wait_until(start_at + sent / RATE)
            continue
        send_time = time.time()
        publish([stamped(send_time, size)] * due)
        if calls is not None:
            calls.append((time.time() - send_time) * 1000)
        sent += due
        publishes += 1
    return sent, publishes


def follow(poll: Callable[[], Iterable[bytes]], deadline: float, expected_at: float) -> tuple[list[float], int]:
    """Latencies (ms) of the stamped payloads ``poll`` yields, each taken as it comes out, until
    ``deadline`` or until none came for a second after ``expected_at``; and the number of polls.
    ``poll`` does its own waiting when nothing is there."""
    latencies: list[float] = []
    polls = 0
    last_seen = time.time()
    while True:
        now = time.time()
        if now >= deadline or (now >= expected_at and now - last_seen > 1.0):
            break
        polls += 1
        got = 0
        for payload in poll():
            latencies.append((time.time() - send_time_of(payload)) * 1000)
            got += 1
        if got:
            last_seen = time.time()
    return latencies, polls


class FetchPoller:
    """Tails a tms-hbase topic with ``fetch`` after the last message id; sleeps POLL_SLEEP after a poll
    that found nothing (tms-hbase has no push or long-poll consumer)."""

    def __init__(self, client: MessagingClient, topic: TopicId) -> None:
        self.client, self.topic = client, topic
        self.last_id: bytes | None = None

    def poll(self) -> Iterator[bytes]:
        if self.last_id is None:
            messages = self.client.fetch(self.topic)
        else:
            messages = self.client.fetch(self.topic, self.last_id, inclusive=False)
        got = False
        for message in messages:
            self.last_id = message.id
            got = True
            yield message.payload
        if not got:
            time.sleep(POLL_SLEEP)

    def close(self) -> None:
        pass  # the client belongs to the caller


class ConsumerPoller:
    """Tails a tms-hbase topic with the consumer API: a subscription of its own from the earliest message,
    ``consumer.poll``, which returns as soon as a message is there (the publisher's doorbell wakes it).
    ``timings`` gets (send time, when the poll woke or started, when the poll returned) of each message: the
    time its doorbell's wait last returned in that poll (its bell's ``wait`` is timed), else the poll's start."""

    def __init__(self, client: MessagingClient, topic: TopicId) -> None:
        self.client, self.topic, self.name = client, topic, f"lat-{time.time_ns()}"
        client.create_subscription(topic, self.name)
        self.consumer = client.consumer(topic, self.name)
        self.timings: list[tuple[float, float, float]] = []
        self._woke = 0.0
        bell = self.consumer._bell
        wait = bell.wait

        def timed_wait(timeout: float) -> bool:
            rang = wait(timeout)
            self._woke = time.time()
            return rang

        bell.wait = timed_wait  # type: ignore[method-assign]

    def poll(self) -> Iterator[bytes]:
        self._woke = time.time()
        messages = self.consumer.poll(500, CONSUMER_WAIT)  # (max_messages, wait)
        out = time.time()
        for message in messages:
            self.timings.append((send_time_of(message.payload), self._woke, out))
            yield message.payload

    def close(self) -> None:
        try:
            self.consumer.close()
        finally:
            self.client.delete_subscription(self.topic, self.name, force=True)


def publish_paced(
    address: str,
    prefix: str,
    raw_name: str,
    topic_name: str,
    start_at: float,
    duration: float,
    size: int = PAYLOAD_SIZE,
) -> tuple[int, int, list[float], dict[float, tuple[float, float]]]:
    """Worker job: publish ``size``-byte payloads at RATE msg/s from ``start_at`` for ``duration`` s; returns
    (messages, publishes, each publish call's ms, and for a topic each publish's send time → when its put was
    acknowledged and its rings started, and when they were sent: the client's doorbells' ``ring`` is timed)."""
    client, conn = _handles(address, prefix)
    topic = TopicId.parse(topic_name) if topic_name else None
    calls: list[float] = []
    rings: dict[float, tuple[float, float]] = {}
    if topic is not None:
        client.get_topic(topic)
        doorbells = client._doorbells
        ring = doorbells.ring
        rung: list[tuple[float, float]] = []

        def timed_ring(*args: object) -> None:
            acked = time.time()
            ring(*args)
            rung.append((acked, time.time()))

        def publish(batch: list[bytes]) -> None:
            client.publish(topic, batch)
            rings[send_time_of(batch[0])] = rung.pop()

        doorbells.ring = timed_ring
        try:
            return (*pace(start_at, duration, size, publish, calls), calls, rings)
        finally:
            del doorbells.ring  # the client is kept for the next round
    # taken for raw trials only: a connection's idle time is then that of its last raw trial (RawConnection
    # reconnects after max_idle; HBase's Thrift server drops a connection idle for a minute)
    table = conn.table(raw_name)
    key_prefix = f"raw:{start_at}:".encode()
    sent = 0

    def put(batch: list[bytes]) -> None:
        nonlocal sent
        raw_put_batch(table, key_prefix, sent, batch)
        sent += len(batch)

    return (*pace(start_at, duration, size, put, calls), calls, rings)


def rung_rows() -> tuple[float, float]:
    """How many rung rows this process's consumers delivered so far: (from a ring's datagram, read)."""
    CLIENT_METRICS.rung_rows.labels("datagram")  # made, so the samples exist
    counts = [REGISTRY.get_sample_value("tms_client_rung_rows_total", {"source": s}) for s in ("datagram", "read")]
    return counts[0] or 0.0, counts[1] or 0.0


def tail(
    address: str,
    prefix: str,
    raw_name: str,
    topic_name: str,
    start_at: float,
    deadline: float,
    expected_at: float,
    consumer: bool = False,
) -> tuple[list[float], int, tuple[float, float], list[tuple[float, float, float]]]:
    """Worker job: tail the topic (with ``fetch``, or the consumer API if ``consumer``; or raw rows) from
    before ``start_at`` until ``deadline`` or until no message arrived for a second after ``expected_at``;
    returns (latencies in ms, polls, rung rows delivered from a datagram and read, and the consumer's
    :attr:`ConsumerPoller.timings`)."""
    client, conn = _handles(address, prefix)
    if topic_name:
        topic = TopicId.parse(topic_name)
        poller = ConsumerPoller(client, topic) if consumer else FetchPoller(client, topic)
        before = rung_rows()
        try:
            latencies, polls = follow(poller.poll, deadline, expected_at)
        finally:
            poller.close()
        after = rung_rows()
        timings = poller.timings if isinstance(poller, ConsumerPoller) else []
        return latencies, polls, (after[0] - before[0], after[1] - before[1]), timings
    table = conn.table(raw_name)
    key_prefix = f"raw:{start_at}:".encode()
    stop = key_prefix + b"\xff" * 8
    next_key = raw_key(key_prefix, 0)

    def scan() -> Iterator[bytes]:
        nonlocal next_key
        got = False
        for key, data in table.scan(row_start=next_key, row_stop=stop):
            next_key = key + b"\0"
            got = True
            yield data[RAW_COLUMN]
        if not got:
            time.sleep(POLL_SLEEP)

    return (*follow(scan, deadline, expected_at), (0.0, 0.0), [])


def stages(
    rings: dict[float, tuple[float, float]], timings: list[tuple[float, float, float]]
) -> Iterator[tuple[float, ...]]:
    """Each consumed message's latency and its stages in ms (:data:`STAGES`), from the publisher's ``rings``
    (send time → put acknowledged, rings sent) and the consumer's ``timings`` (send time, woke, returned)."""
    for sent, woke, out in timings:
        if sent in rings:
            acked, rung = rings[sent]
            begun = max(woke, rung)  # a poll that woke before the ring was sent found the message by a read
            yield tuple(1000 * d for d in (out - sent, acked - sent, rung - acked, begun - rung, out - begun))


def stage_rows(label: str, staged: list[tuple[float, ...]]) -> list[list[object]]:
    """The rows of the stage table for one consumer: its whole latency, then each stage's p50 and p99 over all
    messages and its mean over the messages whose latency is at or above the p99 (and that mean's share of
    theirs)."""
    if not staged:
        return []
    cut = percentile([s[0] for s in staged], 99)
    slowest = [s for s in staged if s[0] >= cut]
    rows: list[list[object]] = []
    for i, name in enumerate(("publish → delivered", *STAGES)):
        values = [s[i] for s in staged]
        tail_mean = sum(s[i] for s in slowest) / len(slowest)
        share = tail_mean / (sum(s[0] for s in slowest) / len(slowest))
        rows.append(
            [
                f"{label}: {name}" if i == 0 else f"… {name}",
                percentile(values, 50),
                percentile(values, 99),
                tail_mean,
                f"{share:.0%}",
            ]
        )
    return rows


def close_all() -> None:
    for client, conn in _open.values():
        client.close()
        conn.close()
    _open.clear()


def run(settings: Settings) -> Result:
    duration = settings.pick(6.0, 3.0)
    result = Result(
        "latency",
        f"Publish-to-visible latency ({RATE:,.0f} msg/s target, {PAYLOAD_SIZE} B payloads, {duration:g} s a round, "
        "publisher and tailing reader in separate processes)",
    )
    stats: dict[str, dict[str, list[float]]] = {
        kind: {
            "p50": [],
            "p99": [],
            "max": [],
            "call_p99": [],
            "rate": [],
            "per_publish": [],
            "polls_per_s": [],
            "lost": [],
            "from_ring": [],
            "rung_read": [],
        }
        for kind in KINDS
    }
    pooled: dict[str, list[float]] = {kind: [] for kind in KINDS}
    staged: dict[str, list[tuple[float, ...]]] = {kind: [] for kind in CONSUMERS}  # (total, *STAGES) ms
    with bench_tables(settings, "lat") as (client, conn, raw_name), Workers(2) as workers:
        create_raw_table(conn, raw_name)
        prefix = client.installation.prefix
        try:
            for r in range(settings.rounds):
                for kind in list(KINDS) if r % 2 == 0 else list(reversed(KINDS)):
                    _label, properties, size = KINDS[kind]
                    topic = "" if properties is None else str(new_topic(client, f"lat{r}{kind}", properties))
                    start_at = time.time() + 1.0
                    expected_at = start_at + duration
                    deadline = expected_at + 15
                    workers.submit(
                        1,
                        tail,
                        settings.address,
                        prefix,
                        raw_name,
                        topic,
                        start_at,
                        deadline,
                        expected_at,
                        kind in CONSUMERS,
                    )
                    workers.submit(
                        0, publish_paced, settings.address, prefix, raw_name, topic, start_at, duration, size
                    )
                    sent, publishes, calls, rings = workers.result(0, duration + 60)
                    latencies, polls, (from_ring, rung_read), timings = workers.result(1, deadline - time.time() + 60)
                    if kind in CONSUMERS:
                        staged[kind].extend(stages(rings, timings))
                    s = stats[kind]
                    s["p50"].append(percentile(latencies, 50))
                    s["p99"].append(percentile(latencies, 99))
                    s["max"].append(max(latencies, default=float("nan")))
                    s["call_p99"].append(percentile(calls, 99))
                    s["rate"].append(sent / duration)
                    s["per_publish"].append(sent / max(1, publishes))
                    s["polls_per_s"].append(polls / duration)
                    s["lost"].append(sent - len(latencies))
                    s["from_ring"].append(from_ring)
                    s["rung_read"].append(rung_read)
                    pooled[kind].extend(latencies)
                progress(
                    f"latency round {r + 1}/{settings.rounds}: p50/p99 ms "
                    + ", ".join(f"{kind} {stats[kind]['p50'][-1]:.1f}/{stats[kind]['p99'][-1]:.1f}" for kind in KINDS)
                )
        finally:
            for i in range(2):
                workers.submit(i, close_all)
            for i in range(2):
                workers.result(i, 30)

    rows = []
    for kind, (label, _, _) in KINDS.items():
        s = stats[kind]
        rows.append(
            [
                label,
                median(s["p50"]),
                median(s["p99"]),
                percentile(pooled[kind], 99),
                max(s["max"]),
                median(s["call_p99"]),
                median(s["rate"]),
                median(s["per_publish"]),
                median(s["polls_per_s"]),
                int(sum(s["lost"])),
                f"{int(sum(s['from_ring'])):,} / {int(sum(s['rung_read'])):,}" if kind in CONSUMERS else "–",
            ]
        )
    result.table(
        [
            "",
            "p50 ms (median of rounds)",
            "p99 ms (median of rounds)",
            "p99 ms (all samples)",
            "max ms",
            "publish call p99 ms",
            "msg/s achieved",
            "msgs per publish",
            "reader polls/s",
            "not received",
            "rung rows from the ring / read",
        ],
        rows,
    )
    result.table(
        ["where the consumer's latency goes, ms", "p50", "p99", "mean of the slowest 1 %", "share of the slowest 1 %"],
        [row for kind in CONSUMERS for row in stage_rows(KINDS[kind][0], staged[kind])],
    )
    for kind, ordering in (("tms", "chain"), ("seq", "sequencer"), ("con", "consumer")):
        p99 = median(stats[kind]["p99"])
        result.goal(
            f"publish-to-visible p99 < {GOAL_P99_MS:g} ms at {RATE:,.0f} msg/s, {ordering}",
            f"{p99:.1f} ms",
            p99 < GOAL_P99_MS,
        )
    round_ratios = [c / r for c, r in zip(stats["con"]["p50"], stats["raw"]["p50"], strict=True)]
    p50_ratio = median(stats["con"]["p50"]) / median(stats["raw"]["p50"])
    result.goal(
        f"consumer p50 ≤ {P50_GOAL:g}× raw put → scan",
        f"{p50_ratio:.2f}× (median of round ratios {median(round_ratios):.2f}×)",
        p50_ratio <= P50_GOAL,
    )
    con_p99, raw_p99 = median(stats["con"]["p99"]), median(stats["raw"]["p99"])
    result.goal(
        "consumer p99 ≤ raw put → scan p99 (Kafka's p99 is compared in bench.peers' latency workload)",
        f"{con_p99:.2f} vs {raw_p99:.2f} ms ({con_p99 / raw_p99:.2f}×)",
        con_p99 <= raw_p99,
    )
    result.samples = {"per_round": stats}
    return result
