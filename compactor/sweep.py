"""Sweeping: each region of the message and payload tables under a lease, in chunks, resumable from a
checkpoint, throttled, applying the rules of ``rules.py`` to every row."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from tms_hbase.errors import InvalidArgument, LeaseLost
from tms_hbase.installation.metadata import MetadataStore
from tms_hbase.installation.settings import InstallationStore
from tms_hbase.model.clock import now_ms
from tms_hbase.model.integrity import RowCheck, check_message_row, check_payload_row, is_counter_row
from tms_hbase.model.row_time import check_row_time
from tms_hbase.model.rows import (
    MESSAGE_COLUMN,
    SEQUENCE_COLUMN,
    BatchRow,
    RowHeader,
    Totals,
    generation_prefix,
    position_of,
    split_key,
    with_tx_pointer,
)
from tms_hbase.model.tail_cache import check_grace, sweeper_tail_cache
from tms_hbase.model.topic import TopicId, TopicMetadata
from tms_hbase.ordering import sequencer
from tms_hbase.publish import byte_totals, rolled_back
from tms_hbase.storage.hbase import Installation, Region, Row, Table
from tms_hbase.sweep.pruning import prune_upper_bound
from tms_hbase.sweep.state import RegionRecord, SweepState
from tms_hbase.txserver.snapshot_source import DEFAULT_MAX_AGE_SECONDS, SnapshotKeeper, SnapshotSource, StoredSnapshots

from .metrics import SweeperMetrics
from .rules import Verdict, dead_generation, message_verdict, payload_verdict, prefix_verdict
from .subscriptions import sweep_subscriptions

log = logging.getLogger(__name__)

DEFAULT_GRACE_SECONDS = 600
CHUNK = 4000
REPORTED_CORRUPT_ROWS = 100  # listed in a sweep's report and logged one by one; all are counted


@dataclass
class SweepReport:
    """What one sweep saw and did (or, in a dry run, would have done)."""

    messages_scanned: int = 0
    messages_dropped: int = 0
    messages_stripped: int = 0
    messages_invalidated: int = 0  # write pointer +p rewritten to -p (p on the invalid list)
    messages_future_dated: int = 0  # dated beyond the clock-skew bound: their TTL counts from when stored
    skip_markers_indexed: int = 0  # skip markers found missing from their generation's skip index, added
    payloads_scanned: int = 0
    payloads_dropped: int = 0
    invalid_transactions: int = 0  # size of the invalid list the sweep used
    tx_snapshot_source: str = ""  # where the transaction state came from
    tx_snapshot_age_seconds: float | None = None  # age of the view last used (None: there was none)
    invalid_list_skipped: bool = False  # the view was missing or too old: no rows were marked invalid
    regions_swept: int = 0
    regions_skipped: int = 0  # leased by another sweeper
    regions_resumed: int = 0  # continued from a checkpoint
    compactions: int = 0
    corrupt_rows: int = 0  # rows that do not decode: left in place, logged and counted
    corrupt: list[dict] = field(default_factory=list)  # the first REPORTED_CORRUPT_ROWS of them
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
    skew_ms: int = 0  # the installation's clock-skew bound (its tail-cache time), read once per chunk
    region: str = ""  # label of the region being swept
    corrupt_topics: set[bytes] = field(default_factory=set)  # corrupt metadata rows reported this sweep
    topics_loaded: float = 0.0  # time.monotonic() of the last metadata read
    tx_snapshot: object = None  # the view of the transaction state in use
    tx_stale: bool = True  # no view of the transaction state, or a too old one: no invalid-list work
    region_tx_stale: bool = False  # some chunk of the current region was swept with tx_stale
    # sequencer generations of this region: is nothing left below the current row? (prefix deletes only)
    prefix_gone: dict[tuple[TopicId, int], bool] = field(default_factory=dict)
    low_water: dict[tuple[TopicId, int], int] = field(default_factory=dict)  # to raise before this chunk's deletes
    # sequencer generations of this region: the positions their skip index holds (read once per region)
    skip_index: dict[tuple[TopicId, int], set[int]] = field(default_factory=dict)
    unindexed: dict[tuple[TopicId, int], dict[int, int]] = field(default_factory=dict)  # position: span, to index


class Sweeper:
    """Applies the cleanup rules to every row of one tms-hbase installation (one table prefix).

    Several sweepers may run at once: a region is swept only under its lease. A sweep stopped
    midway (``stop()``, SIGTERM, SIGKILL) leaves a checkpoint the next sweep of that region resumes from.

    ``grace_seconds`` below the installation's minimum (4 x its tail-cache seconds) is refused with
    InvalidArgument, here and again before every chunk, as the setting may change (docs/guarantees.md).
    """

    def __init__(
        self,
        installation: Installation,
        *,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        dry_run: bool = False,
        clock: Callable[[], int] = now_ms,
        owner: str | None = None,
        lease_seconds: float = 60.0,
        max_rows_per_second: float | None = None,
        compact_after: int = 10_000,
        chunk_rows: int = CHUNK,
        metadata_refresh_seconds: float = 30.0,
        snapshot_refresh_seconds: float = 30.0,
        max_snapshot_age: float = DEFAULT_MAX_AGE_SECONDS,
        tx_source: SnapshotSource | None = None,
        metrics: SweeperMetrics | None = None,
    ) -> None:
        if isinstance(grace_seconds, bool) or not isinstance(grace_seconds, (int, float)) or not grace_seconds >= 0:
            raise InvalidArgument(f"bad grace {grace_seconds!r}: expected seconds >= 0")
        self.installation = installation
        self.grace_seconds = grace_seconds
        self.grace_ms = int(grace_seconds * 1000)
        self.dry_run = dry_run
        self.clock = clock
        self.owner = owner or f"sweeper-{uuid.uuid4().hex[:8]}"
        self.lease_seconds = lease_seconds
        self.max_rows_per_second = max_rows_per_second
        self.compact_after = compact_after
        self.chunk_rows = chunk_rows
        # seconds after which topic metadata and the transaction state are re-read
        self.metadata_refresh = metadata_refresh_seconds
        self.tx_snapshots = SnapshotKeeper(
            tx_source or StoredSnapshots(installation.txstate, clock),
            refresh_seconds=snapshot_refresh_seconds,
            max_age_seconds=max_snapshot_age,
        )
        self.metrics = metrics or SweeperMetrics()
        self.metadata = MetadataStore(installation.metadata)
        self.state = SweepState(installation.txstate)
        self.settings = InstallationStore(installation.metadata)
        self.check_installation()  # refuse an unsafe grace before anything is swept
        self._stop = threading.Event()
        self._deleter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweep-deletes")

    def check_installation(self) -> int:
        """Check the grace against the installation's tail-cache setting (InvalidArgument, naming the
        minimum, if it is too small); returns the clock-skew bound to use, in ms."""
        now = self.clock()
        setting = self.settings.read()
        check_grace(self.grace_seconds, setting, now)
        return sweeper_tail_cache(setting, now) * 1000

    def _load_topics(self, context: _Context) -> None:
        """Every topic's metadata. A topic whose row does not decode is unknown to the sweep, so its
        data is left alone (never deleted on a guess); the row is reported once per sweep."""
        found = self.metadata.scan(include_deleted=True)
        context.topics = {m.topic: m for m in found.topics}
        context.topics_loaded = time.monotonic()
        for check in found.corrupt:
            if check.key not in context.corrupt_topics:
                context.corrupt_topics.add(check.key)
                self._quarantine(check, self.installation.metadata.name, context)

    def _load_tx_state(self, context: _Context, force: bool = False) -> None:
        """The invalid list and prune bound from the snapshot source (refreshed when due). A view that is
        missing or older than the bound stops invalid-list work, loudly, until a good one comes."""
        keeper, report = self.tx_snapshots, context.report
        was_stale = context.tx_stale
        snapshot = keeper.refresh(force)
        age = keeper.age_seconds()
        report.tx_snapshot_source, report.tx_snapshot_age_seconds = keeper.describe(), age
        if age is not None:
            self.metrics.snapshot_age.set(age)
        context.tx_stale = keeper.stale()
        if context.tx_stale or snapshot is None:
            context.invalid, context.prune_bound, context.read_pointer = frozenset(), 0, 0
            report.invalid_list_skipped = True
            if not was_stale or force:
                log.error(
                    "sweeper %s stops invalid-list work: the transaction state from %s is %s (bound %.0f s); "
                    "no rows are marked invalid and no prune bounds recorded until a fresh one is read",
                    self.owner,
                    keeper.describe(),
                    "missing" if age is None else f"{age:.0f} s old",
                    keeper.max_age_seconds,
                )
            return
        if snapshot is context.tx_snapshot and not was_stale:
            return
        context.tx_snapshot = snapshot
        context.invalid = frozenset(snapshot.invalid)
        context.prune_bound, context.read_pointer = prune_upper_bound(snapshot), snapshot.read_pointer
        report.invalid_transactions = len(context.invalid)
        log.info(
            "sweeper %s uses transaction state from %s (%.0f s old): %d invalid, read pointer %d",
            self.owner,
            keeper.describe(),
            age,
            len(context.invalid),
            snapshot.read_pointer,
        )

    def _refresh(self, context: _Context) -> None:
        now = time.monotonic()
        if now - context.topics_loaded >= self.metadata_refresh:
            self._load_topics(context)
        self._load_tx_state(context)
        context.region_tx_stale |= context.tx_stale

    def _report_lag(self, regions: list[Region]) -> None:
        """Seconds since each region's last complete sweep, for the region-lag gauge (regions as they are now:
        the series of a region split or merged away goes; a region never swept has none yet)."""
        now = self.clock()
        records = {t.name: self.state.records(t.name) for t in (self.installation.messages, self.installation.payloads)}
        lags = {}
        for region in regions:
            record = records[region.table].get(region.start)
            if record is not None and record.completed is not None:
                lags[region.label()] = max(0, now - record.completed) / 1000
        self.metrics.set_region_lags(lags)

    def close(self) -> None:
        """Let go of the transaction-state source (a connection to the transaction server)."""
        self.tx_snapshots.close()

    def stop(self) -> None:
        """Finish the current chunk, save the checkpoint, release the lease, and return."""
        self._stop.set()

    def regions(self) -> list[Region]:
        """The work units of a sweep: every region of the message table, then of the payload table."""
        return [r for table in (self.installation.messages, self.installation.payloads) for r in table.regions()]

    def sweep_once(self) -> SweepReport:
        """Sweep every region of both tables once; topic metadata and the transaction state are
        re-read during the sweep when older than their refresh intervals."""
        regions = self.regions()
        self._report_lag(regions)
        report = self.sweep_regions(regions)
        if not report.stopped:
            topics = {m.topic: m for m in self.metadata.list(include_deleted=True)}
            subscriptions = self.installation.table("subscriptions")
            report.subscriptions_dropped = sweep_subscriptions(subscriptions, topics, split_key, self.dry_run)
        return report

    def sweep_regions(self, regions: list[Region]) -> SweepReport:
        """Sweep these regions (each under its lease): a whole sweep, or one Spark task's share of it."""
        started = time.monotonic()
        context = _Context(topics={}, invalid=frozenset(), prune_bound=0, read_pointer=0, report=SweepReport())
        context.report.dry_run = self.dry_run
        self._load_topics(context)
        self._load_tx_state(context, force=True)
        for region in regions:
            if self._stop.is_set():
                context.report.stopped = True
                break
            handle = self._message_row if self._is_messages(region) else self._payload_row
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
        except InvalidArgument:  # the grace became unsafe mid-sweep: leave the region to others at once
            self.state.release(region, self._lease)
            raise
        self.state.release(region, self._lease)

    def _sweep_region(self, region: Region, handle: Callable, context: _Context) -> None:
        record = self.state.record(region)
        context.region = region.label()
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
        context.region_tx_stale = context.tx_stale
        context.prefix_gone, context.skip_index = {}, {}
        kind = "messages" if self._is_messages(region) else "payloads"
        pending: tuple[Future | None, bytes] | None = None  # a chunk's deletes in flight, and its last key
        for chunk, following in self._chunks(region, start):
            self._refresh(context)
            context.skew_ms = self.check_installation()
            context.now = self.clock()
            for i, (key, data) in enumerate(chunk):
                handle(key, data, chunk[i + 1][0] if i + 1 < len(chunk) else following, context)
            rows_seen += len(chunk)
            self.metrics.rows_scanned.labels(kind).inc(len(chunk))
            deleting = self._flush(region, context)  # runs while the next chunk is read
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
        if self.dry_run:  # gone through (what it would do is counted), but no progress is recorded
            context.report.regions_swept += 1
            return
        record.checkpoint = None
        record.completed, record.rows = self.clock(), rows_seen
        if self._is_messages(region) and not context.region_tx_stale:  # else the old bound stays
            record.prune_bound, record.read_pointer = region_bound, region_read_pointer
        self.state.save(region, record)
        context.report.regions_swept += 1
        self.metrics.regions.labels("swept").inc()
        if self._deleted(context.report) - deletes_before >= self.compact_after:
            self._compact(region, context)

    def _is_messages(self, region: Region) -> bool:
        return region.table == self.installation.messages.name

    def _table(self, region: Region) -> Table:
        return self.installation.messages if self._is_messages(region) else self.installation.payloads

    def _chunks(self, region: Region, start: bytes) -> Iterator[tuple[list[Row], bytes | None]]:
        """The region's rows from ``start`` in chunks, each with the key of the row after it (the
        next row of the table, even in the next region, so 'newest of its generation' is right).
        Cells come as (value, HBase timestamp): when they were stored."""
        table = self._table(region)
        rows = table.scan(start, region.end, limit=self.chunk_rows, timestamps=True)
        while rows:
            after = rows[-1][0] + b"\0"
            full = len(rows) == self.chunk_rows
            more = table.scan(after, region.end, limit=self.chunk_rows, timestamps=True) if full else []
            if more:
                following: bytes | None = more[0][0]
            else:
                beyond = table.scan(region.end, limit=1) if region.end else []
                following = beyond[0][0] if beyond else None
            yield rows, following
            rows = more

    # -- rows ---------------------------------------------------------------------------------

    def _message_row(self, key: bytes, data: dict, following: bytes | None, context: _Context) -> None:
        report = context.report
        report.messages_scanned += 1
        if is_counter_row(key, data):  # a generation's counter row: it goes with its generation
            if self._dead(key, context):
                report.messages_dropped += 1
                context.deletes.append(key)
            else:
                where = split_key(key)
                assert where is not None
                context.skip_index[where] = sequencer.indexed_positions(data)
                # a bytes checkpoint near the tail, so stats read few rows to reach it (a sequencer generation's
                # counter row has its offset counter; a chain generation's holds only its rollback index)
                if not self.dry_run and SEQUENCE_COLUMN in data:
                    byte_totals.advance(self.installation.messages, self.installation.payloads, *where)
            return
        check = check_message_row(key, {column: cell[0] for column, cell in data.items()})
        if check.header is None:
            if self._dead(key, context):
                report.messages_dropped += 1
                context.deletes.append(key)
            else:
                self._quarantine(check, context.region, context)
            return
        row, (value, stored) = check.header, data[MESSAGE_COLUMN]
        assert check.topic is not None and check.generation is not None
        timing = check_row_time(row, stored, context.skew_ms)
        if timing.future_dated:
            self._future_dated((check.topic, check.generation), key, timing.ahead_ms, context)
        meta = context.topics.get(check.topic)
        # the newest row of its generation: no later row with the same topic and generation follows
        newest = following is None or following[: len(key) - 8] != key[: len(key) - 8]
        verdict = message_verdict(
            check.generation, meta, row, newest, context.now, self.grace_ms, time_ms=timing.effective_time
        )
        if meta is not None and meta.sequencer and meta.generation == check.generation:
            verdict = self._prefix(key, check.topic, check.generation, row, verdict, stored, context)
        if verdict is Verdict.DROP:
            report.messages_dropped += 1
            context.deletes.append(key)
            return
        if row.skip and meta is not None and meta.sequencer and meta.generation == check.generation:
            self._check_indexed((check.topic, check.generation), position_of(key), row, context)
        if verdict is Verdict.STRIP:
            report.messages_stripped += 1
            full = BatchRow.decode(value)
            totals = full.totals
            if full.span is not None:  # a sequencer row keeps what it held, for its generation's byte totals
                totals = Totals(len(full.payloads), sum(map(len, full.payloads)))
            stripped = dataclasses.replace(full, payloads=(), totals=totals)  # (a chain row keeps its running totals)
            self._replace(key, value, stripped.encode(), "strip")
        elif row.tx_pointer is not None and row.tx_pointer in context.invalid:
            report.messages_invalidated += 1
            if not self.dry_run:  # indexed before the flip, as a rollback does (publish/rolled_back.py)
                rolled_back.index(self.installation.messages, check.topic, check.generation, position_of(key))
            self._replace(key, value, with_tx_pointer(value, -row.tx_pointer), "invalid")

    def _prefix(
        self,
        key: bytes,
        topic: TopicId,
        generation: int,
        row: RowHeader,
        verdict: Verdict,
        stored: int,
        context: _Context,
    ) -> Verdict:
        """Apply the prefix rule of a live sequencer generation (rules.prefix_verdict); a row dropped
        moves the generation's low-water mark past it (raised before the chunk's deletes are sent)."""
        where = (topic, generation)
        gone = context.prefix_gone.get(where)
        if gone is None:  # the first row of the generation in this region: is anything left below it?
            below = self.installation.messages.scan(key, generation_prefix(topic, generation), limit=2, reverse=True)
            gone = not [k for k, _ in below if k < key]
        verdict = prefix_verdict(verdict, row, gone, stored, context.now, self.grace_ms)
        context.prefix_gone[where] = verdict is Verdict.DROP and gone
        if context.prefix_gone[where]:
            context.low_water[where] = row.next_position(position_of(key))
        return verdict

    def _check_indexed(self, where: tuple[TopicId, int], position: int, row: RowHeader, context: _Context) -> None:
        """Note a live skip marker that its generation's skip index lacks (its filler died, or HBase failed,
        between putting the marker and indexing it), to be indexed with the chunk: counts and lag subtract
        only indexed markers, so this is what makes them exact again after such a loss."""
        known = context.skip_index.get(where)
        if known is None:  # the counter row sorts before this region, or the sweep resumed past it
            known = context.skip_index[where] = sequencer.index_of(self.installation.messages, *where)
        if position in known:
            return
        known.add(position)
        context.unindexed.setdefault(where, {})[position] = row.span or 1
        context.report.skip_markers_indexed += 1
        self.metrics.skips_indexed.inc()

    def _future_dated(self, where: tuple[TopicId, int], key: bytes, ahead_ms: int, context: _Context) -> None:
        context.report.messages_future_dated += 1
        self.metrics.future_dated.inc()
        log.warning(
            "message row of %s, generation %d, position %d is dated %.1f s after HBase stored it (more than "
            "2 x the %d s clock-skew bound): its TTL counts from when it was stored",
            where[0],
            where[1],
            position_of(key),
            ahead_ms / 1000,
            context.skew_ms // 1000,
        )

    def _payload_row(self, key: bytes, data: dict, _following: bytes | None, context: _Context) -> None:
        context.report.payloads_scanned += 1
        check = check_payload_row(key, data)
        if not check.ok:
            if self._dead(key, context):
                context.report.payloads_dropped += 1
                context.deletes.append(key)
            else:
                self._quarantine(check, context.region, context)
            return
        assert check.topic is not None and check.generation is not None
        written = max(ts for _, ts in data.values())
        meta = context.topics.get(check.topic)
        if payload_verdict(check.generation, meta, written, context.now, self.grace_ms) is Verdict.DROP:
            context.report.payloads_dropped += 1
            context.deletes.append(key)

    @staticmethod
    def _dead(key: bytes, context: _Context) -> bool:
        """True if the key starts with a generation its topic has left: a row there goes even if it
        does not decode (sound rows get the same answer from the rules)."""
        where = split_key(key)
        return where is not None and bool(dead_generation(where[1], context.topics.get(where[0])))

    def _quarantine(self, check: RowCheck, place: str, context: _Context) -> None:
        """Leave a row that does not decode where it is, and say so: in the log (topic, generation,
        position, and ``place``: the region, or the metadata table), in the report and in the
        corrupt-rows metric. The sweep goes on."""
        report = context.report
        report.corrupt_rows += 1
        self.metrics.corrupt_rows.labels(check.table).inc()
        if report.corrupt_rows > REPORTED_CORRUPT_ROWS:
            return
        report.corrupt.append({**check.as_dict(), "region": place})
        log.warning("corrupt row left in place: %s in %s: %s", check.where(), place, check.reason)
        if report.corrupt_rows == REPORTED_CORRUPT_ROWS:
            log.warning("more corrupt rows in this sweep are counted but not logged one by one")

    # -- writing ------------------------------------------------------------------------------

    def _flush(self, region: Region, context: _Context) -> Future | None:
        """Start deleting the chunk's rows in the background; the future says when they are gone."""
        keys, context.deletes = tuple(context.deletes), []
        raised, context.low_water = context.low_water, {}
        unindexed, context.unindexed = context.unindexed, {}
        if not self.dry_run:  # readers must know these offsets are swept before they are
            messages, payloads = self.installation.messages, self.installation.payloads
            for (topic, generation), offset in raised.items():
                # the bytes below the new low-water mark, counted while the rows are still there
                byte_totals.checkpoint_at(messages, payloads, topic, generation, offset)
                sequencer.raise_low_water(messages, topic, generation, offset)
                sequencer.prune_skips(messages, topic, generation, offset)
                byte_totals.prune(messages, topic, generation, offset)
            for (topic, generation), spans in unindexed.items():
                log.info(
                    "indexing %d skip markers of %s (generation %d) from offset %d that their fillers left unindexed",
                    len(spans),
                    topic,
                    generation,
                    min(spans),
                )
                sequencer.index_skips(self.installation.messages, topic, generation, spans)
        if not keys:
            return None
        self.metrics.rows_dropped.labels("messages" if self._is_messages(region) else "payloads").inc(len(keys))
        if self.dry_run:
            return None

        return self._deleter.submit(self._table(region).delete_many, keys)

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
        self.installation.messages.compare_and_set(key, MESSAGE_COLUMN, old, new)

    def _compact(self, region: Region, context: _Context) -> None:
        """Ask HBase to major-compact a region after heavy deletes, so the space is really freed."""
        if self.dry_run:
            return
        self._table(region).major_compact(region)
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
