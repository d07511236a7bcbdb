"""Benchmark 8: the Spark data source ``format("tms")`` next to plain happybase loops.

- batch write: ``df.write.format("tms")`` of TOTAL payloads of 100 B from 4 partitions (one long
  transaction) vs a loop putting one row per message, 1,000 rows per batch;
- batch read: ``spark.read.format("tms")`` summing the payload lengths, of the topic written in bulk
  (one pointer row) and of a topic published in batches of 100 (inline rows), vs a scan of TOTAL rows
  that decodes each into the values a row of the DataFrame holds (key, time, payload, position, index);
- fixed cost: the same write and read of 100 messages, in seconds (what every Spark job pays);
- stream throughput: a running query ``readStream`` A → ``writeStream`` B (transactional sink); A is then
  filled with STREAMED messages in batches of 100; time from the first publish until the last one is
  readable in B; vs a copy loop (scan A from the last row seen, batch-put into B);
- stream latency: one message every 1/RATE s into A; a reader tailing B; publish → readable in B.

A small untimed batch round first starts Spark's Python workers, as a long-running job has them.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable

from tms_hbase import MessagingClient, TopicId

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
    ratio,
    raw_key,
    raw_put_batch,
    send_time_of,
    stamped,
)
from .txlatency import start_tx_server

PAYLOAD = 100  # bytes per message
RATE = 100.0  # messages/s in the latency trial
POLL_SLEEP = 0.005


def run(settings: Settings) -> Result:
    from pyspark.sql import SparkSession

    from tms_hbase.spark import register, use_current_python

    total = settings.pick(500_000, 50_000)  # full: a size one would use Spark for, where fixed costs fade
    streamed = settings.pick(50_000, 20_000)
    trickle = settings.pick(10.0, 5.0)  # seconds of the latency trial
    result = Result(
        "spark",
        f"Spark data source 'tms' (local[2]; {total:,} messages of {PAYLOAD} B for batch, {streamed:,} streamed) "
        "vs happybase loops",
    )
    use_current_python()  # local mode: the workers run this interpreter, which has tms-hbase
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tms-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    s: dict[str, list[float]] = {
        k: []
        for k in (
            "write",
            "loop_write",
            "read_bulk",
            "read_inline",
            "loop_read",
            "tiny_write",
            "tiny_read",
            "stream",
            "loop_stream",
            "stream_p50",
            "stream_p99",
            "loop_p50",
            "loop_p99",
        )
    }
    result.samples = s
    try:
        with bench_tables(settings, "spk") as (client, raw, raw_name):
            proc, tx_address = start_tx_server(settings, client.installation.prefix)
            options = {"thrift": settings.address, "prefix": client.installation.prefix, "txServer": tx_address}
            try:
                # Untimed: the first job of a session starts Spark's Python workers and loads the classes.
                _batch_round(spark, client, raw, f"{raw_name}w", options, "w", 2000, {k: [] for k in s})
                for r in range(settings.rounds):
                    _batch_round(spark, client, raw, f"{raw_name}{r}", options, r, total, s)
                    _stream_round(spark, client, raw, f"{raw_name}s{r}", options, r, streamed, trickle, s)
                    progress(
                        f"spark round {r + 1}/{settings.rounds}: write {s['write'][-1]:,.0f} msg/s (loop "
                        f"{s['loop_write'][-1]:,.0f}), read {s['read_bulk'][-1]:,.0f}/{s['read_inline'][-1]:,.0f} "
                        f"(loop {s['loop_read'][-1]:,.0f}), stream {s['stream'][-1]:,.0f} msg/s (loop "
                        f"{s['loop_stream'][-1]:,.0f}), p99 {s['stream_p99'][-1]:.0f} ms (loop "
                        f"{s['loop_p99'][-1]:.0f} ms)"
                    )
            finally:
                proc.terminate()
                proc.wait(timeout=60)
    finally:
        spark.stop()
        _report(result, s)
    return result


def _report(result: Result, s: dict[str, list[float]]) -> None:
    m = {k: median(v) for k, v in s.items()}
    pairs = [
        ("batch write (one transaction)", "write", "loop_write"),
        ("batch read, bulk-written topic", "read_bulk", "loop_read"),
        ("batch read, topic of 100-message publishes", "read_inline", "loop_read"),
        ("stream A → B, end to end", "stream", "loop_stream"),
    ]
    # Both sides of a round run within the same minute: on a shared machine the ratio of each round is
    # steadier than the ratio of the medians, whose rounds saw different loads.
    by_round = {key: median([ratio(a, b) for a, b in zip(s[key], s[loop], strict=False)]) for _, key, loop in pairs}
    result.table(
        ["", "Spark, msg/s (median)", "happybase loop, msg/s", "Spark ÷ loop", "Spark ÷ loop, median of rounds"],
        [[name, m[key], m[loop], ratio(m[key], m[loop]), by_round[key]] for name, key, loop in pairs],
    )
    result.table(
        ["fixed cost of a Spark job (100 messages)", "seconds (median)"],
        [["batch write", m["tiny_write"]], ["batch read, summing the payload lengths", m["tiny_read"]]],
    )
    result.table(
        ["stream A → B at 100 msg/s", "p50 ms", "p99 ms"],
        [
            ["Spark query (micro-batches as fast as they come)", m["stream_p50"], m["stream_p99"]],
            ["happybase copy loop", m["loop_p50"], m["loop_p99"]],
        ],
    )
    for name, key in (("batch read", "read_bulk"), ("batch write", "write")):
        result.goal(
            f"Spark {name} ≥ 1.0× a happybase loop (median of the rounds' ratios)",
            f"{by_round[key]:.2f}×",
            by_round[key] >= 1.0,
        )


def _timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def _batch_round(spark, client: MessagingClient, raw: RawConnection, raw_name: str, options, r, total, s) -> None:
    bulk = new_topic(client, f"spk{r}")
    df = spark.range(0, total, numPartitions=4).selectExpr(
        f"CAST(lpad(CAST(id AS STRING), {PAYLOAD}, '0') AS BINARY) AS payload"
    )
    s["write"].append(
        total / _timed(lambda: df.write.format("tms").options(**options, topic=str(bulk)).mode("append").save())
    )
    inline = new_topic(client, f"spkin{r}")
    for first in range(0, total, 100):
        client.publish(inline, [b"%0100d" % i for i in range(first, min(first + 100, total))])

    def spark_sum(topic: TopicId) -> None:
        # partitions: the default, Spark's default parallelism (the 2 task slots of local[2])
        read = spark.read.format("tms").options(**options, topic=str(topic)).load()
        assert read.selectExpr("sum(length(payload)) AS n").collect()[0].n == total * PAYLOAD

    s["read_bulk"].append(total / _timed(lambda: spark_sum(bulk)))
    s["read_inline"].append(total / _timed(lambda: spark_sum(inline)))
    tiny = new_topic(client, f"spkt{r}")
    few = df.limit(100)
    s["tiny_write"].append(
        _timed(lambda: few.write.format("tms").options(**options, topic=str(tiny)).mode("append").save())
    )
    s["tiny_read"].append(
        _timed(
            lambda: (
                spark.read.format("tms")
                .options(**options, topic=str(tiny))
                .load()
                .selectExpr("sum(length(payload))")
                .collect()
            )
        )
    )

    table = create_raw_table(raw, raw_name)

    def loop_write() -> None:
        for first in range(0, total, 1000):
            raw_put_batch(table, b"m", first, [b"%0100d" % i for i in range(first, min(first + 1000, total))])

    def loop_read() -> None:  # the values of a DataFrame row, as Python values: key, time, payload, position, index
        values = []
        for key, cells in table.scan(batch_size=1000, include_timestamp=True):
            payload, millis = cells[RAW_COLUMN]
            values.append((key, millis, payload, int.from_bytes(key[-8:], "big"), 0))
        assert sum(len(v[2]) for v in values) == total * PAYLOAD

    s["loop_write"].append(total / _timed(loop_write))
    s["loop_read"].append(total / _timed(loop_read))
    raw.conn.delete_table(raw_name, disable=True)


class _Tail(threading.Thread):
    """Reads everything that appears in B (a topic, or a raw table) and records when each stamped
    message became readable."""

    def __init__(self, poll: Callable[[], list[bytes]]) -> None:
        super().__init__(daemon=True)
        self.poll, self.seen, self.latencies, self.stop = poll, 0, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            got = self.poll()
            now = time.time()
            self.seen += len(got)
            # (only the trickle's payloads are stamped; what is recorded before it is cleared)
            self.latencies += [(now - send_time_of(p)) * 1000 for p in got if len(p) >= 8]
            if not got:
                time.sleep(POLL_SLEEP)

    def wait_for(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.seen < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self.seen} of {count} messages arrived in {timeout:.0f} s")
            time.sleep(0.01)


def _trials(
    publish: Callable[[list[bytes]], None], tail: _Tail, streamed: int, trickle: float
) -> tuple[float, list[float]]:
    """Warm up with one message, then a burst of ``streamed`` (throughput), then a trickle (latency)."""
    publish([b"warm-up"])
    tail.wait_for(1, 300)
    started = time.monotonic()
    for first in range(0, streamed, 100):
        publish([b"%0100d" % i for i in range(first, min(first + 100, streamed))])
    tail.wait_for(1 + streamed, 600)
    throughput = streamed / (time.monotonic() - started)
    tail.latencies.clear()
    sent, begin = 0, time.time()
    while time.time() - begin < trickle:
        publish([stamped(time.time(), PAYLOAD)])
        sent += 1
        time.sleep(max(0.0, begin + sent / RATE - time.time()))
    tail.wait_for(1 + streamed + sent, 300)
    return throughput, list(tail.latencies)


def _stream_round(spark, client, raw, raw_name, options, r, streamed, trickle, s) -> None:
    a, b = new_topic(client, f"spka{r}"), new_topic(client, f"spkb{r}")
    checkpoint = tempfile.mkdtemp(prefix="tms-bench-spark-")
    query = (
        spark.readStream.format("tms")
        .options(**options, topic=str(a), partitions="2")
        .load()
        .select("payload")
        .writeStream.format("tms")
        .options(**options, topic=str(b))
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )
    last: list[bytes | None] = [None]

    def poll_b() -> list[bytes]:
        got = list(client.fetch(b, start_message=last[0], inclusive=last[0] is None, limit=5000))
        if got:
            last[0] = got[-1].id
        return [m.payload for m in got]

    tail = _Tail(poll_b)
    tail.start()
    try:
        throughput, latencies = _trials(lambda batch: client.publish(a, batch), tail, streamed, trickle)
    finally:
        tail.stop.set()
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    s["stream"].append(throughput)
    s["stream_p50"].append(percentile(latencies, 50))
    s["stream_p99"].append(percentile(latencies, 99))

    source = create_raw_table(raw, raw_name + "a")
    create_raw_table(raw, raw_name + "b")
    copier = _Copier(raw.settings, raw_name + "a", raw_name + "b")
    reader = RawConnection(raw.settings)
    seen = [0]

    def poll_raw_b() -> list[bytes]:
        rows = list(reader.table(raw_name + "b").scan(row_start=raw_key(b"m", seen[0]), limit=5000, batch_size=1000))
        seen[0] += len(rows)
        return [v[RAW_COLUMN] for _, v in rows]

    sent = [0]

    def raw_publish(batch: list[bytes]) -> None:
        raw_put_batch(source, b"m", sent[0], batch)
        sent[0] += len(batch)

    copier.start()
    raw_tail = _Tail(poll_raw_b)
    raw_tail.start()
    try:
        throughput, latencies = _trials(raw_publish, raw_tail, streamed, trickle)
    finally:
        raw_tail.stop.set()
        copier.stop.set()
        copier.join()
        raw_tail.join()
        reader.close()
    s["loop_stream"].append(throughput)
    s["loop_p50"].append(percentile(latencies, 50))
    s["loop_p99"].append(percentile(latencies, 99))
    for name in (raw_name + "a", raw_name + "b"):
        raw.conn.delete_table(name, disable=True)


class _Copier(threading.Thread):
    """The happybase counterpart of the stream: scan A from the row after the last one copied, put into B."""

    def __init__(self, settings: Settings, source: str, sink: str) -> None:
        super().__init__(daemon=True)
        self.settings, self.source, self.sink, self.stop = settings, source, sink, threading.Event()

    def run(self) -> None:
        conn = RawConnection(self.settings)
        copied = 0
        try:
            while not self.stop.is_set():
                rows = list(conn.table(self.source).scan(row_start=raw_key(b"m", copied), limit=5000, batch_size=1000))
                if rows:
                    raw_put_batch(conn.table(self.sink), b"m", copied, [v[RAW_COLUMN] for _, v in rows])
                    copied += len(rows)
                else:
                    time.sleep(POLL_SLEEP)
        finally:
            conn.close()
