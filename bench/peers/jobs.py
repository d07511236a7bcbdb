"""The jobs the worker processes run (bench.procs.Workers): each takes a system's name and endpoint,
uses this process's client of it, and returns plain numbers. The same code drives every system."""

from __future__ import annotations

import time

from .. import latency
from ..common import payloads, wait_until
from .system import Endpoint, client, close_clients

__all__ = ["close_clients"]


def connect(name: str, endpoint: Endpoint) -> None:
    """Open this process's client now, so no timed job pays for it."""
    client(name, endpoint)


def create_topic(name: str, endpoint: Endpoint, topic: str) -> None:
    client(name, endpoint).create_topic(topic)


def delete_topic(name: str, endpoint: Endpoint, topic: str) -> None:
    client(name, endpoint).delete_topic(topic)


def publish_for(
    name: str,
    endpoint: Endpoint,
    topic: str,
    size: int,
    batch: int,
    start_at: float,
    duration: float,
    cap: int,
    pipelined: bool = False,
) -> tuple[int, float]:
    """Publish ``batch``-message batches of ``size`` B from ``start_at`` until ``duration`` s passed or
    ``cap`` messages were written (one untimed message first), and at least once; returns (messages, end
    time). ``pipelined``: the ``batch`` messages are sent one by one, pipelined, and all acknowledged before
    the next ones."""
    c = client(name, endpoint)
    data = payloads(batch, size)
    send = c.publish_pipelined if pipelined else c.publish
    send(topic, data[:1])  # warm-up: connection, topic metadata
    wait_until(start_at)
    end_at = start_at + duration
    count = 0
    while count < cap and (count == 0 or time.time() < end_at):  # at least one call, however late
        send(topic, data)
        count += batch
    return count, time.time()


def fill(
    name: str, endpoint: Endpoint, topic: str, size: int, total: int, batch: int = 100, keys: int = 0
) -> tuple[int, int, float]:
    """Publish ``total`` messages of ``size`` B in batches (with ``keys``, message n has key ``key-<n % keys>``);
    returns (ms just before the first publish call, ms just before the last one, seconds taken): every message
    is stamped at or after the first, and the last at or after the second, whichever clock the system stamps
    with (all are this machine's)."""
    c = client(name, endpoint)
    data = payloads(batch, size)
    first = last = int(time.time() * 1000)
    start = time.perf_counter()
    for written in range(0, total, batch):
        last = int(time.time() * 1000)
        chunk = data[: min(batch, total - written)]
        if keys:
            c.publish_keyed(topic, [(b"key-%d" % ((written + i) % keys), p) for i, p in enumerate(chunk)])
        else:
            c.publish(topic, chunk)
    return first, last, time.perf_counter() - start


def read_all(name: str, endpoint: Endpoint, topic: str, size: int, count: int, committed: bool = False) -> float:
    """Seconds to read the topic's first ``count`` messages from its beginning (each payload touched);
    ``committed`` reads with transactional isolation."""
    c = client(name, endpoint)
    start = time.perf_counter()
    n = total = 0
    for payload in c.read_committed(topic, count) if committed else c.read(topic, count):
        n += 1
        total += len(payload)
    seconds = time.perf_counter() - start
    if n != count or total != count * size:
        raise AssertionError(f"read {n} messages, {total} B from {topic}; expected {count}, {count * size} B")
    return seconds


def seek(name: str, endpoint: Endpoint, topic: str, targets: list[int]) -> list[float]:
    """Milliseconds of each time seek (first message at or after t); checks what each one found."""
    c = client(name, endpoint)
    times = []
    for t in targets:
        start = time.perf_counter()
        found = c.seek(topic, t)
        times.append((time.perf_counter() - start) * 1000)
        if found < t:
            raise AssertionError(f"seek to {t} ms returned a message of {found} ms")
    return times


def publish_paced(
    name: str, endpoint: Endpoint, topic: str, size: int, start_at: float, duration: float
) -> tuple[int, list[float]]:
    """Publish stamped payloads at latency.RATE msg/s (bench/latency.py's pacing); returns the messages sent
    and each publish call's milliseconds (the acknowledgement alone, of the same publishes)."""
    c = client(name, endpoint)
    calls: list[float] = []
    sent, _publishes = latency.pace(start_at, duration, size, lambda batch: c.publish(topic, batch), calls)
    return sent, calls


def tail(name: str, endpoint: Endpoint, topic: str, deadline: float, expected_at: float) -> list[float]:
    """Follow the topic from its start (bench/latency.py's loop); returns the latencies in ms."""
    tailer = client(name, endpoint).tailer(topic)
    try:
        latencies, _polls = latency.follow(tailer.poll, deadline, expected_at)
    finally:
        tailer.close()
    return latencies


def transact_for(
    name: str, endpoint: Endpoint, topic: str, size: int, batch: int, duration: float
) -> tuple[list[float], list[float]]:
    """Transactions of one ``batch`` each, back to back for ``duration`` s (at least 3); returns the
    seconds of each whole transaction and of each commit call."""
    c = client(name, endpoint)
    data = payloads(batch, size)
    c.transact(topic, data)  # warm-up: transactional producer / transaction client ready
    totals, commits = [], []
    end_at = time.monotonic() + duration
    while len(totals) < 3 or time.monotonic() < end_at:
        start = time.perf_counter()
        commits.append(c.transact(topic, data))
        totals.append(time.perf_counter() - start)
    return totals, commits


def create_queue(name: str, endpoint: Endpoint, topic: str, group: str, by_key: bool = False) -> None:
    client(name, endpoint).create_queue(topic, group, by_key)


def work_queue(
    name: str, endpoint: Endpoint, topic: str, group: str, work: float, batch: int, idle: float, start_at: float
) -> tuple[int, float, list[float]]:
    """One consumer of a work queue from ``start_at`` (the client opened before): (acknowledged, end time,
    each acknowledgement's wall time in seconds)."""
    c = client(name, endpoint)
    wait_until(start_at)
    return c.work_queue(topic, group, work, batch, idle)
