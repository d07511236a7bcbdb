"""MessagingClient: the public entry point of tms-hbase (DESIGN.md §10)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence

from . import config
from .connection import HBaseConnection
from .consumer import Consumer
from .doorbell import DEFAULT_HOST, Doorbells
from .errors import InvalidArgument, PublishOutcomeUnknown
from .inspect import Inspector
from .metadata import MetadataCache, MetadataStore
from .metrics import CLIENT_METRICS
from .reader import Message, MessageReader
from .stats import Lag, TopicStatistics, TopicStats
from .storage import Table
from .subscription_admin import EARLIEST, SubscriptionAdmin
from .subscriptions import Subscription, SubscriptionStore, check_name
from .tables import CORE, TableNames, drop_tables, ensure_tables
from .topic import TopicId, TopicMetadata
from .tx import Transaction
from .tx.client import TransactionClient
from .tx.fate import snapshot_from_hbase
from .wire import RollbackDetail
from .writer import DEFAULT_MAX_BATCH_BYTES, MessageWriter


class MessagingClient:
    """A connection to tms-hbase: topic administration, publish, store, rollback and fetch.

    ``address`` is the HBase Thrift gateway (``host:port``, default ``$TMS_HBASE_THRIFT`` or
    127.0.0.1:9090); ``prefix`` namespaces the tables (default ``$TMS_TABLE_PREFIX`` or ``tms``).
    The tables are created on first use unless ``create_tables`` is False. ``timeout`` bounds every
    HBase call (seconds); ``max_batch_bytes`` caps one publish or store. Thread-safe; use it as a
    context manager or call :meth:`close`.
    """

    def __init__(
        self,
        address: str | None = None,
        prefix: str | None = None,
        *,
        timeout: float = 10.0,
        pool_size: int = 8,
        create_tables: bool = True,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        metadata_max_age: float = 1.0,
    ) -> None:
        host, port = config.thrift_address(address)
        self.tables = TableNames(config.table_prefix(prefix))
        self.hbase = HBaseConnection(host, port, timeout=timeout, pool_size=pool_size)
        self._create_tables = create_tables
        self._ready = self._subscriptions_ready = False
        self._ready_lock = threading.Lock()
        self._metadata = MetadataStore(self.hbase, self.tables.metadata)
        self._topics = MetadataCache(self._metadata, metadata_max_age)
        self._writer = MessageWriter(self.hbase, self.tables, self._topics, max_batch_bytes=max_batch_bytes)
        self._reader = MessageReader(self.hbase, self.tables, self._topics)
        messages = Table(self.hbase, self.tables.messages)
        self._subscriptions = SubscriptionStore(Table(self.hbase, self.tables.subscriptions))
        self._subscription_admin = SubscriptionAdmin(self._subscriptions, messages, self._reader, self.tx_state)
        self._stats = TopicStatistics(messages, Table(self.hbase, self.tables.payloads), self._reader)
        self._doorbells = Doorbells(self.tables.prefix, self._doorbells_of)

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> MessagingClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections (consumers of this client should be closed first)."""
        self._doorbells.close()
        self.hbase.close()

    @property
    def max_batch_bytes(self) -> int:
        """The largest batch (sum of payload sizes plus 4 bytes each) one publish or store takes."""
        return self._writer.max_batch_bytes

    def __repr__(self) -> str:
        return f"MessagingClient({self.hbase.address!r}, prefix={self.tables.prefix!r})"

    def init_tables(self) -> list[str]:
        """Create any missing table of this prefix now; returns the names created."""
        created = ensure_tables(self.hbase, self.tables)
        self._ready = self._subscriptions_ready = True
        return created

    def drop_tables(self) -> list[str]:
        """Delete this prefix's tables and everything in them (tests, demos); returns the names."""
        with self._ready_lock:
            self._ready = self._subscriptions_ready = False
            return drop_tables(self.hbase, self.tables)

    def _ensure_ready(self) -> None:
        if self._ready or not self._create_tables:
            return
        with self._ready_lock:
            if not self._ready:
                ensure_tables(self.hbase, self.tables, CORE)
                self._ready = True

    def _ensure_subscriptions(self) -> None:
        """The subscriptions table is made on the first use of subscriptions (tables.CORE)."""
        self._ensure_ready()
        if self._subscriptions_ready or not self._create_tables:
            return
        with self._ready_lock:
            if not self._subscriptions_ready:
                ensure_tables(self.hbase, self.tables, ["subscriptions"])
                self._subscriptions_ready = True

    # -- topics -------------------------------------------------------------------------------

    def create_topic(self, topic: TopicId, properties: Mapping[str, str] | None = None) -> TopicMetadata:
        """Create a topic; ``properties`` may set ``ttl`` (seconds, default 7 days) and any other key.

        Raises TopicAlreadyExists (properties unchanged) or InvalidArgument.
        """
        self._ensure_ready()
        topic = _topic(topic)
        self._topics.forget(topic)
        return self._metadata.create(topic, properties)

    def update_topic(
        self,
        topic: TopicId,
        properties: Mapping[str, str],
        *,
        expected: TopicMetadata | None = None,
    ) -> TopicMetadata:
        """Replace a topic's properties (the generation is kept). TopicNotFound if it does not exist.

        Pass ``expected`` (from :meth:`get_topic`) to update only if nobody changed the topic
        since; otherwise ConcurrentModification is raised and nothing is written.
        """
        self._ensure_ready()
        return self._metadata.update(_topic(topic), properties, expected)

    def get_topic(self, topic: TopicId) -> TopicMetadata:
        """The topic's metadata; TopicNotFound if it does not exist."""
        self._ensure_ready()
        return self._metadata.get(_topic(topic))

    def list_topics(self, namespace: str | None = None) -> list[TopicId]:
        """The existing topics of ``namespace`` (of every namespace if None), in name order."""
        self._ensure_ready()
        return [meta.topic for meta in self._metadata.list(namespace)]

    def list_topic_metadata(self, namespace: str | None = None) -> list[TopicMetadata]:
        """Like :meth:`list_topics`, with each topic's metadata."""
        self._ensure_ready()
        return self._metadata.list(namespace)

    def delete_topic(self, topic: TopicId) -> None:
        """Delete a topic (its data becomes unreadable at once); TopicNotFound if it does not exist."""
        self._ensure_ready()
        topic = _topic(topic)
        self._topics.forget(topic)
        self._metadata.delete(topic)

    # -- messages -----------------------------------------------------------------------------

    def publish(
        self,
        topic: TopicId,
        payloads: Sequence[bytes],
        tx_write_pointer: int | None = None,
        *,
        ttl: float | None = None,
        resume: PublishOutcomeUnknown | None = None,
    ) -> RollbackDetail | None:
        """Publish a batch of payloads, in order, as one unit: all of it is stored or none.

        Without ``tx_write_pointer`` returns None. With one, the batch carries the transaction's
        write pointer and a :class:`RollbackDetail` is returned (``bytes(detail)`` is the opaque
        handle); an empty list then publishes the payloads stored before with :meth:`store`.
        ``ttl`` (seconds) expires these messages sooner than the topic's TTL.

        If HBase stops answering mid-publish, PublishOutcomeUnknown is raised; calling publish again
        with the same arguments and ``resume=`` that error stores the batch exactly once.
        """
        self._ensure_ready()
        topic = _topic(topic)
        point = None if resume is None else resume.resume
        started = time.perf_counter()
        detail = self._writer.publish(topic, payloads, tx_write_pointer, ttl, point)
        elapsed = time.perf_counter() - started
        CLIENT_METRICS.published(str(topic), len(payloads), sum(map(len, payloads)), elapsed)
        self._doorbells.ring(topic)
        return detail

    def notify_consumers(self, topic: TopicId) -> None:
        """Wake the consumers waiting on ``topic`` (publish does this itself; a transactional publisher
        calls it again once its transaction committed, when the messages become visible)."""
        self._doorbells.ring(_topic(topic))

    def store(
        self, topic: TopicId, payloads: Sequence[bytes], tx_write_pointer: int, *, sequence: int | None = None
    ) -> None:
        """Store payloads under a transaction write pointer; invisible until that pointer is published.

        ``sequence`` (>= 2**40) makes the keys deterministic, so storing the same payloads again
        (a retried task) overwrites them instead of adding copies.
        """
        self._ensure_ready()
        self._writer.store(_topic(topic), payloads, tx_write_pointer, sequence)

    def rollback(self, topic: TopicId, handle: RollbackDetail | bytes) -> None:
        """Mark a transactional publish rolled back: transactional readers skip it from now on."""
        self._ensure_ready()
        detail = handle if isinstance(handle, RollbackDetail) else RollbackDetail.from_bytes(handle)
        self._writer.rollback(_topic(topic), detail)

    def fetch(
        self,
        topic: TopicId,
        start_message: bytes | None = None,
        start_time: int | None = None,
        inclusive: bool = True,
        limit: int | None = None,
        transaction: Transaction | None = None,
    ) -> Iterator[Message]:
        """Messages in order from a message id or a publish time (ms), up to ``limit``.

        Without a transaction every message is returned, rolled-back ones included. With one,
        rolled-back and invalid messages are skipped and the fetch stops at the first message of a
        transaction the reader cannot see yet. Bad arguments raise here, before iterating.
        """
        self._ensure_ready()
        return self._reader.fetch(_topic(topic), start_message, start_time, inclusive, limit, transaction)

    # -- subscriptions and consumers ------------------------------------------------------------

    def create_subscription(self, topic: TopicId, name: str, start: str | int = EARLIEST) -> Subscription:
        """A durable consume mark named ``name`` on the topic, consuming from ``start``: "earliest"
        (every readable message), "latest" (messages published from now on) or a publish time (ms).

        Raises SubscriptionAlreadyExists, TopicNotFound or InvalidArgument. Subscriptions go with
        their topic: deleting (and re-creating) the topic removes them.
        """
        self._ensure_subscriptions()
        return self._subscription_admin.create(self._metadata.get(_topic(topic)), name, start)

    def get_subscription(self, topic: TopicId, name: str) -> Subscription:
        """The subscription (its committed mark, who consumes it); SubscriptionNotFound."""
        self._ensure_subscriptions()
        return self._subscription_admin.get(self._metadata.get(_topic(topic)), name)

    def list_subscriptions(self, topic: TopicId) -> list[Subscription]:
        """The topic's subscriptions, in name order."""
        self._ensure_subscriptions()
        return self._subscription_admin.list(self._metadata.get(_topic(topic)))

    def delete_subscription(self, topic: TopicId, name: str, *, force: bool = False) -> None:
        """Delete a subscription; SubscriptionNotFound. SubscriptionBusy while a consumer holds it,
        unless ``force`` (that consumer then fails with LeaseLost)."""
        self._ensure_subscriptions()
        self._subscription_admin.delete(self._metadata.get(_topic(topic)), name, force=force)

    def reset_subscription(
        self,
        topic: TopicId,
        name: str,
        start_message: bytes | str | None = None,
        start_time: int | None = None,
        *,
        force: bool = False,
    ) -> Subscription:
        """Move the mark: the next message delivered is ``start_message`` (a message id, or "earliest"
        or "latest"), or the first one published at ``start_time`` (ms) or later. It may move
        backwards (to consume again) or forwards (to skip). SubscriptionBusy while a consumer holds
        the subscription, unless ``force`` (that consumer then fails with LeaseLost)."""
        self._ensure_subscriptions()
        meta = self._metadata.get(_topic(topic))
        return self._subscription_admin.reset(meta, name, start_message, start_time, force=force)

    def lag(self, topic: TopicId, name: str) -> Lag:
        """How far the subscription is behind: ``Lag(messages, seconds)`` (a few reads, no scan)."""
        self._ensure_subscriptions()
        meta = self._metadata.get(_topic(topic))
        subscription = self._subscription_admin.get(meta, name)
        return self._stats.lag(meta.topic, meta.generation, meta.ttl, subscription.position)

    def topic_stats(self, topic: TopicId, *, windows: Sequence[int] | None = None) -> TopicStats:
        """Generation, first and last position and publish time, messages and bytes, publish rates over
        ``windows`` (seconds; default 1, 5 and 15 minutes) and every subscription with its lag."""
        self._ensure_subscriptions()
        meta = self._metadata.get(_topic(topic))
        subscriptions = [(s.name, s.position) for s in self._subscription_admin.list(meta)]
        if windows is None:
            return self._stats.topic_stats(meta.topic, meta.generation, meta.ttl, subscriptions)
        if any(isinstance(w, bool) or not isinstance(w, int) or w <= 0 for w in windows):
            raise InvalidArgument(f"bad windows {windows!r}: expected whole seconds > 0")
        return self._stats.topic_stats(meta.topic, meta.generation, meta.ttl, subscriptions, windows)

    def consumer(
        self,
        topic: TopicId,
        name: str,
        *,
        max_wait: float = 5.0,
        transaction: Transaction | TransactionClient | None = None,
        auto_commit: bool = False,
        lease_seconds: float = 10.0,
        wait_for_lease: float | None = 0.0,
        doorbell: str | None = DEFAULT_HOST,
        poll_interval: float = 0.5,
        batch: int = 1000,
    ) -> Consumer:
        """The active consumer of a subscription (docs/consumers.md).

        ``max_wait``: seconds an iteration waits for a new message before it ends. ``transaction``:
        read transactionally, with a fresh view per read from a TransactionClient (which also settles
        transactional marks left by a crashed consumer) or with one fixed Transaction.
        ``auto_commit``: commit delivered messages once handled (the next one asked for, the iteration
        or the ``with`` block ended without an error), at most every second. ``lease_seconds``: a
        crashed consumer's standby takes over after this long; ``wait_for_lease``: seconds to wait
        for another consumer's lease to run out (None: forever) before SubscriptionBusy.
        ``doorbell``: the address publishers ring to wake this consumer (None: only publishers of this
        process wake it); ``poll_interval``: seconds between reads while waiting regardless.
        """
        self._ensure_subscriptions()
        topic = _topic(topic)
        meta = self._metadata.get(topic)
        return Consumer(
            topic=topic,
            name=check_name(name),
            generation=meta.generation,
            store=self._subscriptions,
            reader=self._reader,
            topics=self._topics,
            prefix=self.tables.prefix,
            tx_state=self.tx_state,
            max_wait=max_wait,
            transaction=transaction,
            auto_commit=auto_commit,
            lease_seconds=lease_seconds,
            wait_for_lease=wait_for_lease,
            doorbell=doorbell,
            poll_interval=poll_interval,
            batch=batch,
        )

    def inspector(self) -> Inspector:
        """Row-level reading of topics for people (``tms-admin topic tail``): corrupt rows are reported
        as such instead of raising, and each message shows its transaction's state."""
        self._ensure_ready()
        return Inspector(Table(self.hbase, self.tables.messages), Table(self.hbase, self.tables.payloads), self._reader)

    def tx_state(self) -> Transaction:
        """The transaction state as a read-only Transaction rebuilt from HBase, without the server: it
        sees committed transactions only. Resolves transactional marks; inspection uses it too."""
        return snapshot_from_hbase(self.hbase, self.tables.txstate)

    def _doorbells_of(self, topic: TopicId) -> list[str]:
        return self._subscription_admin.bells(self._topics.get(topic))


def _topic(topic: object) -> TopicId:
    """Accept a TopicId (or a ``"namespace:topic"`` string) and nothing else."""
    if isinstance(topic, TopicId):
        return topic
    if isinstance(topic, str):
        return TopicId.parse(topic)
    raise InvalidArgument(f"expected a TopicId or 'namespace:topic', got {type(topic).__name__}")
