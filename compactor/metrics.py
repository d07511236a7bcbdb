"""Prometheus metrics and the health endpoint of the sweeper (``tms-sweeper run --metrics-port``).

One HTTP server answers ``/health`` (:class:`Health`: is the sweep loop alive and did a sweep complete
lately) and every other path with the metrics, so a container is probed and scraped on one port.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    make_wsgi_app,
)

disable_created_metrics()  # no <counter>_created series: a scrape shows what is counted, not since when

# Sweeps take from well under a second (a small installation) to hours (billions of rows).
SWEEP_SECONDS_BUCKETS = (0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800, 3600, 3 * 3600, 12 * 3600, float("inf"))

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class SweeperMetrics:
    """Counters, gauges and a histogram of one sweeper process, in a registry of its own.

    In a dry run nothing is deleted or rewritten, so what would have been counts under names of its own
    (``tms_sweeper_dry_run_rows_dropped_total``, ``tms_sweeper_dry_run_rows_rewritten_total``) and the real
    ``tms_sweeper_rows_dropped_total`` and ``tms_sweeper_rows_rewritten_total`` are not exported at all.
    """

    def __init__(self, dry_run: bool = False) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        changes = "tms_sweeper_dry_run_" if dry_run else "tms_sweeper_"
        would = "Would have been: " if dry_run else ""
        self.rows_scanned = Counter("tms_sweeper_rows_scanned", "Rows read", ["table"], registry=self.registry)
        self.rows_dropped = Counter(f"{changes}rows_dropped", f"{would}Rows deleted", ["table"], registry=self.registry)
        self.rows_rewritten = Counter(
            f"{changes}rows_rewritten",
            f"{would}Message cells rewritten (invalid mark, stripped tail)",
            ["kind"],
            registry=self.registry,
        )
        self.future_dated = Counter(
            "tms_sweeper_rows_future_dated",
            "Message rows dated further ahead of their HBase cell timestamp than any correct writer writes",
            registry=self.registry,
        )
        self.skips_indexed = Counter(
            f"{changes}skip_markers_indexed",
            f"{would}Skip markers found missing from their skip index (counted as messages until then), indexed",
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
        self.errors = Counter(
            "tms_sweeper_errors",
            "Sweeps that failed and will be tried again, by error class (e.g. HBaseUnavailable)",
            ["kind"],
            registry=self.registry,
        )
        self.sweep_duration = Histogram(
            "tms_sweeper_sweep_duration_seconds",
            "How long the sweeps that completed took",
            buckets=SWEEP_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.region_lag = Gauge(
            "tms_sweeper_region_lag_seconds",
            "Seconds since a region's last complete sweep (one series per region that exists now)",
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
        self._regions_seen: set[str] = set()

    def set_region_lags(self, lags: dict[str, float]) -> None:
        """The lag of each region that exists now; the series of regions gone (split or merged) are removed."""
        for label, seconds in lags.items():
            self.region_lag.labels(label).set(seconds)
        for gone in self._regions_seen - lags.keys():
            self.region_lag.remove(gone)
        self._regions_seen = set(lags)

    def serve(self, host: str, port: int, health: Health) -> WSGIServer:
        """Serve ``/health`` and the metrics on ``host:port`` from a daemon thread; OSError if it cannot bind."""
        metrics_app = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
            if environ.get("PATH_INFO") == "/health":
                code, body = health.check()
                reason = "OK" if code == 200 else "Service Unavailable"
                start_response(f"{code} {reason}", [("Content-Type", "application/json")])
                return [json.dumps(body, sort_keys=True).encode() + b"\n"]
            return metrics_app(environ, start_response)

        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        server_class = type("_MetricsServer", (_ThreadingServer,), {"address_family": family})
        server: WSGIServer = make_server(host, port, app, server_class, handler_class=_QuietHandler)
        threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
        return server


class Health:
    """Whether the sweep loop is alive and its last complete sweep ended at most ``max_age`` seconds ago.

    Before the first sweep completes, the time since the loop started counts instead. A failed sweep
    does not count as an ended one: a sweeper that cannot reach HBase turns unhealthy once the bound
    has passed, as does one stuck in a call, or one whose loop has ended.
    """

    def __init__(self, max_age: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age = max_age
        self._clock = clock
        self._alive = False
        self._since = clock()
        self._last_sweep: float | None = None

    def loop_started(self) -> None:
        self._alive, self._since = True, self._clock()

    def sweep_ended(self) -> None:
        self._last_sweep = self._clock()

    def loop_ended(self) -> None:
        self._alive = False

    def check(self) -> tuple[int, dict[str, Any]]:
        """The HTTP status (200 healthy, 503 not) and a JSON body saying why."""
        age = self._clock() - (self._last_sweep if self._last_sweep is not None else self._since)
        body: dict[str, Any] = {
            "loop_alive": self._alive,
            "seconds_since_last_sweep": None if self._last_sweep is None else round(age, 3),
            "max_age_seconds": self.max_age,
        }
        if not self._alive:
            return 503, {"status": "stopped", **body}
        if age > self.max_age:
            return 503, {"status": "stale", **body}
        return 200, {"status": "ok", **body}


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a hung scraper never keeps the process from exiting


class _QuietHandler(WSGIRequestHandler):
    """No line on stderr per scrape (wsgiref's default)."""

    def log_message(self, format: str, *args: Any) -> None:
        logging.getLogger(__name__).debug(format, *args)
