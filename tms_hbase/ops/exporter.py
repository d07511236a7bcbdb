"""A Prometheus collector of what topics hold and how far subscriptions are behind, read from HBase.

Served by ``tms-admin metrics serve``; any process can register it in its own registry. A scrape
reads each topic's statistics (a tail read, a time seek and a few reads per subscription, never a
scan) and keeps them for ``max_age`` seconds, so frequent scrapes do not load HBase. A topic that
cannot be read (a corrupt row, HBase trouble) is logged and counted, and the others are still served.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tms_hbase.client import MessagingClient
from tms_hbase.errors import TmsError
from tms_hbase.model.stats import SharedStats, TopicStats

log = logging.getLogger(__name__)


class TopicCollector(Collector):
    """Per-topic and per-subscription gauges of one installation (optionally one namespace)."""

    def __init__(self, client: MessagingClient, namespace: str | None = None, max_age: float = 10.0) -> None:
        self.client = client
        self.namespace = namespace
        self.max_age = max_age
        self._lock = threading.Lock()
        self._stats: list[TopicStats] = []
        self._shared: list[tuple[str, str, SharedStats]] = []  # (topic, subscription, numbers)
        self._read_at = float("-inf")
        self._errors = 0
        self._seconds = 0.0

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        with self._lock:
            if time.monotonic() - self._read_at >= self.max_age:
                self._refresh()
            stats, shared, errors, seconds = self._stats, self._shared, self._errors, self._seconds
        topic = ["namespace", "topic"]  # topic: namespace:name, as everywhere; namespace too, to aggregate by
        sub = ["namespace", "topic", "subscription"]
        messages = GaugeMetricFamily(
            "tms_topic_messages", "Readable committed messages in the topic (rolled-back ones left out)", labels=topic
        )
        uncommitted = GaugeMetricFamily(
            "tms_topic_uncommitted_messages", "Readable messages of transactions still in progress", labels=topic
        )
        size = GaugeMetricFamily(
            "tms_topic_bytes", "Payload bytes of the readable messages (where kept exactly: chain topics)", labels=topic
        )
        published = CounterMetricFamily(
            "tms_topic_published_messages", "Messages published to the topic's current generation", labels=topic
        )
        last = GaugeMetricFamily(
            "tms_topic_last_publish_timestamp_seconds", "Publish time of the newest message", labels=topic
        )
        first = GaugeMetricFamily(
            "tms_topic_first_publish_timestamp_seconds", "Publish time of the oldest readable message", labels=topic
        )
        generation = GaugeMetricFamily("tms_topic_generation", "The topic's generation", labels=topic)
        lag = GaugeMetricFamily(
            "tms_subscription_lag_messages",
            "Committed messages not consumed yet, up to the first of a transaction in progress",
            labels=sub,
        )
        held = GaugeMetricFamily(
            "tms_subscription_held_messages",
            "Messages not consumed yet that a transaction in progress holds back (from its first message on)",
            labels=sub,
        )
        lag_s = GaugeMetricFamily(
            "tms_subscription_lag_seconds", "Age of the oldest message not consumed yet", labels=sub
        )
        for s in stats:
            name = [s.topic.namespace, str(s.topic)]
            messages.add_metric(name, s.messages)
            uncommitted.add_metric(name, s.uncommitted)
            if s.bytes_exact:  # else an estimate (swept before bytes checkpoints): no gauge rather than a wrong one
                size.add_metric(name, s.bytes)
            generation.add_metric(name, s.generation)
            if s.published is not None:
                published.add_metric(name, s.published)
            if s.last_publish_time is not None:
                last.add_metric(name, s.last_publish_time / 1000)
            if s.first_publish_time is not None:
                first.add_metric(name, s.first_publish_time / 1000)
            for sub_name, _mark, sub_lag in s.subscriptions:
                lag.add_metric([*name, sub_name], sub_lag.messages)
                lag_s.add_metric([*name, sub_name], sub_lag.seconds)
                held.add_metric([*name, sub_name], sub_lag.held)
        yield from (messages, uncommitted, size, published, last, first, generation, lag, held, lag_s)
        yield from _shared_families(shared)
        yield CounterMetricFamily("tms_exporter_read_errors", "Topics that could not be read", value=errors)
        yield GaugeMetricFamily("tms_exporter_read_seconds", "Duration of the last read from HBase", value=seconds)

    def _refresh(self) -> None:
        started = time.monotonic()
        stats, shared = [], []
        try:
            topics = self.client.list_topics(self.namespace)
        except TmsError as exc:
            log.warning("metrics: cannot list topics: %s", exc)
            self._errors += 1
            topics = []
        for topic in topics:
            try:
                stats.append(self.client.topic_stats(topic, windows=()))
                shared += [
                    (str(topic), s.name, s.shared)
                    for s in self.client.list_subscriptions(topic)
                    if s.shared is not None
                ]
            except TmsError as exc:
                log.warning("metrics: topic %s not read: %s", topic, exc)
                self._errors += 1
        self._stats, self._shared = stats, shared
        self._read_at = time.monotonic()
        self._seconds = self._read_at - started


_SHARED = (
    (
        "waiting",
        GaugeMetricFamily,
        "tms_shared_waiting_messages",
        "Messages of a shared subscription not delivered yet",
    ),
    (
        "in_flight",
        GaugeMetricFamily,
        "tms_shared_in_flight_messages",
        "Messages held by a consumer before their deadline",
    ),
    (
        "due",
        GaugeMetricFamily,
        "tms_shared_due_messages",
        "Messages given back or past their deadline, to deliver again",
    ),
    ("acknowledged", CounterMetricFamily, "tms_shared_acknowledged", "Messages acknowledged"),
    ("redelivered", CounterMetricFamily, "tms_shared_redelivered", "Deliveries after the first"),
    ("dead_lettered", CounterMetricFamily, "tms_shared_dead_lettered", "Messages given up after max deliveries"),
    (
        "late_acks",
        CounterMetricFamily,
        "tms_shared_late_acks",
        "Acks, nacks and extensions refused because their delivery no longer held the message",
    ),
    (
        "oldest_unacked_seconds",
        GaugeMetricFamily,
        "tms_shared_oldest_unacked_seconds",
        "Age of the oldest unsettled message",
    ),
    ("consumers", GaugeMetricFamily, "tms_shared_consumers", "Consumers holding messages"),
    ("scheduled", GaugeMetricFamily, "tms_shared_scheduled_messages", "Messages scheduled for later, not due yet"),
)


def _shared_families(shared: list[tuple[str, str, SharedStats]]) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The numbers of every shared subscription (:class:`~tms_hbase.shared.admin.SharedStats`)."""
    for field, kind, name, text in _SHARED:
        family = kind(name, text, labels=["namespace", "topic", "subscription"])
        for topic, subscription, numbers in shared:
            family.add_metric([topic.split(":", 1)[0], topic, subscription], getattr(numbers, field))
        yield family
