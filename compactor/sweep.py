"""Sweeping: each region of the message and payload tables under a lease, in chunks, resumable from a
checkpoint, throttled, applying the rules of ``rules.py`` to every row."""

from __future__ import annotations

import dataclasses
import functools
import logging
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from tms_hbase.clock import now_ms
from tms_hbase.connection import HBaseConnection, mutation
from tms_hbase.errors import TmsError
from tms_hbase.metadata import MetadataStore
from tms_hbase.rows import MESSAGE_COLUMN, BatchRow, peek, with_tx_pointer
from tms_hbase.storage import Table
from tms_hbase.tables import TableNames
from tms_hbase.topic import TopicId, TopicMetadata
from tms_hbase.tx.state_store import StateStore

from .metrics import SweeperMetrics
from .pruning import prune_upper_bound
from .regions import Region, list_regions
from .rules import Verdict, message_verdict, payload_verdict
from .state import RegionRecord, SweepState
from .subscriptions import sweep_subscriptions

log = logging.getLogger(__name__)

DEFAULT_GRACE_SECONDS = 600
CHUNK = 4000


@dataclass
class SweepReport:
    """What one sweep saw and did (or, in a dry run, would have done)."""

    messages_scanned: int = 0
    messages_dropped: int = 0
    messages_stripped: int = 0
    messages_invalidated: int = 0  # write pointer +p rewritten to -p (p on the invalid list)
    payloads_scanned: int = 0
    payloads_dropped: int = 0
    invalid_transactions: int = 0  # size of the invalid list the sweep used
    regions_swept: int = 0
    regions_skipped: int = 0  # leased by another sweeper
    regions_resumed: int = 0  # continued from a checkpoint
    compactions: int = 0
    subscriptions_dropped: int = 0  # subscription rows of dead generations
    stopped: bool = False  # interrupted by a stop request; the checkpoints hold the place
    dry_run: bool = False
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Context:
    topics: dict[TopicId, TopicMetadata]
    invalid: frozenset[int]
    prune_bound: int
    read_pointer: int
    report: SweepReport
    deletes: list[bytes] = field(default_factory=list)
    now: int = 0  # the clock, read once per chunk
    topics_loaded: float = 0.0  # time.monotonic() of the last metadata read
    tx_loaded: float = 0.0  # and of the last transaction-state read


def split_key(key: bytes) -> tuple[TopicId, int] | None:
    """(topic, generation) of a message or payload row key; None if it is not one of ours."""
    first = key.find(b":")
    second = key.find(b":", first + 1)
    if first <= 0 or second <= first + 1 or len(key) < second + 5:
        return None
    return _parse_prefix(key[: second + 5])


@functools.lru_cache(maxsize=4096)
def _parse_prefix(prefix: bytes) -> tuple[TopicId, int] | None:
    """(topic, generation) of ``namespace:topic:`` + generation; cached, as rows come in long runs."""
    first = prefix.find(b":")
    second = prefix.find(b":", first + 1)
    try:
        topic = TopicId(prefix[:first].decode(), prefix[first + 1 : second].decode())
    except (UnicodeDecodeError, ValueError):
        return None
    return topic, struct.unpack_from(">I", prefix, second + 1)[0]


class Sweeper:
    """Applies the cleanup rules to every row of one tms-hbase installation (one table prefix).

    Several sweepers may run at once: a region is swept only under its lease. A sweep stopped
    midway (``stop()``, SIGTERM, SIGKILL) leaves a checkpoint the next sweep of that region resumes from.
    """

    def __init__(
        self,
        hbase: HBaseConnection,
        tables: TableNames,
        *,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        dry_run: bool = False,
        clock: Callable[[], int] = now_ms,
        owner: str | None = None,
        lease_seconds: float = 60.0,
        max_rows_per_second: float | None = None,
        compact_after: int = 10_000,
        chunk_rows: int = CHUNK,
        metadata_refresh: float = 30.0,
        snapshot_refresh: float = 30.0,
        metrics: SweeperMetrics | None = None,
    ) -> None:
        self.hbase = hbase
        self.tables = tables
        self.grace_ms = int(grace_seconds * 1000)
        self.dry_run = dry_run
        self.clock = clock
        self.owner = owner or f"sweeper-{uuid.uuid4().hex[:8]}"
        self.lease_seconds = lease_seconds
        self.max_rows_per_second = max_rows_per_second
        self.compact_after = compact_after
        self.chunk_rows = chunk_rows
        self.metadata_refresh, self.snapshot_refresh = metadata_refresh, snapshot_refresh
        self.metrics = metrics or SweeperMetrics()
        self.metadata = MetadataStore(hbase, tables.metadata)
        self.state = SweepState(hbase, tables.txstate)
        self._stop = threading.Event()
        self._deleter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweep-deletes")

    def _load_topics(self, context: _Context) -> None:
        context.topics = {m.topic: m for m in self.metadata.list(include_deleted=True)}
        context.topics_loaded = time.monotonic()

    def _load_tx_state(self, context: _Context) -> None:
        """The invalid list and prune bound from HBase (snapshot + edit log): no transaction server needed."""
        store = StateStore(self.hbase, self.tables.txstate)
        tx_state = store.recover()
        snapshot = store.latest_snapshot()
        if snapshot is not None:
            self.metrics.snapshot_age.set(max(0, self.clock() - snapshot.timestamp) / 1000)
        context.invalid = frozenset(tx_state.invalid)
        context.prune_bound, context.read_pointer = prune_upper_bound(tx_state), tx_state.read_pointer
        context.report.invalid_transactions = len(context.invalid)
        context.tx_loaded = time.monotonic()
        log.info(
            "sweeper %s uses transaction state: %d invalid, read pointer %d, snapshot of %s + edit log",
            self.owner,
            len(context.invalid),
            tx_state.read_pointer,
            "none" if snapshot is None else snapshot.timestamp,
        )

    def _refresh(self, context: _Context) -> None:
        now = time.monotonic()
        if now - context.topics_loaded >= self.metadata_refresh:
            self._load_topics(context)
        if now - context.tx_loaded >= self.snapshot_refresh:
            self._load_tx_state(context)

    def _report_lag(self) -> None:
        """Seconds since each region's last complete sweep, for the region-lag gauge."""
        now = self.clock()
        for table in (self.tables.messages, self.tables.payloads):
            for start, record in self.state.records(table).items():
                if record.completed is not None:
                    label = f"{table}[{start.hex() or '-'}..)"
                    self.metrics.region_lag.labels(label).set(max(0, now - record.completed) / 1000)

    def stop(self) -> None:
        """Finish the current chunk, save the checkpoint, release the lease, and return."""
        self._stop.set()

    def regions(self) -> list[Region]:
        """The work units of a sweep: every region of the message table, then of the payload table."""
        return [r for table in (self.tables.messages, self.tables.payloads) for r in list_regions(self.hbase, table)]

    def sweep_once(self) -> SweepReport:
        """Sweep every region of both tables once; topic metadata and the transaction state are
        re-read during the sweep when older than their refresh intervals."""
        self._report_lag()
        report = self.sweep_regions(self.regions())
        if not report.stopped:
            topics = {m.topic: m for m in self.metadata.list(include_deleted=True)}
            subscriptions = Table(self.hbase, self.tables.subscriptions)
            report.subscriptions_dropped = sweep_subscriptions(subscriptions, topics, split_key, self.dry_run)
        return report

    def sweep_regions(self, regions: list[Region]) -> SweepReport:
        """Sweep these regions (each under its lease): a whole sweep, or one Spark task's share of it."""
        started = time.monotonic()
        context = _Context(topics={}, invalid=frozenset(), prune_bound=0, read_pointer=0, report=SweepReport())
        context.report.dry_run = self.dry_run
        self._load_topics(context)
        self._load_tx_state(context)
        for region in regions:
            if self._stop.is_set():
                context.report.stopped = True
                break
            handle = self._message_row if region.table == self.tables.messages else self._payload_row
            self._leased(region, handle, context)
        report = context.report
        report.seconds = round(time.monotonic() - started, 3)
        self.metrics.last_sweep.set(time.time())
        log.info("sweep done: %s", report.as_dict())
        return report

    # -- one region ---------------------------------------------------------------------------

    def _leased(self, region: Region, handle: Callable, context: _Context) -> None:
        lease = self.state.acquire(region, self.owner, self.lease_seconds, self.clock())
        if lease is None:
            context.report.regions_skipped += 1
            self.metrics.regions.labels("skipped").inc()
            return
        self._lease = lease
        try:
            self._sweep_region(region, handle, context)
        except LeaseLost as exc:
            log.warning("%s; leaving the region to its new owner", exc)
            return
        self.state.release(region, self._lease)

    def _sweep_region(self, region: Region, handle: Callable, context: _Context) -> None:
        record = self.state.record(region)
        start = region.start
        if record.checkpoint is not None:
            start = bytes.fromhex(record.checkpoint)
            context.report.regions_resumed += 1
            log.info("resuming %s from its checkpoint", region.label())
        deletes_before = self._deleted(context.report)
        rows_seen, began = 0, time.monotonic()
        # A later state's invalid list holds every id up to this bound too (or they were pruned,
        # which needs them marked everywhere), so this bound stays true for the whole region.
        region_bound, region_read_pointer = context.prune_bound, context.read_pointer
        kind = "messages" if region.table == self.tables.messages else "payloads"
        pending: tuple[Future | None, bytes] | None = None  # a chunk's deletes in flight, and its last key
        for chunk, following in self._chunks(region, start):
            self._refresh(context)
            context.now = self.clock()
            for i, (key, data) in enumerate(chunk):
                handle(key, data, chunk[i + 1][0] if i + 1 < len(chunk) else following, context)
            rows_seen += len(chunk)
            self.metrics.rows_scanned.labels(kind).inc(len(chunk))
            deleting = self._flush(region.table, context)  # runs while the next chunk is read
            if pending is not None:
                self._settle(region, record, pending)
            pending = (deleting, chunk[-1][0])
            self._keep_lease(region)
            self._throttle(rows_seen, began)
            if self._stop.is_set():
                self._settle(region, record, pending)
                context.report.stopped = True
                return  # the checkpoint holds the place
        if pending is not None:
            self._settle(region, record, pending)
        if self.dry_run:
            return
        record.checkpoint = None
        record.completed, record.rows = self.clock(), rows_seen
        if region.table == self.tables.messages:
            record.prune_bound, record.read_pointer = region_bound, region_read_pointer
        self.state.save(region, record)
        context.report.regions_swept += 1
        self.metrics.regions.labels("swept").inc()
        if self._deleted(context.report) - deletes_before >= self.compact_after:
            self._compact(region, context)

    def _chunks(self, region: Region, start: bytes) -> Iterator[tuple[list[tuple[bytes, dict]], bytes | None]]:
        """The region's rows from ``start`` in chunks, each with the key of the row after it (the
        next row of the table, even in the next region, so 'newest of its generation' is right)."""
        rows = self._scan(region.table, start, region.end, self.chunk_rows)
        while rows:
            after = rows[-1][0] + b"\0"
            more = self._scan(region.table, after, region.end, self.chunk_rows) if len(rows) == self.chunk_rows else []
            if more:
                following = more[0][0]
            else:
                beyond = self._scan(region.table, region.end, b"", 1) if region.end else []
                following = beyond[0][0] if beyond else None
            yield rows, following
            rows = more

    def _scan(self, table: str, start: bytes, stop: bytes, limit: int) -> list[tuple[bytes, dict]]:
        include_timestamp = table == self.tables.payloads

        def scan(conn) -> list[tuple[bytes, dict]]:
            rows = conn.table(table).scan(
                row_start=start or None,
                row_stop=stop or None,
                limit=limit,
                batch_size=limit,
                include_timestamp=include_timestamp,
            )
            return list(rows)

        return self.hbase.run(f"sweep scan of {table}", scan)

    # -- rows ---------------------------------------------------------------------------------

    def _message_row(self, key: bytes, data: dict, following: bytes | None, context: _Context) -> None:
        report = context.report
        report.messages_scanned += 1
        where = split_key(key)
        value = data.get(MESSAGE_COLUMN)
        if where is None or value is None:
            return
        # the newest row of its generation: no later row with the same topic and generation follows
        newest = following is None or following[: len(key) - 8] != key[: len(key) - 8]
        row = peek(value)
        verdict = message_verdict(where[1], context.topics.get(where[0]), row, newest, context.now, self.grace_ms)
        if verdict is Verdict.DROP:
            report.messages_dropped += 1
            context.deletes.append(key)
        elif verdict is Verdict.STRIP:
            report.messages_stripped += 1
            full = BatchRow.decode(value)
            stripped = dataclasses.replace(full, payloads=())  # keeps the running totals
            self._replace(key, value, stripped.encode(), "strip")
        elif row.tx_pointer is not None and row.tx_pointer in context.invalid:
            report.messages_invalidated += 1
            self._replace(key, value, with_tx_pointer(value, -row.tx_pointer), "invalid")

    def _payload_row(self, key: bytes, data: dict, _following: bytes | None, context: _Context) -> None:
        context.report.payloads_scanned += 1
        where = split_key(key)
        if where is None or not data:
            return
        written = max(ts for _, ts in data.values())
        if payload_verdict(where[1], context.topics.get(where[0]), written, context.now, self.grace_ms) is Verdict.DROP:
            context.report.payloads_dropped += 1
            context.deletes.append(key)

    # -- writing ------------------------------------------------------------------------------

    def _flush(self, table: str, context: _Context) -> Future | None:
        """Start deleting the chunk's rows in the background; the future says when they are gone."""
        keys, context.deletes = tuple(context.deletes), []
        if not keys:
            return None
        self.metrics.rows_dropped.labels("messages" if table == self.tables.messages else "payloads").inc(len(keys))
        if self.dry_run:
            return None

        def delete(conn) -> None:
            with conn.table(table).batch() as b:
                for key in keys:
                    b.delete(key)

        # deleting twice is harmless, so this may be retried
        return self._deleter.submit(self.hbase.run, f"sweep deletes in {table}", delete)

    def _settle(self, region: Region, record: RegionRecord, pending: tuple[Future | None, bytes]) -> None:
        """Wait for a chunk's deletes, then record the chunk as done (the checkpoint never runs ahead)."""
        deleting, last_key = pending
        if deleting is not None:
            deleting.result()
        if not self.dry_run:
            record.checkpoint = last_key.hex()
            self.state.save(region, record)

    def _replace(self, key: bytes, old: bytes, new: bytes, kind: str) -> None:
        """Compare-and-set one message cell: a concurrent rollback or sweep wins, the next sweep looks again."""
        self.metrics.rows_rewritten.labels(kind).inc()
        if self.dry_run:
            return
        put, table = mutation(MESSAGE_COLUMN, new), self.tables.messages.encode()
        self.hbase.run(
            f"sweep: {kind}", lambda c: c.client.checkAndPut(table, key, MESSAGE_COLUMN, old, put, {}), idempotent=False
        )

    def _compact(self, region: Region, context: _Context) -> None:
        """Ask HBase to major-compact a region after heavy deletes, so the space is really freed."""
        if self.dry_run:
            return
        self.hbase.run(f"major compaction of {region.label()}", lambda c: c.client.majorCompact(region.name))
        context.report.compactions += 1
        log.info("requested a major compaction of %s", region.label())

    def _keep_lease(self, region: Region) -> None:
        renewed = self.state.renew(region, self._lease, self.owner, self.lease_seconds, self.clock())
        if renewed is None:
            raise LeaseLost(f"lost the lease on {region.label()} (took too long between chunks?)")
        self._lease = renewed

    def _throttle(self, rows: int, began: float) -> None:
        if self.max_rows_per_second:
            ahead = rows / self.max_rows_per_second - (time.monotonic() - began)
            if ahead > 0:
                self._stop.wait(ahead)

    @staticmethod
    def _deleted(report: SweepReport) -> int:
        return report.messages_dropped + report.payloads_dropped


class LeaseLost(TmsError):
    """Another sweeper took over a region this one was sweeping; this one stops touching it."""
