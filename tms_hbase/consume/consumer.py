"""The consumer: reads a topic in order for one subscription, waits for new messages without busy
polling, and commits a durable mark under a lease (at-least-once, or exactly-once in a transaction).

* **Reading.** Messages come from the reader's ordered fetch, from the last message delivered; a fetch
  stays open while messages keep coming. At the tail the consumer waits on its doorbell
  (:mod:`.doorbell`) and also polls every ``poll_interval_seconds`` seconds, so a lost ring costs latency only;
  after a read that reached the tail with messages it waits for a ring before it reads again (at most the
  poll interval, and every poll reads before it returns). Rings that name a run of consecutive rows
  starting exactly where the next unread row starts (each publish was acknowledged before its ring) deliver
  the run in order from the rings themselves when they carried the rows (authenticated: :mod:`.doorbell`),
  the first one read with one get instead of a scan if its ring did not carry it; the rest, any other ring,
  a transaction, or anything but a plain live batch means a fetch.
* **Marks.** ``commit()`` stores the last delivered message's id as the subscription's mark, by
  compare-and-set under the lease (:mod:`.lease`); a mark never moves backwards. After a crash the
  next consumer resumes right after the last committed mark: at-least-once.
* **Transactions.** Inside a :class:`~tms_hbase.txaware.context.TransactionContext` the consumer is a
  TransactionAware participant: it reads what the transaction sees, and its mark is written at
  persist time as *pending* with the transaction's write pointer. Whoever reads the cell later
  resolves it by the transaction's fate (:mod:`~tms_hbase.isolation.fate`): committed → adopted, invalid →
  dropped, in progress → not yet. Rolling back removes the pending mark before the transaction aborts (else the
  transaction is invalidated), and a consumer that takes over invalidates a previous owner's
  transaction still in progress, so that it can never commit later: nothing is lost, nothing is
  consumed twice by a pipeline that reads, publishes transactionally and commits in one transaction.
* **Committed only.** Outside a transaction the reads judge transactional rows by the installation's
  transaction state (``committed``, :mod:`~tms_hbase.isolation.committed`) as a transaction's fetch does: a
  rolled-back or invalid row is skipped, a row still in progress holds the consumer there (in order) until
  its transaction ends. Without it (``isolation="uncommitted"``) every row is delivered as stored.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import time
import uuid
import weakref
from collections import deque
from collections.abc import Callable, Collection, Iterator
from dataclasses import replace
from itertools import islice
from typing import TYPE_CHECKING

from tms_hbase import tracing
from tms_hbase.consume.doorbell import Bell, Ring
from tms_hbase.consume.lease import MIN_LEASE_SECONDS, Lease
from tms_hbase.consume.subscriptions import Record, SubscriptionStore, check_mark, folded, later, resolved, row_key
from tms_hbase.errors import InvalidArgument, SubscriptionNotFound, TmsError
from tms_hbase.fetch.reader import Cursor, MessageReader
from tms_hbase.installation.metadata import MetadataCache
from tms_hbase.isolation.committed import CommittedReads
from tms_hbase.isolation.fate import TxFate, fate, snapshot_from_server
from tms_hbase.model import checks
from tms_hbase.model.clock import now_ms
from tms_hbase.model.isolation import COMMITTED, UNCOMMITTED
from tms_hbase.model.message import Message
from tms_hbase.model.message_id import ID_LENGTH
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.rows import RowSlice
from tms_hbase.model.subscription import ConsumerSession, Pending
from tms_hbase.model.topic import TopicId
from tms_hbase.model.transaction import Transaction

if TYPE_CHECKING:  # passed in by callers; `import tms_hbase` does not load the Thrift client
    from tms_hbase.tx.client import TransactionClient

log = logging.getLogger(__name__)

AUTO_COMMIT_SECONDS = 1.0
CHANGE_PREFIX = b"tms-subscription:"


class Consumer:
    """One active consumer of one subscription (create it with ``MessagingClient.consumer``).

    Iterate it for messages in order (each iteration ends after ``max_wait_seconds`` seconds without a new
    message; iterate again to go on), or ``poll``. ``commit()`` stores the last delivered message as
    the subscription's mark. Use it as a context manager or call :meth:`close`, which gives the lease
    back. Not thread-safe: one thread consumes (the lease is renewed by a thread of its own).
    """

    def __init__(
        self,
        *,
        topic: TopicId,
        name: str,
        generation: int,
        store: SubscriptionStore,
        reader: MessageReader,
        topics: MetadataCache,
        prefix: str,
        tx_state: Callable[[], Transaction],
        max_wait_seconds: float,
        transaction: Transaction | TransactionClient | None,
        auto_commit: bool,
        lease_seconds: float,
        wait_for_lease: float | None,
        doorbell: str | None,
        poll_interval_seconds: float,
        batch: int,
        session: ConsumerSession | None = None,
        owner: str | None = None,
        rows: bool = False,
        committed: CommittedReads | None = None,
    ) -> None:
        _check_options(
            max_wait_seconds, transaction, auto_commit, lease_seconds, wait_for_lease, poll_interval_seconds, batch
        )
        self.topic, self.name, self.generation = topic, name, generation
        self.max_wait_seconds, self.auto_commit, self.poll_interval_seconds, self.batch = (
            max_wait_seconds,
            auto_commit,
            poll_interval_seconds,
            batch,
        )
        self._reader, self._topics, self._tx_state = reader, topics, tx_state
        self._fixed = transaction if isinstance(transaction, Transaction) else None
        self._tx_client = None if transaction is None or isinstance(transaction, Transaction) else transaction
        self._committed_reads = committed  # outside transactions: committed messages only (None: every row)
        if session is not None and not isinstance(session, ConsumerSession):
            raise InvalidArgument(f"session must be a ConsumerSession, not {type(session).__name__}")
        if owner is not None and (session is not None or not isinstance(owner, str) or not owner):
            raise InvalidArgument("owner: a non-empty name, and not with a session (which names its owner)")
        if session is not None:
            owner = session.owner
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.rows = rows  # a consumer of rows: delivers row slices (poll_rows), not messages
        self._buffer: deque[Message] = deque()
        self._slices: deque[RowSlice] = deque()  # the buffer of a consumer of rows
        self._stream: Iterator[Message] | None = None
        self._row_stream: Iterator[RowSlice] | None = None  # the fetch of a consumer of rows
        self._held: RowSlice | None = None  # the rest of the row slice it read last, read first next
        self._tx: Transaction | None = None  # the running transaction of a TransactionContext
        self._tx_mark: bytes | None = None  # the mark to persist with it
        self._persisted: Pending | None = None  # the pending mark persisted for it
        self._processed: bytes | None = None  # auto-commit: delivered and known to be handled
        self._rest = False  # the last read reached the tail with messages: wait for a ring before the next
        self._cursor = Cursor()  # where the current fetch has read to
        self._next_row: int | None = None  # where the row after everything delivered starts, when known
        self._rung = 0  # the highest row position a ring of this generation named
        self._auto_committed_at = time.monotonic()
        self._closed = False
        self._read_metric = CLIENT_METRICS.consumed_messages.labels(str(topic), name)
        self._bell = Bell(prefix, topic, doorbell or "127.0.0.1")
        try:
            self._lease = Lease.acquire(
                store,
                row_key(topic, generation, name),
                topic,
                name,
                self.owner,
                lease_seconds,
                self._bell.address if doorbell else None,
                wait_for_lease,
                bell_key=self._bell.key.hex() if doorbell else None,
                resume=session is not None,
                clock=reader.hbase_now,
            )
        except BaseException:
            self._bell.close()
            raise
        try:
            self._committed = self._take_over()
            self._delivered = self._committed
            if session is not None and session.delivered is not None:
                self._delivered = later(self._committed, check_mark(topic, generation, session.delivered))
        except BaseException:
            self.close()
            raise
        self._lease.start_renewing()
        # dropped without close(): stop renewing, so a standby takes over once the lease runs out
        weakref.finalize(self, _abandon, self._lease, self._bell)

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, exc_type: object, *_rest: object) -> None:
        try:
            if self.auto_commit and not self._closed:
                self._auto_commit(self._delivered if exc_type is None else self._processed)
        finally:
            self.close()

    def close(self) -> None:
        """Give the lease back (a standby takes over at once) and close the doorbell. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._lease.release()
        self._bell.close()

    def detach(self) -> ConsumerSession:
        """Stop consuming in this object but keep the lease: it runs out after ``lease_seconds`` unless
        ``MessagingClient.consumer(..., session=...)`` resumes it with the session returned, which goes
        on after the last message delivered here (messages read ahead are read again). Closes this object."""
        session = self.session
        if not self._closed:
            self._closed = True
            self._lease.stop_renewing()
            self._bell.close()
        return session

    def park(self) -> None:
        """Stop renewing the lease but keep this consumer open, with what it read ahead, for a service
        that serves one consumer's calls one at a time and keeps it between them (the gateway). Parked, the
        lease runs out ``lease_seconds`` after its last renewal, as a detached consumer's does, unless
        :meth:`unpark` takes it up again first."""
        if self._closed:
            raise TmsError(f"{self!r} is closed")
        self._lease.stop_renewing()

    def unpark(self, needed: float, *, confirm: bool) -> bool:
        """Take a parked consumer up again and keep renewing its lease, as a running consumer does: renewed
        now (a compare-and-set) only if it would run out within ``needed`` seconds, else, with ``confirm``,
        checked with one read (a call that writes under the lease anyway, a commit, needs no check: its
        compare-and-set fails if the lease is gone). LeaseLost if another consumer took it over, or the
        subscription was reset or deleted with force. False, with nothing done, if its last renewal is too
        long ago for this process to know the lease still holds (it may have run out): then detach it and
        resume its session from HBase instead."""
        if self._closed:
            raise TmsError(f"{self!r} is closed")
        if not self._lease.valid():
            return False
        if self._lease.left() < needed:
            self._lease.renew()
        elif confirm:
            self._lease.confirm()
        self._lease.start_renewing()
        return True

    def confirm(self) -> None:
        """Raise LeaseLost unless this consumer still holds its lease in HBase (one read, no write): for a
        service that must refuse a call of a consumer whose lease was taken over even when the call
        writes nothing (a commit of a mark that is there already)."""
        self._lease.confirm()

    @property
    def session(self) -> ConsumerSession:
        """The lease owner and the last message delivered (see :meth:`detach`)."""
        return ConsumerSession(self.owner, self._delivered)

    def __repr__(self) -> str:
        return f"Consumer({self.topic}, {self.name!r}, owner={self.owner!r})"

    @property
    def isolation(self) -> str:
        """ "committed" (committed messages only, or what its transaction sees) or "uncommitted"."""
        committed = self._committed_reads or self._fixed or self._tx_client
        return COMMITTED if committed is not None else UNCOMMITTED

    @property
    def committed(self) -> bytes | None:
        """The subscription's mark as this consumer last committed or found it."""
        return self._committed

    @property
    def delivered(self) -> bytes | None:
        """The id of the last message delivered (what ``commit()`` stores)."""
        return self._delivered

    # -- reading --------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Message]:
        """Messages in order; blocks up to ``max_wait_seconds`` for the next one, then the iteration ends."""
        self._messages_only()
        buffer, lease = self._buffer, self._lease
        traced = tracing.enabled()  # asked again after each wait, not per message (a cost on every message)
        while True:
            if self.auto_commit:
                self._handled()
            if not (buffer and lease.valid()):
                if not self._wait(time.monotonic() + self.max_wait_seconds):
                    if self.auto_commit:
                        self._auto_commit(self._delivered)
                    return
                traced = tracing.enabled()
            message = buffer.popleft()
            self._delivered = message.id
            yield tracing.received(self.topic, self.name, [message])[0] if traced else message

    def poll(
        self,
        max_messages: int = 100,
        timeout_seconds: float = 1.0,
        *,
        max_bytes: int | None = None,
        commit: bool = False,
    ) -> list[Message]:
        """Up to ``max_messages`` messages in order, as soon as there is one; ``[]`` after ``timeout_seconds``.
        ``max_bytes``: stop after the message that brings the ids and payloads to this many bytes (so
        at least one message comes, however large). ``commit``: first :meth:`commit` the last delivered
        message (what a gateway consumer does in the same HTTP call)."""
        self._messages_only()
        if commit:
            self.commit()
        if not self._ready(max_messages, timeout_seconds, max_bytes):
            return []
        take = min(max_messages, len(self._buffer))
        if max_bytes is None:
            got = [self._buffer.popleft() for _ in range(take)]
        else:
            got, size = [], 0
            while len(got) < take and size < max_bytes:
                message = self._buffer.popleft()
                got.append(message)
                size += len(message.id) + len(message.payload)
        self._delivered = got[-1].id
        return tracing.received(self.topic, self.name, got)

    def poll_rows(
        self, max_messages: int = 100, timeout_seconds: float = 1.0, *, max_bytes: int | None = None
    ) -> list[RowSlice]:
        """What :meth:`poll` delivers, for a consumer of rows (``rows=True``): the messages as the slices of
        the rows that hold them, with no message object and no payload copy each (inline payloads are
        views of the stored row), for a service that writes them out as they are (the gateway's pages)."""
        if not self.rows:
            raise InvalidArgument(f"{self!r} delivers messages: poll_rows needs a consumer made with rows=True")
        if not self._ready(max_messages, timeout_seconds, max_bytes):
            return []
        buffer, got, taken, size = self._slices, [], 0, 0
        while buffer and taken < max_messages and (max_bytes is None or size < max_bytes):
            part = buffer.popleft()
            want = min(len(part), max_messages - taken)
            if max_bytes is not None:  # stop after the message that brings the page to max_bytes
                count = 0
                for payload in part.payloads[:want]:
                    count += 1
                    size += ID_LENGTH + len(payload)
                    if size >= max_bytes:
                        break
                want = count
            if want < len(part):
                part, rest = part.split(want)
                buffer.appendleft(rest)
            got.append(part)
            taken += want
        self._delivered = got[-1].last_id
        return got

    def _messages_only(self) -> None:
        if self.rows:
            raise InvalidArgument(f"{self!r} is a consumer of rows: use poll_rows")

    def _ready(self, max_messages: int, timeout_seconds: float, max_bytes: int | None) -> bool:
        """Check a poll's arguments and wait for something buffered (False: nothing came in time)."""
        checks.positive_int("max_messages", max_messages)
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0):
            raise InvalidArgument(f"bad max_bytes {max_bytes!r}: expected a positive integer")
        checks.seconds("timeout_seconds", timeout_seconds)
        if self.auto_commit:
            self._handled()
        return self._wait(time.monotonic() + timeout_seconds)

    @property
    def buffered(self) -> int:
        """Messages read ahead and not delivered yet."""
        return len(self._buffer) + sum(map(len, self._slices))

    def read_ahead(self) -> None:
        """Fill the buffer up to ``batch`` messages now, without waiting and delivering nothing: for a
        service that answers a call and reads the next page while its caller handles this one (the
        gateway). What it reads is delivered by later polls, as a buffered batch always is."""
        if self._closed:
            raise TmsError(f"{self!r} is closed")
        buffered = self.buffered
        if buffered < self.batch:
            self._fill(self.batch - buffered)

    def _wait(self, deadline: float) -> bool:
        """Make sure the lease holds and messages are buffered, waiting for them until ``deadline``;
        False if none came."""
        if self._closed:
            raise TmsError(f"{self!r} is closed")
        while True:
            if self._rest and not (self._buffer or self._slices):
                self._rest = False
                self._bell.wait(max(0.0, min(deadline - time.monotonic(), self.poll_interval_seconds)))
            self._lease.check()
            if not (self._buffer or self._slices):
                self._fill()
            if self._buffer or self._slices:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._bell.wait(min(left, self.poll_interval_seconds))

    def _fill(self, count: int | None = None) -> None:
        """Read the next ``count`` (default ``batch``) messages into the buffer, opening a new fetch from
        the last one buffered (or delivered) when the current one reached the tail (the bell is cleared
        first: a publish after this read still wakes the wait that follows)."""
        count = self.batch if count is None else count
        if self._stream is None and self._row_stream is None:
            rings = self._bell.clear()
            meta = self._topics.get(self.topic)  # TopicNotFound once the topic is deleted
            if meta.generation != self.generation:
                raise SubscriptionNotFound(self.topic, self.name)
            if self._read_rung_rows(rings, count):
                return
            if self.rows:
                start = self._slices[-1].last_id if self._slices else self._delivered
                self._row_stream = self._reader.fetch_rows(
                    self.topic, start, False, self._read_transaction(), self._committed_reads
                )
            else:
                self._cursor = Cursor()
                self._stream = self._reader.fetch(
                    self.topic,
                    start_message=self._buffer[-1].id if self._buffer else self._delivered,
                    inclusive=False,
                    transaction=self._read_transaction(),
                    cursor=self._cursor,
                    committed=self._committed_reads,
                )
        if self._row_stream is not None:
            read = self._read_rows(self._row_stream, count)
        else:
            before = len(self._buffer)
            self._buffer.extend(islice(self._stream or (), count))
            read = len(self._buffer) - before
        self._read_metric.inc(read)
        if read < count:  # at the tail (or, in a transaction, at a message it cannot see yet)
            if self._stream is not None and self._cursor.next_position is not None:
                self._next_row = self._cursor.next_position  # (else it passed no row: where it was still holds)
            self._stream = self._row_stream = None
        self._rest = 0 < read < count

    def _read_rung_rows(self, rings: list[Ring | None], count: int) -> bool:
        """The run of rows the pending rings name, if it starts exactly where the row after everything read
        so far does (so nothing lies between) and each row holds a plain live batch, outside transactions
        only: each row from its ring's datagram when the ring carried it (authenticated, as stored), the
        first one read with one get otherwise. The run ends before the first row no ring carried (or, for
        the first, named), before a row that does not fit ``count`` messages, or before one that is not a
        plain live batch; what follows is read with the next fetch. False (nothing done) if the run is
        empty. After it the consumer waits for the next ring unless a ring named a row beyond it."""
        named: dict[int, Ring] = {}  # position -> a ring of this generation naming it (one carrying the row first)
        for ring in rings:
            if ring is not None and ring.generation == self.generation:
                self._rung = max(self._rung, ring.position)
                known = named.get(ring.position)
                if known is None or known.stored is None:
                    named[ring.position] = ring
        if (
            not named
            or self._next_row is None
            or self._tx is not None
            or self._tx_client is not None
            or self._fixed is not None
            or self.rows
        ):
            return False
        start, taken = self._next_row, 0
        while (ring := named.get(self._next_row)) is not None:
            if ring.stored is not None:
                found = self._reader.row_of(self.topic, self.generation, ring.position, ring.stored)
                source = "datagram"
            elif ring.position == start:
                found = self._reader.row_at(self.topic, self.generation, ring.position)
                source = "read"
            else:
                break  # a row no ring carried, after the run's first: read with the next fetch
            if found is None or taken + len(found[0]) > count:
                break
            messages, self._next_row = found
            self._buffer.extend(messages)
            taken += len(messages)
            CLIENT_METRICS.rung_rows.labels(source).inc()
        if self._next_row == start:
            return False
        self._read_metric.inc(taken)
        self._rest = self._rung < self._next_row
        return True

    def _read_rows(self, stream: Iterator[RowSlice], count: int) -> int:
        """Buffer the next ``count`` messages of a consumer of rows (fewer at the tail), as row slices; the
        rest of a slice cut at ``count`` is held for the next read. How many were read."""
        read, held, self._held = 0, self._held, None
        for part in stream if held is None else itertools.chain((held,), stream):
            if read + len(part) > count:
                part, self._held = part.split(count - read)
            self._slices.append(part)
            read += len(part)
            if read == count:
                break
        return read

    def _read_transaction(self) -> Transaction | None:
        if self._tx is not None:
            return self._tx
        if self._tx_client is not None:
            return snapshot_from_server(self._tx_client)
        return self._fixed  # a fixed Transaction, or None

    def _restart_reading(self, at: bytes | None) -> None:
        self._buffer.clear()
        self._slices.clear()
        self._stream = self._row_stream = self._held = None
        self._rest = False
        self._next_row = None
        self._delivered = at

    # -- committing -----------------------------------------------------------------------------

    def commit(self, message: Message | bytes | None = None, *, transaction: Transaction | None = None) -> None:
        """Store the last delivered message (or ``message``, delivered already) as the subscription's mark.

        Never moves the mark backwards; LeaseLost if another consumer took the subscription over.
        Inside a TransactionContext the mark becomes part of the running transaction. With
        ``transaction`` it is written now as part of that transaction (commit the transaction through
        the transaction client afterwards; to abort it, invalidate it or call :meth:`rollback_tx` first).
        """
        mark = self._mark_of(message)
        if mark is None:
            return
        if transaction is not None:
            if not isinstance(transaction, Transaction):
                raise InvalidArgument(
                    f"transaction must be a tms_hbase.tx.Transaction, not {type(transaction).__name__}"
                )
            self._persist(transaction, mark)
            return
        if self._tx is not None:
            self._tx_mark = mark  # persisted with the transaction
            return
        if self._committed is not None and mark <= self._committed:
            return
        record = self._lease.change(
            lambda r: replace(self._resolved(r), position=later(r.position, mark), updated_at=now_ms())
        )
        self._committed = record.position
        CLIENT_METRICS.commits.labels(str(self.topic)).inc()

    def _mark_of(self, message: Message | bytes | None) -> bytes | None:
        if message is None:
            return self._delivered
        mark = check_mark(self.topic, self.generation, message.id if isinstance(message, Message) else message)
        if self._delivered is None or mark > self._delivered:
            raise InvalidArgument("cannot commit a message that was not delivered yet (use reset_subscription to skip)")
        return mark

    def _handled(self) -> None:
        """Auto-commit: the next message is asked for, so the ones delivered so far are handled."""
        self._processed = self._delivered
        if time.monotonic() - self._auto_committed_at >= AUTO_COMMIT_SECONDS:
            self._auto_commit(self._processed)

    def _auto_commit(self, mark: bytes | None) -> None:
        self._auto_committed_at = time.monotonic()
        if mark is not None and self._tx is None:
            self.commit(mark)

    # -- TransactionAware -----------------------------------------------------------------------

    @property
    def transaction_aware_name(self) -> str:
        return f"consumer of subscription {self.name!r} of {self.topic}"

    def start_tx(self, tx: Transaction) -> None:
        """Reads from now on see what ``tx`` sees; ``commit()`` becomes part of ``tx``."""
        self._tx, self._tx_mark, self._persisted = tx, None, None
        self._restart_reading(self._delivered)

    def update_tx(self, tx: Transaction) -> None:
        self._tx = tx

    def get_tx_changes(self) -> Collection[bytes]:
        """The subscription, when this transaction moves its mark: two transactions moving one
        subscription's mark conflict (a second line of defence behind the lease)."""
        return [CHANGE_PREFIX + self._lease.key] if self._tx_mark is not None else []

    def commit_tx(self) -> bool:
        """Persist: write the mark as pending with the transaction's write pointer."""
        if self._tx is not None and self._tx_mark is not None:
            self._persist(self._tx, self._tx_mark)
        return True

    def _persist(self, tx: Transaction, mark: bytes) -> None:
        if self._committed is not None and mark <= self._committed:
            return
        pending = Pending(tx.tx_id, tx.write_pointer, mark)

        def step(record: Record) -> Record:
            record = self._resolved(record)
            if record.pending is not None and record.pending.tx_id != tx.tx_id:  # the same one: a later mark
                raise TmsError(
                    f"{self.transaction_aware_name}: the mark of transaction {record.pending.tx_id} is still pending"
                )
            return replace(record, pending=pending, updated_at=now_ms())

        self._persisted = pending  # first: if the write's answer is lost, rollback still removes it
        self._lease.change(step)
        CLIENT_METRICS.commits.labels(str(self.topic)).inc()

    def post_tx_commit(self) -> None:
        """The transaction committed: its mark counts. Fold it into the position (if that fails, the
        next reader of the cell resolves it the same way)."""
        persisted = self._persisted
        self._tx, self._tx_mark, self._persisted = None, None, None
        self._restart_reading(self._delivered)
        if persisted is None:
            return
        self._committed = later(self._committed, persisted.position)
        try:
            self._lease.change(lambda r: folded(r, persisted))
        except TmsError as exc:
            log.info("%s: committed mark left pending (%s); it is resolved on the next read", self, exc)

    def rollback_tx(self) -> bool:
        """Undo the pending mark (before the transaction aborts) and deliver again from the committed
        mark; False if the mark could not be removed (the transaction is then invalidated)."""
        persisted = self._persisted
        self._tx, self._tx_mark, self._persisted = None, None, None
        self._restart_reading(self._committed)
        if persisted is None:
            return True
        try:
            self._lease.change(lambda r: replace(r, pending=None) if r.pending == persisted else r)
        except TmsError as exc:
            log.warning("%s: could not remove the pending mark (%s); the transaction gets invalidated", self, exc)
            return False
        return True

    # -- pending marks --------------------------------------------------------------------------

    def _take_over(self) -> bytes | None:
        """Resolve a pending mark left by an earlier owner; returns the mark to resume after.

        A pending mark of a transaction still in progress belongs to a consumer that lost the lease:
        with a transaction client, that transaction is invalidated so it can never commit later.
        """
        record = self._lease.record
        if record.pending is None:
            return record.position
        if self._tx_client is not None and self._fate(record.pending) is TxFate.IN_PROGRESS:
            self._tx_client.invalidate(record.pending.tx_id)
            log.info("%s: invalidated transaction %d of a previous owner", self, record.pending.tx_id)
        return self._lease.change(self._resolved).position

    def _resolved(self, record: Record) -> Record:
        return resolved(record, self._fate)

    def _fate(self, pending: Pending) -> TxFate:
        snapshot = snapshot_from_server(self._tx_client) if self._tx_client is not None else self._tx_state()
        return fate(snapshot, pending.write_pointer)


def _abandon(lease: Lease, bell: Bell) -> None:
    lease.abandon()
    bell.close()


def _check_options(
    max_wait_seconds: object,
    transaction: object,
    auto_commit: object,
    lease_seconds: object,
    wait_for_lease: object,
    poll_interval_seconds: object,
    batch: object,
) -> None:
    checks.seconds("max_wait_seconds", max_wait_seconds)
    checks.seconds("wait_for_lease", wait_for_lease, optional=True)
    from tms_hbase.tx.client import TransactionClient  # only here: `import tms_hbase` does not load the Thrift client

    if transaction is not None and not isinstance(transaction, (Transaction, TransactionClient)):
        raise InvalidArgument(
            f"transaction must be a Transaction or a TransactionClient, not {type(transaction).__name__}"
        )
    if not isinstance(auto_commit, bool):
        raise InvalidArgument(f"auto_commit must be True or False, not {auto_commit!r}")
    if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)):
        raise InvalidArgument(f"bad lease_seconds {lease_seconds!r}: expected seconds")
    if not lease_seconds >= MIN_LEASE_SECONDS:
        raise InvalidArgument(f"bad lease_seconds {lease_seconds!r}: at least {MIN_LEASE_SECONDS} s")
    if (
        isinstance(poll_interval_seconds, bool)
        or not isinstance(poll_interval_seconds, (int, float))
        or not poll_interval_seconds > 0
    ):
        raise InvalidArgument(f"bad poll_interval_seconds {poll_interval_seconds!r}: expected seconds > 0")
    checks.positive_int("batch", batch)
