"""Transactional messaging: a publisher that takes part in transactions, and a reader that polls with
a fresh transaction each time (docs/design.md, requirements 6, 7 and 16)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from tms_hbase.client import MessagingClient
from tms_hbase.errors import TmsError
from tms_hbase.model.message import Message
from tms_hbase.model.published import PublishResult
from tms_hbase.model.record import Record, message_bytes
from tms_hbase.model.topic import TopicId, TopicLike, as_topic
from tms_hbase.model.transaction import Transaction, TransactionType
from tms_hbase.tx.client import TransactionClient

DEFAULT_BUFFER_BYTES = 1024 * 1024


class TransactionalPublisher:
    """A TransactionAware publisher: messages become visible to transactional readers at commit.

    Messages are buffered in memory and published at commit, after every other participant
    (``persist_last``). A long transaction, or a buffer past ``buffer_bytes``, stores them in the
    payload table as they come instead; commit then publishes one pointer row per topic and write
    pointer. On abort every publish is rolled back with its handle.
    """

    persist_last = True

    def __init__(self, client: MessagingClient, *, buffer_bytes: int = DEFAULT_BUFFER_BYTES) -> None:
        self.client = client
        self.buffer_bytes = buffer_bytes
        self.tx: Transaction | None = None
        self._buffer: dict[TopicId, list[bytes | Record]] = {}
        self._buffered = 0
        self._stored: list[tuple[TopicId, int]] = []  # (topic, write pointer) with payload-table rows
        self._handles: list[tuple[TopicId, PublishResult]] = []

    @property
    def transaction_aware_name(self) -> str:
        return "tms-hbase messaging publisher"

    def publish(self, topic: TopicLike, payloads: Sequence[bytes | Record]) -> None:
        """Publish inside the running transaction."""
        tx = self._running()
        topic = as_topic(topic)
        if tx.type is TransactionType.LONG or self._buffered + message_bytes(payloads) > self.buffer_bytes:
            self._store(topic, list(self._buffer.pop(topic, [])) + list(payloads))
            self._buffered = sum(map(message_bytes, self._buffer.values()))
        else:
            self.client.get_topic(topic)  # fail now, not at commit, for an unknown topic
            self._buffer.setdefault(topic, []).extend(payloads)
            self._buffered += message_bytes(payloads)

    def _store(self, topic: TopicId, payloads: list[bytes | Record]) -> None:
        tx = self._running()
        if payloads:
            self.client.store(topic, payloads, tx_write_pointer=tx.write_pointer)
            if (topic, tx.write_pointer) not in self._stored:
                self._stored.append((topic, tx.write_pointer))

    # -- TransactionAware ---------------------------------------------------------------------

    def start_tx(self, tx: Transaction) -> None:
        self.tx = tx
        self._buffer, self._buffered, self._stored, self._handles = {}, 0, [], []

    def update_tx(self, tx: Transaction) -> None:
        self.tx = tx  # later stores use the new write pointer; earlier ones keep theirs

    def get_tx_changes(self) -> Collection[bytes]:
        return ()  # messages never conflict

    def commit_tx(self) -> bool:
        tx = self._running()
        for topic in [t for t, _ in self._stored if t in self._buffer]:
            self._store(topic, self._buffer.pop(topic))
        for topic, pointer in self._stored:
            handle = self.client.publish(topic, [], tx_write_pointer=pointer)
            self._handles.append((topic, handle))
        for topic, payloads in self._buffer.items():
            handle = self.client.publish(topic, payloads, tx_write_pointer=tx.write_pointer)
            self._handles.append((topic, handle))
        self._buffer, self._buffered = {}, 0
        return True

    def post_tx_commit(self) -> None:
        for topic in dict.fromkeys(t for t, _ in self._handles):  # now visible: wake their consumers
            self.client.notify_consumers(topic)
        self.tx, self._stored, self._handles = None, [], []

    def rollback_tx(self) -> bool:
        ok = True
        for topic, handle in self._handles:
            try:
                self.client.rollback(topic, handle)
            except TmsError:
                ok = False  # the transaction gets invalidated: readers skip it anyway
        self.tx, self._buffer, self._buffered, self._stored, self._handles = None, {}, 0, [], []
        return ok

    def _running(self) -> Transaction:
        if self.tx is None:
            raise TmsError("publish outside a transaction: start one with a TransactionContext")
        return self.tx


class TransactionalReader:
    """Polls a topic in order, each poll in a fresh short transaction, so it sees only committed
    messages and never skips one that commits later."""

    def __init__(self, client: MessagingClient, tx_client: TransactionClient, topic: TopicLike) -> None:
        self.client = client
        self.tx_client = tx_client
        self.topic = as_topic(topic)
        self.last_id: bytes | None = None

    def poll(self, limit: int | None = 1000) -> list[Message]:
        """The next committed messages after the last one returned (at most ``limit``)."""
        tx = self.tx_client.start_short()
        try:
            if self.last_id is None:
                messages = list(self.client.fetch(self.topic, limit=limit, transaction=tx))
            else:
                messages = list(
                    self.client.fetch(
                        self.topic, start_message=self.last_id, inclusive=False, limit=limit, transaction=tx
                    )
                )
        finally:
            self.tx_client.abort(tx)  # read-only: nothing to commit
        if messages:
            self.last_id = messages[-1].id
        return messages
