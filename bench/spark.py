"""Spark bulk publish and read (issue #6), next to a plain happybase loop over the same rows: the loop
writes one row per message in batches of 1,000 and scans them back."""

from __future__ import annotations

import time

from tms_hbase.tx.client import TransactionClient

from .common import Result, Settings, bench_tables, create_raw_table, median, new_topic, progress, ratio
from .txlatency import start_tx_server

PAYLOAD = 100  # bytes per message


def run(settings: Settings) -> Result:
    from pyspark.sql import SparkSession

    from tms_hbase.spark import Where, publish, read, use_current_python

    total = settings.pick(200_000, 50_000)
    result = Result(
        "spark",
        f"Spark bulk publish and read ({total:,} messages of {PAYLOAD} B, local[2], 4 partitions) vs a happybase loop",
    )
    use_current_python()  # local mode: the workers run this interpreter, which has tms-hbase
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tms-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    pub, loop_pub, rd, loop_rd = [], [], [], []
    try:
        with bench_tables(settings, "spk") as (client, raw, raw_name):
            proc, tx_address = start_tx_server(settings, client.installation.prefix)
            where = Where(settings.address, client.installation.prefix)
            try:
                with TransactionClient(tx_address) as tx:
                    for r in range(settings.rounds):
                        topic = new_topic(client, f"spk{r}")
                        rdd = spark.sparkContext.range(0, total, numSlices=4).map(lambda i: b"%0100d" % i)
                        started = time.monotonic()
                        publish(rdd, topic, tx, where=where, batch=5000)
                        pub.append(total / (time.monotonic() - started))
                        started = time.monotonic()
                        assert read(spark, topic, where=where, partitions=4).count() == total
                        rd.append(total / (time.monotonic() - started))

                        table = create_raw_table(raw, f"{raw_name}{r}")
                        started = time.monotonic()
                        for first in range(0, total, 1000):
                            with table.batch() as b:
                                for i in range(first, min(first + 1000, total)):
                                    b.put(i.to_bytes(8, "big"), {b"d:m": b"%0100d" % i})
                        loop_pub.append(total / (time.monotonic() - started))
                        started = time.monotonic()
                        assert sum(1 for _ in table.scan(batch_size=1000)) == total
                        loop_rd.append(total / (time.monotonic() - started))
                        raw.conn.delete_table(f"{raw_name}{r}", disable=True)
                        progress(
                            f"spark round {r + 1}/{settings.rounds}: publish {pub[-1]:,.0f} msg/s (loop "
                            f"{loop_pub[-1]:,.0f}), read {rd[-1]:,.0f} msg/s (loop {loop_rd[-1]:,.0f})"
                        )
            finally:
                proc.terminate()
                proc.wait(timeout=60)
    finally:
        spark.stop()
    result.table(
        ["", "Spark, msg/s (median)", "happybase loop, msg/s", "Spark ÷ loop"],
        [
            [
                "bulk transactional publish (one long transaction)",
                median(pub),
                median(loop_pub),
                ratio(median(pub), median(loop_pub)),
            ],
            ["read as a DataFrame (count)", median(rd), median(loop_rd), ratio(median(rd), median(loop_rd))],
        ],
    )
    result.samples = {"publish": pub, "loop_publish": loop_pub, "read": rd, "loop_read": loop_rd}
    return result
