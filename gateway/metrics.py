"""Prometheus metrics of the gateway: requests, latency, bytes and errors, summed over all workers.

``tms-gateway`` points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory before its workers start,
so prometheus_client keeps every worker's values in files there and ``GET /metrics`` on any worker
reports the sum over all of them. Without that variable (e.g. the app run by plain ``uvicorn``), a
scrape sees the worker that answered it only.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

disable_created_metrics()  # no <counter>_created series: a scrape shows what is counted, not since when

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The gateway's metric families (one instance per worker). The labelled series a request touches are
    looked up once per label values and kept (``labels()`` takes a lock and builds a key every time); the
    label values are few (route templates, statuses, methods), so the cache stays small."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        if not os.environ.get(MULTIPROC_ENV):  # one worker: its process; with several, per-worker files only
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
        self.requests = Counter(
            "tms_gateway_requests", "HTTP requests answered", ["method", "route", "status"], registry=r
        )
        self.latency = Histogram(
            "tms_gateway_request_seconds",
            "Time from the request's arrival to the end of the response",
            ["method", "route"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.bytes_in = Counter("tms_gateway_request_bytes", "Request body bytes received", ["route"], registry=r)
        self.bytes_out = Counter("tms_gateway_response_bytes", "Response body bytes sent", ["route"], registry=r)
        self.errors = Counter(
            "tms_gateway_errors", "Error responses, by status and error class", ["route", "status", "error"], registry=r
        )
        self.messages = Counter(
            "tms_gateway_messages", "Messages stored, published, returned by polls or consumed", ["action"], registry=r
        )
        # gauges summed over the live workers
        self.long_polls = Gauge(
            "tms_gateway_long_polls",
            "Long-polls waiting now (or queued for a long-poll slot)",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.consumer_sessions = Gauge(
            "tms_gateway_consumer_sessions",
            "Consumer sessions kept open between their calls",
            registry=r,
            multiprocess_mode="livesum",
        )
        self._series: dict[tuple[str, ...], tuple[Any, ...]] = {}

    def request(
        self, method: str, route: str, status: int, seconds: float, bytes_in: int, bytes_out: int, error: str
    ) -> None:
        key = (method, route, str(status))
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = (
                self.requests.labels(*key),
                self.latency.labels(method, route),
                self.bytes_in.labels(route),
                self.bytes_out.labels(route),
            )
        requests, latency, received, sent = series
        requests.inc()
        latency.observe(seconds)
        received.inc(bytes_in)
        sent.inc(bytes_out)
        if status >= 400:
            self.errors.labels(route, key[2], error).inc()

    def counted(self, action: str, messages: int) -> None:
        """``messages`` more stored, published, polled or consumed (``action``)."""
        key = ("messages", action)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = (self.messages.labels(action),)
        series[0].inc(messages)

    def render(self) -> tuple[bytes, str]:
        """The exposition text (every worker's values when in multiprocess mode) and its content type."""
        if os.environ.get(MULTIPROC_ENV):
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
