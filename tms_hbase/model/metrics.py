"""What the library counts about itself, as Prometheus metrics in prometheus_client's default registry.

An application that already serves ``prometheus_client``'s registry (``start_http_server``, a WSGI
app) gets these with no more code. Each update is an in-memory increment or a histogram observation
(about a microsecond), next to HBase calls that take a millisecond or more. Without
``prometheus_client`` installed every metric is a no-op.

The metrics are made, and ``prometheus_client`` imported, when the process first updates one of them
(:data:`CLIENT_METRICS`): importing ``prometheus_client`` takes tens of milliseconds (its exposition
code loads the HTTP server and e-mail modules), which a command that only reads a topic list should not
pay at every start.

Per-topic depth and per-subscription lag are not counted here: they are read from HBase by the
exporter (:mod:`tms_hbase.ops.exporter`), which any process can run.
"""

from __future__ import annotations

import contextlib
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any, cast

# Latency buckets (seconds) from 0.5 ms to 10 s: HBase calls on loopback take about a millisecond.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _Noop:
    """Stands in for a metric when prometheus_client is not installed."""

    def labels(self, *_args: object) -> _Noop:
        return self

    def inc(self, _amount: float = 1) -> None:
        pass

    def observe(self, _value: float) -> None:
        pass

    def set(self, _value: float) -> None:
        pass

    def time(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


class ClientMetrics:
    """The library's counters and histograms (one set per process, shared by every client)."""

    def __init__(self) -> None:
        try:
            from prometheus_client import REGISTRY, Counter, Gauge, Histogram
            from prometheus_client.values import MutexValue, ValueClass
        except ImportError:  # pragma: no cover - prometheus_client is a dependency; this keeps it optional
            Counter = Gauge = Histogram = None  # type: ignore[assignment,misc]
        self.published: Callable[[str, int, int, float, int], None]
        """Count successful publishes to a topic: their messages, payload bytes, duration (seconds) and how
        many publishes they were (several put together in one write share its duration)."""
        if Counter is None:  # pragma: no cover
            self.published = lambda _topic, _messages, _size, _seconds, _calls: None
        elif ValueClass is MutexValue:
            counts = PublishCounts()
            REGISTRY.register(counts)
            self.published = counts.published
        else:  # prometheus_client's multiprocess mode keeps values in files, which only its own metrics write
            self.published = _PublishMetrics(Counter, Histogram).published
        self.races_lost = _metric(
            Counter, "tms_client_publish_races_lost", "Appends that found their position taken by another writer"
        )
        self.retries = _metric(Counter, "tms_client_hbase_retries", "HBase calls retried after a broken connection")
        self.fetch_seconds = _metric(
            Histogram, "tms_client_fetch_seconds", "Duration of each read of message rows", buckets=LATENCY_BUCKETS
        )
        self.consumed_messages = _metric(
            Counter, "tms_client_consumed_messages", "Messages delivered by consumers", ["topic", "subscription"]
        )
        self.commits = _metric(
            Counter, "tms_client_commits", "Consume marks committed (transactional ones at persist)", ["topic"]
        )
        self.doorbell_rings = _metric(
            Counter, "tms_client_doorbell_rings", "Wake-up datagrams sent to consumers of other processes"
        )
        self.rung_rows = _metric(
            Counter,
            "tms_client_rung_rows",
            "Batch rows consumers delivered because a ring named them, by where the row came from: "
            "the ring's datagram, or a read",
            ["source"],
        )
        self.rings_refused = _metric(
            Counter,
            "tms_client_doorbell_rings_refused",
            "Rings that carried a row but failed their MAC check (taken as a plain wake-up)",
        )
        self.dead_letters_held = _metric(
            Counter,
            "tms_client_dead_letters_held",
            "Messages past max_deliveries held back because their dead-letter topic could not take them",
            ["topic", "subscription"],
        )
        self.holes_filled = _metric(
            Counter, "tms_client_holes_filled", "Skip markers a reader put into a sequencer generation's hole"
        )
        self.hole_wait = _metric(
            Histogram,
            "tms_client_hole_wait_seconds",
            "How long a reader was held by a hole, from first sighting to passing it",
            buckets=LATENCY_BUCKETS,
        )
        self.clock_offset = _metric(
            Gauge, "tms_client_clock_offset_seconds", "HBase's clock minus this host's clock, at the last probe"
        )
        self.clock_clamped = _metric(
            Counter,
            "tms_client_clock_clamped",
            "Publishes dated inside the band around HBase's clock because this host's clock was outside it",
        )


# The publish metrics: names and help texts (the counters are per topic)
PUBLISHES = ("tms_client_publishes", "Publish calls that succeeded")
PUBLISHED_MESSAGES = ("tms_client_published_messages", "Messages published (stored payloads excluded)")
PUBLISHED_BYTES = ("tms_client_published_bytes", "Payload bytes published")
PUBLISH_SECONDS = ("tms_client_publish_seconds", "Duration of publish calls")


class PublishCounts:
    """The publish metrics, counted as plain numbers with one turn of one lock per publish, and handed to
    prometheus_client as its collector (:meth:`collect`) when the registry is read: the same series, with
    the same names, types, labels and values, as three labelled counters and a histogram would give.

    Those would take four updates per publish, each a few Python calls and a lock (five increments, as
    the histogram adds to its sum and to its bucket). ``_created`` series follow prometheus_client's
    setting (``disable_created_metrics``), as its own metrics do.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._topics: dict[str, list[float]] = {}  # topic -> [publishes, messages, bytes, created (epoch s)]
        self._buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # publishes by the first bound they are within (+Inf last)
        self._sum = 0.0
        self._created = time.time()

    def published(self, topic: str, messages: int, size: int, seconds: float, calls: int = 1) -> None:
        """Count ``calls`` successful publishes to ``topic`` (several: put together in one write, which took
        ``seconds``): ``messages``, ``size`` payload bytes in all."""
        bucket = bisect_left(LATENCY_BUCKETS, seconds)  # the first bound >= seconds: Prometheus' le
        with self._lock:
            counts = self._topics.get(topic)
            if counts is None:
                counts = self._topics[topic] = [0, 0, 0, time.time()]
            counts[0] += calls
            counts[1] += messages
            counts[2] += size
            self._buckets[bucket] += calls
            self._sum += seconds * calls

    def describe(self) -> list[Any]:
        """The metric families without samples (what the registry checks names against)."""
        return list(self._families({}, [], 0.0))

    def collect(self) -> Iterator[Any]:
        """The metric families with their samples, as of now."""
        with self._lock:
            topics = {topic: list(counts) for topic, counts in self._topics.items()}
            buckets, total = list(self._buckets), self._sum
        return self._families(topics, buckets, total)

    def _families(self, topics: dict[str, list[float]], buckets: list[int], total: float) -> Iterator[Any]:
        from prometheus_client import metrics
        from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        created = getattr(metrics, "_use_created", True)  # (what disable_created_metrics() turns off)
        for i, (name, documentation) in enumerate((PUBLISHES, PUBLISHED_MESSAGES, PUBLISHED_BYTES)):
            family = CounterMetricFamily(name, documentation, labels=["topic"])
            for topic, counts in topics.items():
                family.add_metric([topic], counts[i], created=counts[3] if created else None)
            yield family
        histogram = HistogramMetricFamily(*PUBLISH_SECONDS)
        if buckets:
            cumulative = 0
            bounds = []
            for bound, count in zip((*LATENCY_BUCKETS, float("inf")), buckets, strict=True):
                cumulative += count
                bounds.append((floatToGoString(bound), cumulative))
            histogram.add_metric([], bounds, total)
            if created:
                histogram.add_sample(f"{PUBLISH_SECONDS[0]}_created", {}, self._created)
        yield histogram


class _PublishMetrics:
    """The publish metrics as prometheus_client's own counters and histogram, for its multiprocess mode
    (where only those reach the files a scrape reads); the labelled children are looked up once per topic."""

    def __init__(self, counter: Any, histogram: Any) -> None:
        names = (PUBLISHES, PUBLISHED_MESSAGES, PUBLISHED_BYTES)
        self._counters = [counter(name, documentation, ["topic"]) for name, documentation in names]
        self._seconds = histogram(*PUBLISH_SECONDS, buckets=LATENCY_BUCKETS)
        self._per_topic: dict[str, list[Any]] = {}

    def published(self, topic: str, messages: int, size: int, seconds: float, calls: int = 1) -> None:
        children = self._per_topic.get(topic)
        if children is None:
            children = self._per_topic[topic] = [counter.labels(topic) for counter in self._counters]
        for _ in range(calls):  # (a histogram observes one value at a time)
            self._seconds.observe(seconds)
        children[0].inc(calls)
        children[1].inc(messages)
        children[2].inc(size)


def _metric(kind: Any, name: str, documentation: str, labels: list[str] | None = None, **extra: Any) -> Any:
    if kind is None:
        return _Noop()
    return kind(name, documentation, labels or (), **extra)


class _MadeAtFirstUse:
    """Stands in for the process's :class:`ClientMetrics` until one of them is first used, then makes
    them (once, whichever thread comes first) and passes every attribute on to them: each is looked up
    there once and kept here, so later uses find it as a plain attribute (no call on the hot paths)."""

    def __init__(self) -> None:
        self._metrics: ClientMetrics | None = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if self._metrics is None:
            with self._lock:
                if self._metrics is None:
                    self._metrics = ClientMetrics()
        value = getattr(self._metrics, name)
        setattr(self, name, value)  # (a metric, or a bound method of the one ClientMetrics: never changes)
        return value


CLIENT_METRICS = cast(ClientMetrics, _MadeAtFirstUse())
"""The process's library metrics (made, and registered, at the first update of any of them)."""
