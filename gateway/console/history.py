"""The numbers behind the console's charts, sampled over time in each worker.

The library reads what a topic holds now (``topic_stats``, the same numbers the Prometheus exporter
publishes: ``tms_topic_published_messages``, ``tms_subscription_lag_messages`` and ``_seconds``); a chart
needs them over time. Each time the console reads a topic or a subscription, its numbers are kept here
(at most one sample per :data:`MIN_GAP_MS`, the last :data:`KEEP` of them) and sent with the screen, whose
own refresh adds a sample every few seconds. The history is per worker process and starts when it does:
for long-term graphs, scrape the exporter into Prometheus.
"""

from __future__ import annotations

import threading
import time
from collections import deque

KEEP = 720  # an hour at one sample per 5 s
MIN_GAP_MS = 2000


class History:
    """Samples per topic of (time ms, messages published) and per subscription of (time, lag messages,
    lag seconds), bounded in number of samples and of topics."""

    def __init__(self, max_topics: int = 2000) -> None:
        self._lock = threading.Lock()
        self._published: dict[str, deque[tuple[int, int]]] = {}
        self._lags: dict[tuple[str, str], deque[tuple[int, int, float]]] = {}
        self._max_topics = max_topics

    def record(self, topic: str, published: int | None, lags: dict[str, tuple[int, float]]) -> None:
        """One read of a topic: its published count (None: not known) and every subscription's lag."""
        now = _now_ms()
        with self._lock:
            if published is not None:
                _append(self._bounded(self._published, topic), (now, published))
            for name, (messages, seconds) in lags.items():
                _append(self._bounded(self._lags, (topic, name)), (now, messages, seconds))

    def record_lag(self, topic: str, name: str, messages: int, seconds: float) -> None:
        with self._lock:
            _append(self._bounded(self._lags, (topic, name)), (_now_ms(), messages, seconds))

    def samples(self, topic: str) -> list[list[int]]:
        """[[ms, published], ...], oldest first."""
        with self._lock:
            return [list(s) for s in self._published.get(topic, ())]

    def lag_samples(self, topic: str, name: str) -> list[list[float]]:
        """[[ms, lag messages, lag seconds], ...], oldest first."""
        with self._lock:
            return [list(s) for s in self._lags.get((topic, name), ())]

    def _bounded(self, table: dict, key: object) -> deque:
        found = table.get(key)
        if found is None:
            if len(table) >= self._max_topics:
                table.pop(next(iter(table)))  # the longest-known series goes first
            found = table[key] = deque(maxlen=KEEP)
        return found


def _append(series: deque, sample: tuple) -> None:
    if series and sample[0] - series[-1][0] < MIN_GAP_MS:
        series[-1] = sample  # a refresh within the gap replaces the newest sample
    else:
        series.append(sample)


def _now_ms() -> int:
    return int(time.time() * 1000)
