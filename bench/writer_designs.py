"""The designs for many writers on one topic, measured side by side (1 and 4 writer processes).

Six ways of putting the same batches (100 × 1 KiB, one cell per batch, the row format of
``tms_hbase.model.rows``) into HBase, each trial on a fresh topic (or fresh key range):

* ``tms``: the current library (``MessagingClient.publish``): the conditional-append chain, where a
  loser reads the winner's whole row and walks on (docs/ordering.md);
* ``raw``: one blind put of the batch cell per publish at a key of the writer's own: no order at all,
  the ceiling of this architecture (and the write path of per-writer lanes, Scalog's design);
* ``seq``: a sequencer prototype (CORFU/Tango): an HBase atomic increment reserves the position, a
  checkAndPut-if-absent writes the batch there; a reader that meets a reserved but empty position
  below a written one waits for it, then fills it with a skip marker (also checkAndPut-if-absent, so
  exactly one of the filler and the slow writer wins; a writer that lost re-reserves);
* ``seqp``: the sequencer with the next position reserved while the current batch is written (only
  while the writer is busy; an idle writer's spare is released with its own skip marker);
* ``seqb``: the sequencer for a writer with 4 publishes queued: one increment by 4 reserves them all;
* ``claim``: the chain with header-only contention control: a small claim cell (the batch's header)
  is checkAndPut-if-absent at ``tail + 1``; a loser reads only the winner's claim cell, backs off for a
  random time and tries the next position; the winner then puts the payload cell into its row. Thrift1's
  checkAndPut writes one cell, so header-only reads need the claim and the payloads in two cells, and a
  claimed row is empty until the second put: the same hole a sequencer has.

Then 4 paced writers (1,000 msg/s in all) publish stamped messages for ``tms``, ``seq`` and ``seqp``
while one reader tails the topic without ever passing a missing position: publish→visible.
After every prototype trial the rows are read back and checked: dense positions, every acknowledged
batch exactly once (:func:`check_density`). HBase calls are counted per process (every Thrift request).
The prototypes live here, not in ``tms_hbase``: they decide which design the library should take.
"""

from __future__ import annotations

import math
import os
import random
import struct
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import happybase

from tms_hbase import TopicId
from tms_hbase.model.rows import BatchRow, generation_prefix, peek
from tms_hbase.storage.connection import mutation

from .common import (
    RAW_COLUMN,
    RawConnection,
    Result,
    RpcCounter,
    Settings,
    bench_tables,
    create_raw_table,
    median,
    new_topic,
    payloads,
    percentile,
    progress,
    ratio,
    send_time_of,
    stamped,
    wait_until,
)
from .procs import Workers

BATCH = 100
PAYLOAD_SIZE = 1024
WRITERS = 4
KINDS = ("tms", "raw", "seq", "seqp", "seqb", "claim")
BLOCK = 4  # publishes queued per writer in the "seqb" trials
PACED_KINDS = ("tms", "seq", "seqp")
COUNTER_COLUMN = b"d:c"
CLAIM_COLUMN = b"d:h"  # the claim chain's header cell (its payload cell is RAW_COLUMN, d:m)
SKIP_WRITER = b"\0" * 16  # writer id of a skip marker: a filled hole, no messages
PACED_BATCH = 10  # with 4 writers, one batch each per 40 ms: 1,000 msg/s
PACED_INTERVAL = 0.04
HOLE_WAIT = 0.5  # seconds a reader waits on a reserved but empty position before filling it
BACKOFF = 0.002  # the claim chain's longest random pause after a lost race, doubled per loss in a row
_POS = struct.Struct(">Q")


def row_key(prefix: bytes, position: int) -> bytes:
    return prefix + _POS.pack(position)


def skip_marker(publish_time: int) -> bytes:
    """The cell of a filled hole: a batch row of the skip writer, without messages."""
    return BatchRow(publish_time=publish_time, writer_id=SKIP_WRITER, batch_no=0).encode()


def _put_if_absent(conn: happybase.Connection, table: str, key: bytes, column: bytes, value: bytes) -> bool:
    return conn.client.checkAndPut(table.encode(), key, column, None, mutation(column, value), {})


# -- the sequencer --------------------------------------------------------------------------------


class SequencerWriter:
    """Reserve a position with an atomic increment, write the batch there with checkAndPut-if-absent.

    ``reserve`` and ``write`` are separate so a test can stop between them, as a writer that dies there
    does. A write that loses (a reader filled the position with a skip marker) reserves again.
    """

    def __init__(self, conn: happybase.Connection, table: str, prefix: bytes, writer_id: bytes | None = None) -> None:
        self.conn, self.table, self.prefix = conn, table, prefix
        self.writer_id = writer_id or uuid.uuid4().bytes
        self.batch_no = 0
        self.last_time = 0
        self.lost = 0  # writes refused because the position had been filled meanwhile

    def reserve(self) -> int:
        return self.conn.table(self.table).counter_inc(self.prefix, COUNTER_COLUMN, 1)

    def write(self, position: int, cell: bytes) -> bool:
        return _put_if_absent(self.conn, self.table, row_key(self.prefix, position), RAW_COLUMN, cell)

    def encode(self, batch: Sequence[bytes]) -> bytes:
        """The next batch's cell; its publish time is this writer's clock before it reserves."""
        self.batch_no += 1
        self.last_time = max(self.last_time, int(time.time() * 1000))
        return BatchRow(self.last_time, self.writer_id, self.batch_no, tuple(batch)).encode()

    def publish(self, batch: Sequence[bytes]) -> int:
        return self.publish_cell(self.encode(batch))

    def publish_cell(self, cell: bytes) -> int:
        """Reserve and write until a position is won (lost only to a skip marker filled meanwhile)."""
        while True:
            position = self.reserve()
            if self.write(position, cell):
                return position
            self.lost += 1


class BlockSequencerWriter(SequencerWriter):
    """The sequencer for a writer with several publishes queued (threads sharing a writer, an
    BackgroundPublisher with a backlog, a Spark task): one increment by m reserves m positions, then each
    batch is written at its own with checkAndPut-if-absent: 1 + 1/m calls per publish."""

    def publish_many(self, batches: Sequence[Sequence[bytes]]) -> None:
        cells = [self.encode(batch) for batch in batches]
        last = self.conn.table(self.table).counter_inc(self.prefix, COUNTER_COLUMN, len(cells))
        for position, cell in zip(range(last - len(cells) + 1, last + 1), cells, strict=True):
            if not self.write(position, cell):
                self.lost += 1
                self.publish_cell(cell)


class PipelinedSequencerWriter(SequencerWriter):
    """The sequencer with the next position reserved while the current batch is written.

    While the writer is busy (a publish begins within ``max_idle`` seconds of the previous one's end),
    the increment for the next publish runs on a second connection during this publish's checkAndPut,
    so it pays about one round trip per publish. A spare still untaken ``max_idle`` seconds after the
    writer went idle is released by the background thread with a skip marker of the writer's own, so
    an idle writer holds readers up for that long at most; a writer that publishes now and then
    reserves no spare at all.
    """

    def __init__(self, conn: happybase.Connection, table: str, prefix: bytes, address: str) -> None:
        super().__init__(conn, table, prefix)
        host, port = address.rsplit(":", 1)
        self._side = happybase.Connection(host, int(port), timeout=30_000)
        self._pool = ThreadPoolExecutor(1)
        self._cond = threading.Condition()
        self._spare: int | None = None  # a reserved position nobody has taken yet
        self._pending = False  # a spare is being reserved or waits to be taken
        self._idle_since: float | None = -math.inf  # None while a publish runs
        self.max_idle = 0.005
        self.released = 0  # spares released unused (skip markers of this writer)

    def _spare_job(self) -> None:
        try:
            position = self._side.table(self.table).counter_inc(self.prefix, COUNTER_COLUMN, 1)
        except BaseException:
            with self._cond:
                self._pending = False  # the publish waiting for it reserves on its own
                self._cond.notify_all()
            raise
        with self._cond:
            self._spare = position
            self._cond.notify_all()
            while self._spare == position:
                idle = self._idle_since
                left = None if idle is None else idle + self.max_idle - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._cond.wait(left)
            if self._spare != position:
                return  # taken by a publish
            self._spare, self._pending = None, False
            self.released += 1
        _put_if_absent(self._side, self.table, row_key(self.prefix, position), RAW_COLUMN, skip_marker(self.last_time))

    def publish(self, batch: Sequence[bytes]) -> int:
        cell = self.encode(batch)
        with self._cond:
            busy = self._idle_since is not None and time.monotonic() - self._idle_since < self.max_idle
            self._idle_since = None
            while self._spare is None and self._pending:
                self._cond.wait()
            spare, self._spare, self._pending = self._spare, None, busy
            self._cond.notify_all()
        try:
            if busy:
                self._pool.submit(self._spare_job)
            while True:
                position = self.reserve() if spare is None else spare
                spare = None
                if self.write(position, cell):
                    return position
                self.lost += 1
        finally:
            with self._cond:
                self._idle_since = time.monotonic()
                self._cond.notify_all()

    def close(self) -> None:
        """Release the spare position now (a skip marker), so no reader waits for it."""
        with self._cond:
            self.max_idle = 0.0
            self._cond.notify_all()
        self._pool.shutdown(wait=True)
        self._side.close()


@dataclass
class Fill:
    """What a reader did about holes: positions it met empty, those it filled with skip markers, and
    the longest wait."""

    met: list[int] = field(default_factory=list)
    filled: list[int] = field(default_factory=list)
    waited: float = 0.0


def read_dense(
    conn: happybase.Connection,
    table: str,
    prefix: bytes,
    column: bytes = RAW_COLUMN,
    hole_wait: float = HOLE_WAIT,
    fill: Fill | None = None,
) -> list[tuple[int, bytes]]:
    """Every row from position 1 to the last written one, in order, with no position missing.

    A position that is empty below a written one is reserved (or claimed) and not yet written: the
    reader scans it again until it has waited ``hole_wait`` seconds, then puts a skip marker there
    with checkAndPut-if-absent. Exactly one of that fill and the slow writer's own put succeeds, and
    the reader reads whichever did.
    """
    fill = fill if fill is not None else Fill()
    t = conn.table(table)
    stop = prefix + b"\xff" * 8 + b"\0"
    scan = t.scan(row_start=row_key(prefix, 1), row_stop=stop, columns=[column], batch_size=32)
    rows = [(int.from_bytes(k[-8:], "big"), v[column]) for k, v in scan if column in v]
    out: list[tuple[int, bytes]] = []
    expected = 1
    for position, cell in rows:
        while expected < position:  # a hole below a written row
            out.append((expected, _wait_or_fill(conn, table, prefix, column, expected, out, hole_wait, fill)))
            expected += 1
        out.append((position, cell))
        expected = position + 1
    return out


def _wait_or_fill(
    conn: happybase.Connection,
    table: str,
    prefix: bytes,
    column: bytes,
    position: int,
    before: list[tuple[int, bytes]],
    hole_wait: float,
    fill: Fill,
) -> bytes:
    key = row_key(prefix, position)
    t = conn.table(table)
    fill.met.append(position)
    started = time.monotonic()
    while time.monotonic() - started < hole_wait:
        cell = t.row(key, columns=[column]).get(column)
        if cell is not None:
            fill.waited = max(fill.waited, time.monotonic() - started)
            return cell
        time.sleep(0.01)
    fill.waited = max(fill.waited, time.monotonic() - started)
    predecessor = peek(before[-1][1]).publish_time if before else 0
    marker = skip_marker(predecessor)  # the predecessor's time keeps publish times non-decreasing
    if _put_if_absent(conn, table, key, column, marker):
        fill.filled.append(position)
        return marker
    return t.row(key, columns=[column])[column]  # the slow writer won the race


@dataclass
class Density:
    """What :func:`check_density` found."""

    rows: int = 0
    batches: int = 0
    skips: int = 0
    gaps: list[int] = field(default_factory=list)  # positions missing below the last row
    duplicates: list[tuple[bytes, int]] = field(default_factory=list)  # (writer id, batch no) stored twice
    missing: list[tuple[bytes, int]] = field(default_factory=list)  # acknowledged, not stored
    unacknowledged: int = 0  # stored batches nobody acknowledged (a writer killed before its answer)
    decreasing: int = 0  # rows dated below the latest time before them (the sequencer allows it)
    backstep_ms: int = 0  # the largest such step back

    @property
    def ok(self) -> bool:
        """Dense and exactly once (a decreasing time is reported, not judged: designs differ there)."""
        return not (self.gaps or self.duplicates or self.missing)


def check_density(rows: Iterable[tuple[int, bytes]], acknowledged: Iterable[tuple[bytes, int]] = ()) -> Density:
    """Check rows (position, batch cell) read in order: positions 1, 2, 3… with none missing, every
    acknowledged (writer id, batch number) exactly once; count rows dated below the latest time before them."""
    result = Density()
    seen: Counter[tuple[bytes, int]] = Counter()
    expected, last_time = 1, None
    for position, cell in rows:
        result.gaps.extend(range(expected, position))
        expected = position + 1
        header = peek(cell)
        result.rows += 1
        if last_time is not None and header.publish_time < last_time:
            result.decreasing += 1
            result.backstep_ms = max(result.backstep_ms, last_time - header.publish_time)
        last_time = header.publish_time if last_time is None else max(last_time, header.publish_time)
        if header.writer_id == SKIP_WRITER:
            result.skips += 1
            continue
        result.batches += 1
        seen[(header.writer_id, header.batch_no)] += 1
    result.duplicates = sorted(b for b, n in seen.items() if n > 1)
    acked = set(acknowledged)
    result.missing = sorted(acked - set(seen))
    result.unacknowledged = len(set(seen) - acked)
    return result


# -- the claim chain --------------------------------------------------------------------------------


class ClaimChainWriter:
    """Claim ``tail + 1`` with a small header cell (checkAndPut-if-absent), then put the payload cell.

    A loser reads only the winner's claim (for its publish time), pauses for a random time below a
    bound that doubles with every loss in a row, and claims the next position. Publish time is
    ``max(now, predecessor's)``, as in the library.
    """

    def __init__(self, conn: happybase.Connection, table: str, prefix: bytes) -> None:
        self.conn, self.table, self.prefix = conn, table, prefix
        self.writer_id = uuid.uuid4().bytes
        self.batch_no = 0
        self.tail, self.tail_time = 0, 0
        self.lost = 0

    def _read_tail(self) -> None:
        stop = self.prefix
        rows = list(
            self.conn.table(self.table).scan(
                row_start=self.prefix + b"\xff" * 8, row_stop=stop, reverse=True, limit=1, columns=[CLAIM_COLUMN]
            )
        )
        if rows:
            key, data = rows[0]
            self.tail, self.tail_time = int.from_bytes(key[-8:], "big"), peek(data[CLAIM_COLUMN]).publish_time

    def publish(self, batch: Sequence[bytes]) -> int:
        self.batch_no += 1
        if self.tail == 0:
            self._read_tail()
        position, predecessor = self.tail + 1, self.tail_time
        while True:
            position, publish_time = self._claim(position, predecessor)
            # A reader that gave up waiting fills the payload cell with a skip marker, so this put is
            # if-absent too; lost to a skip, the batch is claimed again further on.
            self.tail, self.tail_time = position, publish_time
            cell = BatchRow(publish_time, self.writer_id, self.batch_no, tuple(batch)).encode()
            if _put_if_absent(self.conn, self.table, row_key(self.prefix, position), RAW_COLUMN, cell):
                return position
            self.lost += 1
            position, predecessor = position + 1, publish_time

    def _claim(self, position: int, predecessor: int) -> tuple[int, int]:
        """Claim the first free position from ``position`` on; returns it and the batch's publish time."""
        losses = 0
        while True:
            publish_time = max(int(time.time() * 1000), predecessor)
            claim = BatchRow(publish_time, self.writer_id, self.batch_no).encode()
            key = row_key(self.prefix, position)
            if _put_if_absent(self.conn, self.table, key, CLAIM_COLUMN, claim):
                return position, publish_time
            self.lost += 1
            losses += 1
            winner = self.conn.table(self.table).row(key, columns=[CLAIM_COLUMN])[CLAIM_COLUMN]
            position, predecessor = position + 1, peek(winner).publish_time
            time.sleep(random.uniform(0, BACKOFF * 2 ** min(losses - 1, 4)))


# -- worker jobs ------------------------------------------------------------------------------------

_open: dict[tuple[str, str], tuple[object, RawConnection, list[bytes]]] = {}  # per worker process


def write_for(
    address: str,
    prefix: str,
    raw_name: str,
    kind: str,
    worker: int,
    topic: str,
    start_at: float,
    duration: float,
    interval: float = 0.0,
) -> tuple[int, float, int, int, int, list[tuple[bytes, int]]]:
    """Worker job: publish batches of ``kind`` on ``topic`` from ``start_at`` for ``duration`` s, back to
    back, or with ``interval`` one batch of :data:`PACED_BATCH` payloads stamped with their send time
    every ``interval`` seconds.

    Returns (messages, end time, Thrift calls, publishes, lost races or refused writes, acknowledged
    (writer id, batch no) of the prototypes).
    """
    from tms_hbase import MessagingClient

    RpcCounter.install()
    if (address, prefix) not in _open:
        client = MessagingClient(address, prefix=prefix, create_tables=False)
        _open[(address, prefix)] = (client, RawConnection(Settings(address=address)), payloads(BATCH, PAYLOAD_SIZE))
    client, raw, batch = _open[(address, prefix)]
    conn = raw.conn
    key_prefix = f"{kind}:{topic}:".encode()
    acked: list[tuple[bytes, int]] = []
    lost = 0
    if kind == "tms":
        topic_id = TopicId.parse(topic)
        client.get_topic(topic_id)  # connection open and metadata cached before the clock starts
        client.publish(topic_id, batch[:1])  # and the installation's settings read
    elif kind == "seq":
        writer = SequencerWriter(conn, raw_name, key_prefix)
    elif kind == "seqp":
        writer = PipelinedSequencerWriter(conn, raw_name, key_prefix, address)
    elif kind == "seqb":
        writer = BlockSequencerWriter(conn, raw_name, key_prefix)
    elif kind == "claim":
        writer = ClaimChainWriter(conn, raw_name, key_prefix)
    cell = BatchRow(0, uuid.uuid4().bytes, 0, tuple(batch)).encode()
    raw_prefix = f"{key_prefix.decode()}{worker}:".encode()
    wait_until(start_at)
    calls = RpcCounter.count
    end_at = start_at + duration
    count = 0
    while time.time() < end_at:
        if interval:
            wait_until(start_at + count * interval)
            batch = [stamped(time.time(), PAYLOAD_SIZE) for _ in range(PACED_BATCH)]
        if kind == "tms":
            client.publish(topic_id, batch)
        elif kind == "raw":
            conn.table(raw_name).put(row_key(raw_prefix, count), {RAW_COLUMN: cell})
        elif kind == "seqb":
            first = writer.batch_no + 1
            writer.publish_many([batch] * BLOCK)
            acked.extend((writer.writer_id, b) for b in range(first, writer.batch_no + 1))
            count += BLOCK - 1
        else:
            writer.publish(batch)
            acked.append((writer.writer_id, writer.batch_no))
        count += 1
    if kind in ("seq", "seqp", "seqb", "claim"):
        lost = writer.lost
    if kind == "seqp":
        writer.close()
    return count * BATCH, time.time(), RpcCounter.count - calls, count, lost, acked


def close_all() -> None:
    """Worker job: close what ``write_for`` opened."""
    for client, raw, _ in _open.values():
        client.close()
        raw.close()
    _open.clear()


@dataclass
class Trial:
    rate: float
    calls_per_publish: float
    lost_per_publish: float
    check: Density | None = None
    fill: Fill | None = None


def _trial(
    workers: Workers,
    settings: Settings,
    prefix: str,
    raw_name: str,
    kind: str,
    topic: str,
    count: int,
    duration: float,
    raw: RawConnection,
) -> Trial:
    start_at = time.time() + 0.5
    for i in range(count):
        workers.submit(i, write_for, settings.address, prefix, raw_name, kind, i, topic, start_at, duration)
    answers = [workers.result(i, duration + 120) for i in range(count)]
    messages = sum(a[0] for a in answers)
    elapsed = max(a[1] for a in answers) - start_at
    publishes = max(1, sum(a[3] for a in answers))
    trial = Trial(messages / elapsed, sum(a[2] for a in answers) / publishes, sum(a[4] for a in answers) / publishes)
    if kind in ("seq", "seqp", "seqb", "claim"):
        fill = Fill()
        column = RAW_COLUMN
        rows = read_dense(raw.conn, raw_name, f"{kind}:{topic}:".encode(), column, fill=fill)
        trial.check = check_density(rows, [b for a in answers for b in a[5]])
        trial.fill = fill
    return trial


def tail_latencies(
    conn: happybase.Connection, table: str, prefix: bytes, since: float, until: float
) -> tuple[list[float], int]:
    """Tail one topic's rows from position 1 until ``until`` (wall clock), as a reader that never passes
    a missing position does: each poll scans from the next position it expects and stops at the first
    gap. Returns publish→visible seconds of every stamped message sent after ``since``, and the polls.
    """
    t = conn.table(table)
    stop = prefix + b"\xff" * 8 + b"\0"
    expected, latencies, polls = 1, [], 0
    while time.time() < until:
        polls += 1
        rows = t.scan(row_start=row_key(prefix, expected), row_stop=stop, columns=[RAW_COLUMN], limit=64, batch_size=64)
        got = 0
        for key, data in rows:
            if int.from_bytes(key[-8:], "big") != expected:
                break  # not written yet: read it next poll, never skip it
            seen = time.time()
            for payload in BatchRow.decode(data[RAW_COLUMN]).payloads:
                sent = send_time_of(payload) if len(payload) >= 8 else 0.0
                if since <= sent <= seen:
                    latencies.append(seen - sent)
            expected, got = expected + 1, got + 1
        if got == 0:
            time.sleep(0.002)
    return latencies, polls


def _paced(
    workers: Workers, settings: Settings, client: object, raw: RawConnection, raw_name: str, kind: str, topic: str
) -> list[float]:
    """publish→visible of :data:`WRITERS` paced writers (1,000 msg/s in all) seen by one tailing reader."""
    duration = settings.pick(10.0, 5.0)
    start_at = time.time() + 1.0
    prefix = client.installation.prefix
    for i in range(WRITERS):
        workers.submit(
            i, write_for, settings.address, prefix, raw_name, kind, i, topic, start_at, duration, PACED_INTERVAL
        )
    if kind == "tms":
        topic_id = TopicId.parse(topic)
        generation = client.get_topic(topic_id).generation
        table, key_prefix = client.installation.messages.name, generation_prefix(topic_id, generation)
    else:
        table, key_prefix = raw_name, f"{kind}:{topic}:".encode()
    latencies, _ = tail_latencies(raw.conn, table, key_prefix, start_at, start_at + duration + 1.0)
    for i in range(WRITERS):
        workers.result(i, duration + 120)
    return latencies


def run(settings: Settings) -> Result:
    duration = settings.pick(2.0, 1.5)
    result = Result(
        "designs",
        f"many-writer designs: 1 and {WRITERS} writer processes on one topic ({BATCH} × {PAYLOAD_SIZE} B batches, "
        f"one cell per batch, {duration:g} s a trial)",
    )
    load_before = os.getloadavg()
    trials: dict[str, list[Trial]] = {f"{k}{n}": [] for k in KINDS for n in (1, WRITERS)}
    plan = [(k, n) for n in (1, WRITERS) for k in KINDS]
    visible: dict[str, list[float]] = {}
    with bench_tables(settings, "wd") as (client, raw, raw_name), Workers(WRITERS) as workers:
        create_raw_table(raw, raw_name)
        prefix = client.installation.prefix
        try:
            for r in range(settings.rounds):
                for kind, count in plan if r % 2 == 0 else list(reversed(plan)):
                    name = f"d{r}_{kind}{count}"
                    topic = str(new_topic(client, name)) if kind == "tms" else name
                    trial = _trial(workers, settings, prefix, raw_name, kind, topic, count, duration, raw)
                    if trial.check is not None and not trial.check.ok:
                        raise AssertionError(f"{kind} × {count}: the rows read back are wrong: {trial.check}")
                    trials[f"{kind}{count}"].append(trial)
                progress(
                    f"designs round {r + 1}/{settings.rounds} (load {os.getloadavg()[0]:.1f}): "
                    + ", ".join(f"{k} {trials[k][-1].rate:,.0f}" for k in trials)
                )
            for kind in PACED_KINDS:
                name = f"lat_{kind}"
                topic = str(new_topic(client, name)) if kind == "tms" else name
                visible[kind] = _paced(workers, settings, client, raw, raw_name, kind, topic)
                progress(
                    f"designs publish→visible {kind}: p50 {percentile(visible[kind], 50) * 1000:.1f} ms, "
                    f"p99 {percentile(visible[kind], 99) * 1000:.1f} ms ({len(visible[kind])} messages)"
                )
        finally:
            for i in range(WRITERS):
                workers.submit(i, close_all)
            for i in range(WRITERS):
                workers.result(i, 30)

    rate = {k: median([t.rate for t in v]) for k, v in trials.items()}
    calls = {k: median([t.calls_per_publish for t in v]) for k, v in trials.items()}
    lost = {k: median([t.lost_per_publish for t in v]) for k, v in trials.items()}
    labels = {
        "tms": "tms-hbase today (chain, loser reads whole winner)",
        "raw": "raw happybase, one-cell blind put (ceiling)",
        "seq": "sequencer prototype (increment + checkAndPut-if-absent)",
        "seqp": "sequencer, next position reserved during the write",
        "seqb": f"sequencer, {BLOCK} publishes queued: one increment by {BLOCK}",
        "claim": "claim chain prototype (header claim + payload put, backoff)",
    }
    n = WRITERS
    result.table(
        [
            "",
            "1 process, msg/s",
            f"{n} processes, msg/s",
            f"{n} vs 1",
            "÷ raw (1, 4)",
            "calls/publish (1 → 4)",
            "lost/publish (4)",
        ],
        [
            [
                labels[k],
                rate[f"{k}1"],
                rate[f"{k}{n}"],
                f"{ratio(rate[f'{k}{n}'], rate[f'{k}1']):.2f}×",
                f"{ratio(rate[f'{k}1'], rate['raw1']):.2f}×, {ratio(rate[f'{k}{n}'], rate[f'raw{n}']):.2f}×",
                f"{calls[f'{k}1']:.2f} → {calls[f'{k}{n}']:.2f}",
                f"{lost[f'{k}{n}']:.2f}" if k not in ("tms", "raw") else "–",
            ]
            for k in KINDS
        ],
    )
    result.table(
        [
            f"publish→visible, {WRITERS} writers × 25 batches/s × {PACED_BATCH} (1,000 msg/s)",
            "p50 ms",
            "p99 ms",
            "max ms",
        ],
        [
            [labels[k], percentile(v, 50) * 1000, percentile(v, 99) * 1000, max(v, default=float("nan")) * 1000]
            for k, v in visible.items()
        ],
    )
    fills = [t.fill for k in ("seq", "seqp", "seqb", "claim") for m in (1, n) for t in trials[f"{k}{m}"] if t.fill]
    result.notes.append(
        f"load average before {load_before[0]:.1f} / after {os.getloadavg()[0]:.1f} (2 cores, shared); "
        f"per-round spread of {n}-writer rates (min–max): "
        + ", ".join(
            f"{k} {min(t.rate for t in trials[k + str(n)]):,.0f}–{max(t.rate for t in trials[k + str(n)]):,.0f}"
            for k in KINDS
        )
    )
    result.notes.append(
        "prototype rows read back after every trial: dense, every acknowledged batch exactly once; holes "
        f"filled by the reader: {sum(len(f.filled) for f in fills)}, longest wait on one "
        f"{max((f.waited for f in fills), default=0) * 1000:.0f} ms"
    )
    checks = {
        k: [t.check for m in (1, n) for t in trials[f"{k}{m}"] if t.check] for k in ("seq", "seqp", "seqb", "claim")
    }
    result.notes.append(
        "publish time stepping back along positions (rows, largest step): "
        + ", ".join(
            f"{k} {sum(c.decreasing for c in v)} rows, {max((c.backstep_ms for c in v), default=0)} ms"
            for k, v in checks.items()
        )
    )
    for k in ("seq", "seqp", "seqb", "claim"):
        ok = rate[f"{k}{n}"] >= 0.9 * rate[f"raw{n}"] and rate[f"{k}{n}"] >= rate["tms1"]
        result.goal(
            f"{k}: {n} writers ≥ 0.9× {n} raw and ≥ 1 tms writer",
            f"{ratio(rate[f'{k}{n}'], rate[f'raw{n}']):.2f}× raw",
            ok,
        )
    result.samples = {
        "msgs_per_s": {k: [t.rate for t in v] for k, v in trials.items()},
        "calls_per_publish": {k: [t.calls_per_publish for t in v] for k, v in trials.items()},
        "lost_per_publish": {k: [t.lost_per_publish for t in v] for k, v in trials.items()},
        "visible_ms": {k: sorted(round(x * 1000, 2) for x in v) for k, v in visible.items()},
    }
    return result
