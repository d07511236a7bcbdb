"""Prometheus metrics of the sweeper (served by ``tms-sweeper run --metrics-port``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server


class SweeperMetrics:
    """Counters and gauges of one sweeper process, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.rows_scanned = Counter("tms_sweeper_rows_scanned", "Rows read", ["table"], registry=self.registry)
        self.rows_dropped = Counter("tms_sweeper_rows_dropped", "Rows deleted", ["table"], registry=self.registry)
        self.rows_rewritten = Counter(
            "tms_sweeper_rows_rewritten",
            "Message cells rewritten (invalid mark, stripped tail)",
            ["kind"],
            registry=self.registry,
        )
        self.future_dated = Counter(
            "tms_sweeper_rows_future_dated",
            "Message rows dated further ahead of their HBase cell timestamp than any correct writer writes",
            registry=self.registry,
        )
        self.corrupt_rows = Counter(
            "tms_sweeper_corrupt_rows",
            "Rows that do not decode, left in place and reported (counted once per sweep that meets them)",
            ["table"],
            registry=self.registry,
        )
        self.regions = Counter(
            "tms_sweeper_regions", "Regions finished or skipped", ["outcome"], registry=self.registry
        )
        self.region_lag = Gauge(
            "tms_sweeper_region_lag_seconds",
            "Seconds since a region's last complete sweep",
            ["region"],
            registry=self.registry,
        )
        self.snapshot_age = Gauge(
            "tms_sweeper_tx_snapshot_age_seconds",
            "Age of the transaction snapshot the sweep used",
            registry=self.registry,
        )
        self.last_sweep = Gauge(
            "tms_sweeper_last_sweep_timestamp_seconds", "When the last sweep ended", registry=self.registry
        )

    def serve(self, port: int, address: str = "127.0.0.1") -> None:
        start_http_server(port, addr=address, registry=self.registry)
