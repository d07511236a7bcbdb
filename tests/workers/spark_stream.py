"""A Spark driver for the streaming crash test: topic SOURCE -> upper-cased payloads -> topic SINK.

Usage: python -m tests.workers.spark_stream SOURCE SINK CHECKPOINT TX_SERVER MAX_PER_TRIGGER MODE
MODE ``run``: micro-batches as fast as data comes, until the process is killed; ``drain``:
Trigger.AvailableNow, i.e. everything published so far, then exit 0. HBase comes from
$TMS_HBASE_THRIFT and $TMS_TABLE_PREFIX.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, upper

from tms_hbase.spark import register, use_current_python


def main() -> None:
    source, sink, checkpoint, tx_server, most, mode = sys.argv[1:7]
    use_current_python()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tms-stream-worker")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    stream = (
        spark.readStream.format("tms")
        .option("topic", source)
        .option("maxMessagesPerTrigger", most)
        .option("partitions", "2")
        .load()
    )
    upper_cased = stream.select(upper(col("payload").cast("string")).alias("payload"))
    writer = (
        upper_cased.writeStream.format("tms")
        .option("topic", sink)
        .option("txServer", tx_server)
        .option("checkpointLocation", checkpoint)
    )
    writer = writer.trigger(availableNow=True) if mode == "drain" else writer.trigger(processingTime="0 seconds")
    writer.start().awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
