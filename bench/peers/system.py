"""What every system under test provides: a server started on loopback (``Server``) and a client for one
worker process (``Client``), looked up by name. A system module is imported only when it is used, so a
missing client library fails that system alone."""

from __future__ import annotations

import contextlib
import importlib
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

# name -> (module, label in the report); the first is the one every ratio is taken against
SYSTEMS: dict[str, tuple[str, str]] = {
    "tms": ("bench.peers.tms_peer", "tms-hbase"),
    "kafka": ("bench.peers.kafka_peer", "Kafka"),
    "nats": ("bench.peers.nats_peer", "NATS JetStream"),
    "redis": ("bench.peers.redis_peer", "Redis Streams"),
}
BASELINE = "tms"

Endpoint = dict[str, Any]  # how a worker process reaches a started server (picklable)
STALL_SECONDS = 30.0  # a reader that gets nothing for this long raises Stalled instead of waiting forever


class Stalled(RuntimeError):
    """A reader got no message for STALL_SECONDS although more were expected."""


def check_progress(last_progress: float, what: str) -> None:
    """Raise Stalled when ``last_progress`` (time.monotonic()) is STALL_SECONDS old."""
    if time.monotonic() - last_progress > STALL_SECONDS:
        raise Stalled(f"{what}: no message for {STALL_SECONDS:.0f} s")


@dataclass
class ServerInfo:
    """A started server: how to reach it, and what the report says about it."""

    endpoint: Endpoint
    versions: str
    durability: str


class Server(ABC):
    """A context manager: ``__enter__`` starts the server (in a temp dir, on free loopback ports) and
    returns its ServerInfo; ``__exit__`` stops it, also after a failure."""

    @abstractmethod
    def __enter__(self) -> ServerInfo: ...

    @abstractmethod
    def __exit__(self, *exc_info: object) -> None: ...


class Tailer(Protocol):
    """A consumer reading a topic from its start as messages arrive."""

    def poll(self) -> Iterable[bytes]:
        """The payloads that arrived since the last poll; waits briefly (the system's own way) when none."""
        ...

    def close(self) -> None: ...


class Client(ABC):
    """One worker process's connection to a system. Topics are names of ``[a-z0-9_]``."""

    transactions = False  # whether transact/read_committed exist; without, the report says "no equivalent"

    @abstractmethod
    def create_topic(self, topic: str) -> None: ...

    @abstractmethod
    def delete_topic(self, topic: str) -> None: ...

    @abstractmethod
    def publish(self, topic: str, batch: Sequence[bytes]) -> None:
        """Publish ``batch`` in order; returns once the server acknowledged all of it."""

    def publish_pipelined(self, topic: str, messages: Sequence[bytes]) -> None:
        """Publish each of ``messages`` as a message of its own, in order, without waiting for one to be
        acknowledged before sending the next (the system's pipelining); returns once all are acknowledged.
        For Kafka (produce each, then flush), JetStream (``publish_async`` each, then their acks) and Redis
        (one pipeline of XADDs) that is what a batch publish does already."""
        self.publish(topic, messages)

    @abstractmethod
    def read(self, topic: str, count: int) -> Iterator[bytes]:
        """The first ``count`` payloads of the topic, from its beginning, with a fresh reader."""

    @abstractmethod
    def tailer(self, topic: str) -> Tailer: ...

    @abstractmethod
    def seek(self, topic: str, t_ms: int) -> int:
        """The timestamp (ms) of the first message at or after ``t_ms``, found the system's own way."""

    def transact(self, topic: str, batch: Sequence[bytes]) -> float:
        """Publish ``batch`` in one transaction; returns the seconds the commit call took."""
        raise NotImplementedError

    def read_committed(self, topic: str, count: int) -> Iterator[bytes]:
        """The first ``count`` committed payloads, read with transactional isolation."""
        raise NotImplementedError

    queues = False  # whether create_queue/work_queue exist (a work queue shared by many consumers)
    by_key = False  # whether create_queue(by_key=True) keeps each key's messages in order

    def publish_keyed(self, topic: str, batch: Sequence[tuple[bytes, bytes]]) -> None:
        """Publish ``(key, payload)`` pairs in order. A system whose queues do not order by key publishes the
        payloads alone (what its consumers get is the same)."""
        self.publish(topic, [payload for _, payload in batch])

    def create_queue(self, topic: str, group: str, by_key: bool = False) -> None:
        """A new consumer group (shared subscription) ``group`` reading ``topic`` from its start; ``by_key``:
        one that keeps each key's messages in order, if the system has one (:attr:`by_key`), else its
        ordinary one, the closest it has."""
        raise NotImplementedError

    def work_queue(
        self, topic: str, group: str, work: float, batch: int, idle: float
    ) -> tuple[int, float, list[float]]:
        """One consumer of ``group``: take up to ``batch`` messages at a time, work ``work`` s on each and
        acknowledge it on its own, until nothing comes for ``idle`` s; returns (messages acknowledged,
        time.time() after the last one, the wall time of each acknowledgement in seconds)."""
        raise NotImplementedError

    @abstractmethod
    def close(self) -> None: ...


def label(name: str) -> str:
    return SYSTEMS[name][1]


def has_queues(name: str) -> bool:
    return bool(importlib.import_module(SYSTEMS[name][0]).Client.queues)


def by_key(name: str) -> bool:
    return bool(importlib.import_module(SYSTEMS[name][0]).Client.by_key)


def has_transactions(name: str) -> bool:
    return bool(importlib.import_module(SYSTEMS[name][0]).Client.transactions)


def server(name: str, settings: Any, workloads: Sequence[str]) -> AbstractContextManager[ServerInfo]:
    """The server of system ``name`` for this run (imports its module now)."""
    return importlib.import_module(SYSTEMS[name][0]).Server(settings, workloads)


_clients: dict[tuple[str, str], Client] = {}  # per worker process


def client(name: str, endpoint: Endpoint) -> Client:
    """This process's client of ``name`` at ``endpoint`` (made once, reused by later jobs)."""
    key = (name, repr(sorted(endpoint.items())))
    if key not in _clients:
        _clients[key] = importlib.import_module(SYSTEMS[name][0]).Client(endpoint)
    return _clients[key]


def close_clients() -> None:
    """Close every client this process made."""
    while _clients:
        _, c = _clients.popitem()
        with contextlib.suppress(Exception):  # best effort: the servers are stopped next anyway
            c.close()
