"""MessagingClient: the public entry point of tms-hbase (DESIGN.md §10)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence

from . import config
from .connection import HBaseConnection
from .errors import InvalidArgument, PublishOutcomeUnknown
from .message_id import MessageId
from .metadata import MetadataCache, MetadataStore
from .reader import BatchInfo, Message, MessageReader, PositionRange
from .tables import TableNames, drop_tables, ensure_tables
from .topic import TopicId, TopicMetadata
from .tx import Transaction
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
        self._ready = False
        self._ready_lock = threading.Lock()
        self._metadata = MetadataStore(self.hbase, self.tables.metadata)
        self._topics = MetadataCache(self._metadata, metadata_max_age)
        self._writer = MessageWriter(self.hbase, self.tables, self._topics, max_batch_bytes=max_batch_bytes)
        self._reader = MessageReader(self.hbase, self.tables, self._topics)

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> MessagingClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections."""
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
        self._ready = True
        return created

    def drop_tables(self) -> list[str]:
        """Delete this prefix's tables and everything in them (tests, demos); returns the names."""
        with self._ready_lock:
            self._ready = False
            return drop_tables(self.hbase, self.tables)

    def _ensure_ready(self) -> None:
        if self._ready or not self._create_tables:
            return
        with self._ready_lock:
            if not self._ready:
                self.init_tables()

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
        point = None if resume is None else resume.resume
        return self._writer.publish(_topic(topic), payloads, tx_write_pointer, ttl, point)

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

    # -- slices (parallel readers such as the Spark data source) ----------------------------------

    def positions(self, topic: TopicId, start_time: int | None = None, end_time: int | None = None) -> PositionRange:
        """The batch-row positions of the topic's current generation that hold messages published in
        [start_time, end_time) (ms; None: unbounded) and not expired: found with binary searches,
        O(log n) reads. Positions are dense; the message ids of a position start with it."""
        self._ensure_ready()
        return self._reader.positions(_topic(topic), _time("start_time", start_time), _time("end_time", end_time))

    def fetch_range(
        self,
        topic: TopicId,
        start: bytes | MessageId,
        end: bytes | MessageId | None = None,
        transaction: Transaction | None = None,
    ) -> Iterator[Message]:
        """The messages with ``start`` <= id < ``end`` (to the tail if ``end`` is None), in order: a slice
        that one of many parallel readers takes. Both ids must be of the topic's current generation
        (InvalidArgument otherwise); ``MessageId(generation, position, 0)`` is where a position begins.
        With a transaction it skips and stops as :meth:`fetch` does."""
        self._ensure_ready()
        first = start if isinstance(start, MessageId) else MessageId.decode(start)
        last = end if end is None or isinstance(end, MessageId) else MessageId.decode(end)
        return self._reader.fetch_range(_topic(topic), first, last, transaction)

    def batches(
        self, topic: TopicId, generation: int, first: int, last: int, *, transactional_only: bool = False
    ) -> Iterator[BatchInfo]:
        """The batch rows at positions ``first``..``last`` of a generation, described (position, publish
        time, write pointer, message count) without their payloads being decoded; with
        ``transactional_only`` only the rows that carry a write pointer (filtered in HBase)."""
        self._ensure_ready()
        return self._reader.batches(_topic(topic), generation, first, last, transactional_only=transactional_only)

    def stored_sequences(
        self,
        topic: TopicId,
        generation: int,
        tx_write_pointer: int,
        start: int = 0,
        stop: int | None = None,
        limit: int = 1000,
        *,
        reverse: bool = False,
    ) -> list[int]:
        """The sequences (message indexes in a pointer row) in [start, stop) of the payloads stored under
        a write pointer: the lowest ``limit``, ascending, or the highest, descending, with ``reverse``.
        Reads keys only."""
        self._ensure_ready()
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise InvalidArgument(f"bad limit {limit!r}: expected a positive integer")
        return self._reader.stored_sequences(
            _topic(topic), generation, tx_write_pointer, start, stop, limit, reverse=reverse
        )


def _time(name: str, value: object) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise InvalidArgument(f"bad {name} {value!r}: expected milliseconds since the epoch, >= 0")
    return value


def _topic(topic: object) -> TopicId:
    """Accept a TopicId (or a ``"namespace:topic"`` string) and nothing else."""
    if isinstance(topic, TopicId):
        return topic
    if isinstance(topic, str):
        return TopicId.parse(topic)
    raise InvalidArgument(f"expected a TopicId or 'namespace:topic', got {type(topic).__name__}")
