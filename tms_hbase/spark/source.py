"""The ``tms`` data source: what Spark instantiates for ``format("tms")``, on the driver and the executors."""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from tms_hbase.spark.columns import SCHEMA
from tms_hbase.spark.options import Options
from tms_hbase.spark.reader import BatchReader, StreamReader, check_schema
from tms_hbase.spark.workers import check_workers
from tms_hbase.spark.writer import BatchWriter, StreamWriter


class TmsDataSource(DataSource):
    """Topics of tms-hbase as a Spark data source: batch and streaming reads and writes (docs/spark.md)."""

    default_partitions = os.cpu_count() or 2
    """Read partitions when the ``partitions`` option is not given; :func:`register` sets Spark's default
    parallelism."""

    @classmethod
    def name(cls) -> str:
        return "tms"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        check_schema(schema)
        return BatchReader(Options.parse(self.options), self.default_partitions)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        check_schema(schema)
        return StreamReader(Options.parse(self.options), self.default_partitions)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return BatchWriter.create(Options.parse(self.options).for_write(), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StreamWriter.create(Options.parse(self.options).for_write(), schema, overwrite)


def register(spark: Any) -> type[TmsDataSource]:
    """Register format ``"tms"`` with a SparkSession (read partitions default to its parallelism).

    In local mode, first checks that Spark's Python workers can import tms-hbase (see
    :func:`use_current_python`). Returns the registered class.
    """
    check_workers(spark)
    # A subclass made here is pickled by value, so the default travels to every worker with it.
    source = type(
        "TmsDataSource",
        (TmsDataSource,),
        {"default_partitions": spark.sparkContext.defaultParallelism, "__module__": __name__},
    )
    spark.dataSource.register(source)
    return source
