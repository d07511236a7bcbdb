"""A distributed sweep: the regions of the message and payload tables as Spark tasks, for tables too big
for one sweeper process. Each region is still swept under its lease, so this runs safely next to
``tms-sweeper`` daemons. The executors need tms-hbase (which has this package) installed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from tms_hbase import MessagingClient
from tms_hbase.spark import check_workers

from .sweep import Sweeper, SweepReport


def _sweep_partition(
    thrift: str | None, prefix: str | None, options: dict[str, Any], regions: Iterable
) -> Iterator[dict]:
    with MessagingClient(thrift, prefix, create_tables=False) as client:
        yield Sweeper(client.installation, **options).sweep_regions(list(regions)).as_dict()


def sweep(
    spark: Any, *, thrift: str | None = None, prefix: str | None = None, partitions: int | None = None, **options: Any
) -> dict:
    """One sweep of the tables of ``prefix`` at ``thrift`` (defaults: ``$TMS_HBASE_THRIFT``,
    ``$TMS_TABLE_PREFIX``, evaluated on each executor) with the regions as Spark tasks.

    ``options`` are the Sweeper's (``grace_seconds``, ``dry_run``, ``max_rows_per_second``, ...).
    Returns the tasks' reports added up, as :meth:`SweepReport.as_dict` gives them.
    """
    check_workers(spark)
    with MessagingClient(thrift, prefix, create_tables=False) as client:
        regions = Sweeper(client.installation).regions()
    slices = max(1, min(len(regions), partitions or spark.sparkContext.defaultParallelism))
    reports = (
        spark.sparkContext.parallelize(regions, slices)
        .mapPartitions(lambda rs: _sweep_partition(thrift, prefix, options, rs))
        .collect()
    )
    return _add_up(reports, dry_run=bool(options.get("dry_run"))).as_dict()


def _add_up(reports: list[dict], *, dry_run: bool) -> SweepReport:
    total = SweepReport(dry_run=dry_run)
    for report in reports:
        for key, value in report.items():
            if isinstance(value, bool):
                setattr(total, key, getattr(total, key) or value)
            elif key == "invalid_transactions":
                total.invalid_transactions = max(total.invalid_transactions, value)
            elif value is None or isinstance(value, str) or key == "tx_snapshot_age_seconds":
                if value not in (None, ""):  # where the transaction state came from, and its age
                    setattr(total, key, value)
            else:
                setattr(total, key, getattr(total, key) + value)
    return total
