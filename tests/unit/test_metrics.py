"""The publish metrics' collector gives exactly the series prometheus_client's own counters and histogram give."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client import metrics as prometheus_metrics

from tms_hbase.model.metrics import (
    LATENCY_BUCKETS,
    PUBLISH_SECONDS,
    PUBLISHED_BYTES,
    PUBLISHED_MESSAGES,
    PUBLISHES,
    PublishCounts,
)

# topic, messages, bytes, seconds: on bucket bounds, between them, past the last one
PUBLISHED = [
    ("ns:a", 1, 1024, 0.0003),
    ("ns:b", 100, 102_400, 0.0005),
    ("ns:a", 3, 5, 0.004),
    ("ns:a", 1, 1, 12.0),
    ("ns:b", 0, 0, 0.001),
    ("ns:c", 7, 70, 10.0),
]
_CREATED = re.compile(rb"^(\S+_created(?:\{[^}]*\})?) \S+$", re.M)


def _exposition(registry: CollectorRegistry) -> bytes:
    """The registry's text with the creation times (which differ by when each was made) blanked."""
    return _CREATED.sub(rb"\1 T", generate_latest(registry))


def _theirs() -> tuple[CollectorRegistry, list[Counter], Histogram]:
    registry = CollectorRegistry()
    counters = [
        Counter(n, d, ["topic"], registry=registry) for n, d in (PUBLISHES, PUBLISHED_MESSAGES, PUBLISHED_BYTES)
    ]
    return registry, counters, Histogram(*PUBLISH_SECONDS, buckets=LATENCY_BUCKETS, registry=registry)


@pytest.mark.parametrize("created", [True, False])
def test_publish_counts_expose_what_prometheus_clients_metrics_would(created: bool) -> None:
    was = prometheus_metrics._use_created  # (the gateway's module turns them off when it is imported)
    (prometheus_metrics.enable_created_metrics if created else prometheus_metrics.disable_created_metrics)()
    try:
        ours = CollectorRegistry()
        counts = PublishCounts()
        ours.register(counts)
        theirs, counters, histogram = _theirs()
        assert _exposition(ours) == _exposition(theirs)  # nothing published yet: the histogram's zeros
        for topic, messages, size, seconds in PUBLISHED:
            counts.published(topic, messages, size, seconds)
            for counter, amount in zip(counters, (1, messages, size), strict=True):
                counter.labels(topic).inc(amount)
            histogram.observe(seconds)
        text = _exposition(ours)
        assert text == _exposition(theirs)
        assert b'tms_client_published_messages_total{topic="ns:b"} 100.0' in text
        assert b'tms_client_publish_seconds_bucket{le="0.0005"} 2.0' in text
        assert (b"_created" in text) == created
    finally:
        (prometheus_metrics.enable_created_metrics if was else prometheus_metrics.disable_created_metrics)()


def test_publishes_put_together_in_one_write_count_as_that_many_publishes_of_its_duration() -> None:
    ours = CollectorRegistry()
    counts = PublishCounts()
    ours.register(counts)
    theirs, counters, histogram = _theirs()
    counts.published("ns:a", 5, 500, 0.003, 3)  # three publishes (5 messages, 500 bytes) in one write
    for counter, amount in zip(counters, (3, 5, 500), strict=True):
        counter.labels("ns:a").inc(amount)
    for _ in range(3):
        histogram.observe(0.003)
    assert _exposition(ours) == _exposition(theirs)


def test_in_prometheus_clients_multiprocess_mode_publishes_are_counted_in_its_files(tmp_path) -> None:
    """A gateway's workers (multiprocess mode) report the library's publish metrics through the files."""
    script = """
import json
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from tms_hbase.model.metrics import CLIENT_METRICS
CLIENT_METRICS.published("ns:a", 3, 30, 0.002)
CLIENT_METRICS.published("ns:a", 1, 10, 0.02)
CLIENT_METRICS.published("ns:a", 2, 20, 0.002, 2)
registry = CollectorRegistry()
MultiProcessCollector(registry)
print(json.dumps([
    registry.get_sample_value("tms_client_publishes_total", {"topic": "ns:a"}),
    registry.get_sample_value("tms_client_published_messages_total", {"topic": "ns:a"}),
    registry.get_sample_value("tms_client_published_bytes_total", {"topic": "ns:a"}),
    registry.get_sample_value("tms_client_publish_seconds_bucket", {"le": "0.0025"}),
    registry.get_sample_value("tms_client_publish_seconds_count"),
]))
"""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == [4.0, 6.0, 60.0, 3.0, 4.0]
