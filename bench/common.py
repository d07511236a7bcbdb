"""Shared pieces of the benchmarks: settings, table names, raw happybase tables, payloads, statistics, progress."""

from __future__ import annotations

import os
import re
import secrets
import statistics
import struct
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import happybase
import thriftpy2.thrift

from tms_hbase import MessagingClient, TopicId
from tms_hbase.model.tables import FAMILIES, FAMILY
from tms_hbase.storage.connection import PIPELINE_WINDOW, CheckedClient

# Raw rows use the same column family settings and column as the messages table (d:m).
RAW_FAMILY = {FAMILY: FAMILIES["messages"]}
RAW_COLUMN = f"{FAMILY}:m".encode()
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_SEND_TIME = struct.Struct(">d")
T = TypeVar("T")


@dataclass
class Settings:
    """What one run of the benchmarks uses; ``quick`` scales everything down."""

    address: str = "127.0.0.1:9090"
    quick: bool = False
    rounds: int = 5
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def prefix(self, name: str) -> str:
        """A table prefix of this run for one benchmark (always starts with ``bench``)."""
        return f"bench{name}_{self.run_id}"

    def pick(self, full: T, quick: T) -> T:
        return quick if self.quick else full


def check_loopback(address: str) -> None:
    host = address.rsplit(":", 1)[0]
    if host not in LOOPBACK:
        raise SystemExit(f"the benchmarks only run against HBase on loopback, not {address!r}")


def progress(message: str) -> None:
    """A progress line on stderr (stdout carries the report)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- payloads -----------------------------------------------------------------------------------


def payloads(count: int, size: int) -> list[bytes]:
    """``count`` distinct random payloads of ``size`` bytes (incompressible, like encrypted or packed data)."""
    return [os.urandom(size) for _ in range(count)]


def stamped(send_time: float, size: int) -> bytes:
    """A payload of ``size`` bytes that begins with a send time (seconds since the epoch, float64)."""
    return _SEND_TIME.pack(send_time) + b"\0" * max(0, size - _SEND_TIME.size)


def send_time_of(payload: bytes) -> float:
    return _SEND_TIME.unpack_from(payload)[0]


# -- tables -------------------------------------------------------------------------------------


def raw_connection(settings: Settings) -> happybase.Connection:
    return happybase.Connection(settings.host, settings.port, timeout=30_000)


class RawConnection:
    """A happybase connection that is reopened after ``max_idle`` seconds unused.

    The Thrift gateway closes connections idle for 60 s, and plain happybase does not reconnect.
    """

    def __init__(self, settings: Settings, max_idle: float = 30.0) -> None:
        self.settings = settings
        self.max_idle = max_idle
        self._conn: happybase.Connection | None = None
        self._used = 0.0

    @property
    def conn(self) -> happybase.Connection:
        now = time.monotonic()
        if self._conn is None or now - self._used > self.max_idle:
            self.close()
            self._conn = raw_connection(self.settings)
        self._used = now
        return self._conn

    def table(self, name: str) -> happybase.Table:
        return self.conn.table(name)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def create_raw_table(raw: RawConnection, name: str) -> happybase.Table:
    """A plain HBase table with the same family settings as the messages table."""
    raw.conn.create_table(name, RAW_FAMILY)
    return raw.table(name)


def drop_raw_table(conn: happybase.Connection, name: str) -> None:
    if name.encode() in conn.tables():
        conn.delete_table(name, disable=True)


def raw_key(prefix: bytes, n: int) -> bytes:
    return prefix + n.to_bytes(8, "big")


def raw_put_batch(table: happybase.Table, prefix: bytes, first: int, batch: Sequence[bytes]) -> None:
    """The raw counterpart of one publish: one row per payload, all in one mutateRows call."""
    with table.batch() as b:
        for i, payload in enumerate(batch):
            b.put(raw_key(prefix, first + i), {RAW_COLUMN: payload})


@contextmanager
def bench_tables(settings: Settings, name: str) -> Iterator[tuple[MessagingClient, RawConnection, str]]:
    """A MessagingClient on fresh ``bench…`` tables, a raw connection and a raw table name; all dropped after."""
    client = MessagingClient(settings.address, prefix=settings.prefix(name))
    raw = RawConnection(settings)
    raw_name = f"{settings.prefix(name)}_raw"
    try:
        client.admin.init_tables()
        yield client, raw, raw_name
    finally:
        try:
            client.admin.drop_tables()
        finally:
            try:
                drop_raw_table(raw.conn, raw_name)
            finally:
                client.close()
                raw.close()


def new_topic(client: MessagingClient, name: str, properties: dict[str, str] | None = None) -> TopicId:
    topic = TopicId("bench", name)
    client.create_topic(topic, properties)
    return topic


# -- counting Thrift calls ----------------------------------------------------------------------


class RpcCounter:
    """Counts every Thrift request this process sends, and the round trips they took: a request sent alone
    is one, a pipelined window (``CheckedClient.pipeline``) of them one (patches thriftpy2's TClient, the
    storage port's CheckedClient and its pipeline; benchmarks only)."""

    count = 0
    round_trips = 0
    _installed = False

    @classmethod
    def install(cls) -> None:
        if cls._installed:
            return
        pipeline = CheckedClient.pipeline

        def counting(call: Any) -> Any:
            def counted(self: thriftpy2.thrift.TClient, _api: str, *args: object, **kwargs: object) -> object:
                cls.count += 1
                cls.round_trips += 1
                return call(self, _api, *args, **kwargs)

            return counted

        def counting_pipeline(self: CheckedClient, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[Any]:
            cls.count += len(calls)
            cls.round_trips += -(-len(calls) // PIPELINE_WINDOW)
            return pipeline(self, calls)

        thriftpy2.thrift.TClient._req = counting(thriftpy2.thrift.TClient._req)  # type: ignore[method-assign]
        CheckedClient._req = counting(CheckedClient._req)  # type: ignore[method-assign]
        CheckedClient.pipeline = counting_pipeline  # type: ignore[method-assign]
        cls._installed = True


# -- statistics ---------------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), nearest rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def wait_until(when: float) -> None:
    """Sleep until the wall clock reaches ``when`` (processes on one machine share it)."""
    delay = when - time.time()
    if delay > 0:
        time.sleep(delay)


# -- results ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GoalFamily:
    """Goals that differ only in an item (a console screen, a transport): each run records one verdict per item,
    docs/benchmarks.md's table shows the family as one row, met only when every item met its goal."""

    template: str  # each item's goal text, with ``{item}`` and any other ``{field}`` that varies with the item
    goal: str  # the family's goal in the table
    highest_is_worst: bool  # True for a limit (``< 300 ms``), False for a floor (``≥ 0.8×``)

    def item(self, goal: str) -> str | None:
        """The item that ``goal`` is this family's goal for, or None if it is not one of the family's."""
        parts = re.split(r"\{(\w+)\}", self.template)
        pattern = "".join(re.escape(part) if n % 2 == 0 else f"(?P<{part}>.+?)" for n, part in enumerate(parts))
        match = re.fullmatch(pattern, goal)
        return match["item"] if match else None


@dataclass
class Result:
    """What one benchmark found: markdown tables, goal verdicts, notes and the per-round samples."""

    name: str
    title: str
    tables: list[tuple[list[str], list[list[str]]]] = field(default_factory=list)
    goals: list[tuple[str, str, bool]] = field(default_factory=list)  # (goal, measured, met)
    notes: list[str] = field(default_factory=list)
    samples: dict[str, object] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None  # why the benchmark failed; what it measured before that is still reported

    def table(self, columns: list[str], rows: list[list[object]]) -> None:
        self.tables.append((columns, [[fmt(v) for v in row] for row in rows]))

    def goal(self, goal: str, measured: str, met: bool) -> None:
        self.goals.append((goal, measured, met))

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "title": self.title,
            "tables": [{"columns": c, "rows": r} for c, r in self.tables],
            "goals": [{"goal": g, "measured": m, "met": ok} for g, m, ok in self.goals],
            "notes": self.notes,
            "samples": self.samples,
            "seconds": round(self.seconds, 1),
            "error": self.error,
        }


def fmt(value: object) -> str:
    """Numbers for the tables: thousands separators, 2 significant decimals for small values."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if value != value:  # NaN
        return "–"
    if isinstance(value, int) or abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def rotated(sides: Sequence[T], shift: int) -> list[T]:
    """``sides`` starting at the ``shift``-th (mod their number)."""
    shift %= len(sides)
    return [*sides[shift:], *sides[:shift]]


def mirrored(sides: Sequence[T], turn: int) -> list[T]:
    """``sides`` as given on even turns, reversed on odd ones (A B, B A, A B, ...): of any two sides each goes
    first on half the turns, and sides given next to each other run next to each other."""
    return list(sides) if turn % 2 == 0 else list(sides)[::-1]


def abba(sides: Sequence[T], turn: int) -> list[T]:
    """One round's order with every side twice, mirrored about its middle (A B B A; B A A B the next round): each
    side's mean place in the round is the same, so drift through a round (a cache warming, a flush, load that
    comes and goes) costs every side alike, and a ratio of two sides' figures within one round is a fair sample."""
    order = mirrored(sides, turn)
    return order + order[::-1]


def rotated_rounds(
    label: str, rounds: int, sides: Sequence[tuple[str, Callable[[], float]]], rates: dict[str, list[float]]
) -> None:
    """Measure every side once a round, each round starting one side later (no side always runs first, on a
    fresh or a tired HBase), appending each rate (msg/s) to ``rates[name]``."""
    for r in range(rounds):
        for name, measure in rotated(sides, r):
            rates[name].append(measure())
        progress(
            f"{label} round {r + 1}/{rounds}: "
            + ", ".join(f"{name} {rates[name][-1]:,.0f}" for name, _ in sides)
            + " msg/s"
        )
