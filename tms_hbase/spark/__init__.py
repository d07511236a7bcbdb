"""Spark through PySpark 4: topics as a data source, ``format("tms")``, for batch and streaming reads and
writes (docs/spark.md).

    from tms_hbase.spark import register, use_current_python
    use_current_python()            # local mode: Spark's Python workers run this interpreter
    spark = SparkSession.builder.getOrCreate()
    register(spark)
    df = spark.read.format("tms").option("topic", "ns:events").load()
"""

from tms_hbase.spark.source import TmsDataSource, register
from tms_hbase.spark.workers import check_workers, use_current_python

__all__ = ["TmsDataSource", "check_workers", "register", "use_current_python"]
