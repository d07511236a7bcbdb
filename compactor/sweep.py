"""One sweep over the message and payload tables: scan in chunks, decide per row, delete in batches."""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from tms_hbase.clock import now_ms
from tms_hbase.connection import HBaseConnection, mutation
from tms_hbase.metadata import MetadataStore
from tms_hbase.rows import MESSAGE_COLUMN, BatchRow, with_tx_pointer
from tms_hbase.tables import TableNames
from tms_hbase.topic import TopicId, TopicMetadata
from tms_hbase.tx.state_store import StateStore

from .rules import Verdict, message_verdict, payload_verdict

log = logging.getLogger(__name__)

DEFAULT_GRACE_SECONDS = 600
CHUNK = 1000


@dataclass
class SweepReport:
    """What one sweep saw and did (or, in a dry run, would have done)."""

    messages_scanned: int = 0
    messages_dropped: int = 0
    messages_stripped: int = 0
    messages_invalidated: int = 0  # write pointer +p rewritten to -p (p on the invalid list)
    invalid_transactions: int = 0  # size of the invalid list the sweep used
    payloads_scanned: int = 0
    payloads_dropped: int = 0
    dry_run: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def split_key(key: bytes) -> tuple[TopicId, int] | None:
    """(topic, generation) of a message or payload row key; None if it is not one of ours."""
    first = key.find(b":")
    second = key.find(b":", first + 1)
    if first <= 0 or second <= first + 1 or len(key) < second + 5:
        return None
    try:
        topic = TopicId(key[:first].decode(), key[first + 1 : second].decode())
    except (UnicodeDecodeError, ValueError):
        return None
    return topic, struct.unpack_from(">I", key, second + 1)[0]


class Sweeper:
    """Applies the cleanup rules to every row of one tms-hbase installation (one table prefix)."""

    def __init__(
        self,
        hbase: HBaseConnection,
        tables: TableNames,
        *,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        dry_run: bool = False,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.hbase = hbase
        self.tables = tables
        self.grace_ms = int(grace_seconds * 1000)
        self.dry_run = dry_run
        self.clock = clock
        self.metadata = MetadataStore(hbase, tables.metadata)

    def sweep_once(self) -> SweepReport:
        """Sweep both tables once with the topic metadata as it is now."""
        topics = {m.topic: m for m in self.metadata.list(include_deleted=True)}
        tx_state = StateStore(self.hbase, self.tables.txstate).recover()  # no transaction server needed
        invalid = frozenset(tx_state.invalid)
        report = SweepReport(dry_run=self.dry_run, invalid_transactions=len(invalid))
        log.info("sweeping with %d invalid transactions (read pointer %d)", len(invalid), tx_state.read_pointer)
        self._sweep_messages(topics, invalid, report)
        self._sweep_payloads(topics, report)
        log.info("sweep done: %s", report.as_dict())
        return report

    def _sweep_messages(
        self, topics: dict[TopicId, TopicMetadata], invalid: frozenset[int], report: SweepReport
    ) -> None:
        deletes: list[bytes] = []
        rows = self._scan(self.tables.messages, include_timestamp=False)
        current = next(rows, None)
        while current is not None:
            following = next(rows, None)
            key, data = current
            report.messages_scanned += 1
            where = split_key(key)
            value = data.get(MESSAGE_COLUMN)
            if where is not None and value is not None:
                # the newest row of its generation: no later row of the same prefix follows it
                newest = following is None or following[0][: len(key) - 8] != key[: len(key) - 8]
                row = BatchRow.decode(value)
                verdict = message_verdict(where[1], topics.get(where[0]), row, newest, self.clock(), self.grace_ms)
                if verdict is Verdict.DROP:
                    report.messages_dropped += 1
                    deletes.append(key)
                elif verdict is Verdict.STRIP:
                    report.messages_stripped += 1
                    self._strip(key, value, row)
                elif row.tx_pointer is not None and row.tx_pointer in invalid:
                    report.messages_invalidated += 1
                    self._replace(key, value, with_tx_pointer(value, -row.tx_pointer), "mark invalid")
            if len(deletes) >= CHUNK:
                self._delete(self.tables.messages, deletes)
            current = following
        self._delete(self.tables.messages, deletes)

    def _sweep_payloads(self, topics: dict[TopicId, TopicMetadata], report: SweepReport) -> None:
        deletes: list[bytes] = []
        for key, data in self._scan(self.tables.payloads, include_timestamp=True):
            report.payloads_scanned += 1
            where = split_key(key)
            if where is None or not data:
                continue
            written = max(ts for _, ts in data.values())
            if payload_verdict(where[1], topics.get(where[0]), written, self.clock(), self.grace_ms) is Verdict.DROP:
                report.payloads_dropped += 1
                deletes.append(key)
                if len(deletes) >= CHUNK:
                    self._delete(self.tables.payloads, deletes)
        self._delete(self.tables.payloads, deletes)

    def _scan(self, table: str, include_timestamp: bool) -> Iterator[tuple[bytes, dict]]:
        """Every row of ``table`` in key order, read in chunks (the connection is held per chunk)."""
        start = b""
        while True:

            def chunk(conn, start: bytes = start) -> list[tuple[bytes, dict]]:
                scan = conn.table(table).scan(
                    row_start=start or None, limit=CHUNK, batch_size=CHUNK, include_timestamp=include_timestamp
                )
                return list(scan)

            rows = self.hbase.run(f"sweep scan of {table}", chunk)
            yield from rows
            if len(rows) < CHUNK:
                return
            start = rows[-1][0] + b"\x00"

    def _delete(self, table: str, keys: list[bytes]) -> None:
        if keys and not self.dry_run:

            def delete(conn, batch: tuple[bytes, ...] = tuple(keys)) -> None:
                with conn.table(table).batch() as b:
                    for key in batch:
                        b.delete(key)

            self.hbase.run(f"sweep deletes in {table}", delete)  # deleting twice is harmless
        keys.clear()

    def _strip(self, key: bytes, value: bytes, row: BatchRow) -> None:
        """Rewrite the newest row without payloads, by compare-and-set (a rollback may race us)."""
        stripped = BatchRow(row.publish_time, row.writer_id, row.batch_no, (), row.tx_pointer, row.expires_at, False)
        self._replace(key, value, stripped.encode(), "strip expired tail row")

    def _replace(self, key: bytes, old: bytes, new: bytes, what: str) -> None:
        """Compare-and-set one message cell: a concurrent rollback or sweep wins, and the next sweep
        looks again."""
        if self.dry_run:
            return
        put = mutation(MESSAGE_COLUMN, new)
        table = self.tables.messages.encode()
        self.hbase.run(what, lambda c: c.client.checkAndPut(table, key, MESSAGE_COLUMN, old, put, {}), idempotent=False)
