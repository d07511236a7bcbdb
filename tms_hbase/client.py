"""MessagingClient: the public entry point of tms-hbase (DESIGN.md §10)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence

from . import config
from .connection import HBaseConnection
from .errors import InstallationNotFound, InvalidArgument, PublishOutcomeUnknown
from .installation import InstallationStore, TailCacheSetting, WriterSettings
from .message_id import MessageId
from .metadata import MetadataCache, MetadataStore, TopicScan
from .reader import BatchInfo, Message, MessageReader, PositionRange
from .tables import TableNames, drop_tables, ensure_tables, missing_tables
from .topic import TopicId, TopicMetadata, user_properties
from .tx import Transaction
from .tx.pointers import MAX_LIFETIME_SECONDS, validate_max_lifetime
from .wire import RollbackDetail
from .writer import DEFAULT_MAX_BATCH_BYTES, MessageWriter


class MessagingClient:
    """A connection to tms-hbase: topic administration, publish, store, rollback and fetch.

    ``address`` is the HBase Thrift gateway (``host:port``, default ``$TMS_HBASE_THRIFT`` or
    127.0.0.1:9090); ``prefix`` names the installation: its tables are ``<prefix>_messages`` and so
    on (default ``$TMS_TABLE_PREFIX`` or ``tms``; an empty prefix is InvalidArgument).

    The tables are created by :meth:`init_tables` (``tms-admin init``) or by the first
    :meth:`create_topic` (unless ``create_tables`` is False). Every other call on a prefix whose
    tables do not exist raises InstallationNotFound and creates nothing, so a mistyped prefix is
    noticed instead of answering "no topics" from four new empty tables.

    ``timeout`` (seconds) is a deadline, not a limit per socket read: each method returns or raises
    within about ``timeout``, all the HBase calls it makes (retries included) sharing it, however
    slowly a gateway answers; HBaseUnavailable (``timed_out`` set) says it passed. The iterator that
    :meth:`fetch` returns reads lazily: each read it makes while you iterate gets ``timeout`` of its
    own. The first call of a client also looks up (or, for create_topic, creates) the tables, each
    HBase call of that under its own ``timeout`` (creating a table takes seconds).
    ``max_batch_bytes`` caps one publish or store. A transactional publish or store whose write pointer
    (``ms since the epoch x 10^6``, as Tephra makes them) is older than ``tx_max_lifetime`` seconds
    (default and maximum: Tephra's 25 h) is refused with InvalidArgument, as CDAP refuses it.
    Thread-safe; use it as a context manager or call :meth:`close`.
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
        tx_max_lifetime: float = MAX_LIFETIME_SECONDS,
    ) -> None:
        tx_max_lifetime = validate_max_lifetime(tx_max_lifetime)
        host, port = config.thrift_address(address)
        self.tables = TableNames(config.table_prefix(prefix))
        self.hbase = HBaseConnection(host, port, timeout=timeout, pool_size=pool_size)
        self._create_tables = create_tables
        self._ready = False
        self._ready_lock = threading.Lock()
        self._metadata = MetadataStore(self.hbase, self.tables.metadata)
        self._topics = MetadataCache(self._metadata, metadata_max_age)
        self._installation = InstallationStore(self.hbase, self.tables.metadata)
        self._writer = MessageWriter(
            self.hbase,
            self.tables,
            self._topics,
            WriterSettings(self._installation),
            max_batch_bytes=max_batch_bytes,
            tx_max_lifetime=tx_max_lifetime,
        )
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

    def ping(self) -> None:
        """One cheap round trip to HBase (it lists the table names): HBaseUnavailable if it does not
        answer, InstallationNotFound if this prefix's tables are not all there.

        For health checks (``tms-gateway``'s ``GET /health``): it creates nothing and reads no topic.
        """
        with self.hbase.operation():
            missing = missing_tables(self.hbase, self.tables)
        if missing:
            raise InstallationNotFound(self.tables.prefix, self.hbase.address, missing)

    def init_tables(self) -> list[str]:
        """Create any missing table of this prefix now; returns the names created."""
        created = ensure_tables(self.hbase, self.tables)
        self._ready = True
        return created

    def tail_cache_setting(self) -> TailCacheSetting | None:
        """The installation's tail-cache setting (None if it has none yet: writers then trust a
        remembered tail for 1 s and sweepers assume 30 s). See docs/guarantees.md."""
        return self._installation.read()

    def set_tail_cache_seconds(self, seconds: int) -> TailCacheSetting:
        """Set how long every writer may trust a remembered tail (whole seconds, 1-86400); the smallest
        sweeper grace is 4 x this. Changing an existing value starts a transition (4 x the larger value)
        during which writers use the smaller and sweepers the larger value, and another change is
        refused (InvalidArgument). Creates the installation's tables if they are missing, as `init` does."""
        self._ensure_ready(create=True)
        return self._installation.set_tail_cache(seconds)

    @property
    def future_predecessors(self) -> int:
        """Publishes that did not follow the row before them because it was dated more than the
        clock-skew bound ahead of this client's clock (each is logged; docs/guarantees.md)."""
        return self._writer.future_predecessors

    def require_installation(self) -> None:
        """InstallationNotFound unless every table of this prefix exists; never creates anything
        (what read-only tools call first). Checked once per client."""
        self._ensure_ready(create=False)

    def drop_tables(self) -> list[str]:
        """Delete this prefix's tables and everything in them (tests, demos); returns the names."""
        with self._ready_lock:
            self._ready = False
            return drop_tables(self.hbase, self.tables)

    def _ensure_ready(self, *, create: bool = False) -> None:
        """Check once that the tables exist; create the missing ones only when ``create`` is asked
        (and allowed), else raise InstallationNotFound."""
        if self._ready:
            return
        with self._ready_lock:
            if self._ready:
                return
            missing = missing_tables(self.hbase, self.tables)
            if missing and not (create and self._create_tables):
                raise InstallationNotFound(self.tables.prefix, self.hbase.address, missing)
            if missing:
                ensure_tables(self.hbase, self.tables)
            self._ready = True

    # -- topics -------------------------------------------------------------------------------

    def create_topic(self, topic: TopicId, properties: Mapping[str, str] | None = None) -> TopicMetadata:
        """Create a topic; ``properties`` may set ``ttl`` (seconds, default 7 days) and any other key.

        Creates the installation's tables first if they do not exist yet (see the class doc).
        Raises TopicAlreadyExists (properties unchanged) or InvalidArgument.
        """
        topic = _topic(topic)
        user_properties(properties)  # bad input changes nothing, not even the tables
        self._ensure_ready(create=True)
        self._topics.forget(topic)
        with self.hbase.operation():
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
        topic = _topic(topic)
        self._ensure_ready()
        self._topics.forget(topic)  # this client's next publish sees the new tx.mode; others within metadata_max_age
        with self.hbase.operation():
            return self._metadata.update(topic, properties, expected)

    def get_topic(self, topic: TopicId) -> TopicMetadata:
        """The topic's metadata; TopicNotFound if it does not exist."""
        topic = _topic(topic)
        self._ensure_ready()
        with self.hbase.operation():
            return self._metadata.get(topic)

    def list_topics(self, namespace: str | None = None) -> list[TopicId]:
        """The existing topics of ``namespace`` (of every namespace if None), in name order.

        A topic whose metadata row does not decode is left out, with a warning in the log
        (:meth:`scan_topics` returns such rows; :meth:`get_topic` of one raises CorruptData).
        """
        return [meta.topic for meta in self.list_topic_metadata(namespace)]

    def list_topic_metadata(self, namespace: str | None = None) -> list[TopicMetadata]:
        """Like :meth:`list_topics`, with each topic's metadata."""
        if namespace is not None:
            TopicId(namespace, "x")  # InvalidArgument for a bad namespace name, before any HBase call
        self._ensure_ready()
        with self.hbase.operation():
            return self._metadata.list(namespace)

    def scan_topics(self, namespace: str | None = None) -> TopicScan:
        """The existing topics' metadata, and the metadata rows that do not decode (``.corrupt``:
        :class:`~tms_hbase.integrity.RowCheck` with the topic and what is wrong), logging nothing."""
        self._ensure_ready()
        return self._metadata.scan(namespace)

    def delete_topic(self, topic: TopicId) -> None:
        """Delete a topic (its data becomes unreadable at once); TopicNotFound if it does not exist."""
        topic = _topic(topic)
        self._ensure_ready()
        self._topics.forget(topic)
        with self.hbase.operation():
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
        topic = _topic(topic)
        self._ensure_ready()
        point = None if resume is None else resume.resume
        with self.hbase.operation():
            return self._writer.publish(topic, payloads, tx_write_pointer, ttl, point)

    def store(
        self, topic: TopicId, payloads: Sequence[bytes], tx_write_pointer: int, *, sequence: int | None = None
    ) -> None:
        """Store payloads under a transaction write pointer; invisible until that pointer is published.

        ``sequence`` (>= 2**40) makes the keys deterministic, so storing the same payloads again
        (a retried task) overwrites them instead of adding copies.
        """
        topic = _topic(topic)
        self._ensure_ready()
        with self.hbase.operation():
            self._writer.store(topic, payloads, tx_write_pointer, sequence)

    def rollback(self, topic: TopicId, handle: RollbackDetail | bytes) -> None:
        """Mark a transactional publish rolled back: transactional readers skip it from now on."""
        topic = _topic(topic)
        detail = handle if isinstance(handle, RollbackDetail) else RollbackDetail.from_bytes(handle)
        self._ensure_ready()
        with self.hbase.operation():
            self._writer.rollback(topic, detail)

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
        Finding the start takes one deadline (``timeout``); each read while iterating another.
        """
        topic = _topic(topic)
        self._ensure_ready()
        with self.hbase.operation():
            return self._reader.fetch(topic, start_message, start_time, inclusive, limit, transaction)

    # -- slices (parallel readers such as the Spark data source) ----------------------------------

    def positions(self, topic: TopicId, start_time: int | None = None, end_time: int | None = None) -> PositionRange:
        """The batch-row positions of the topic's current generation that hold messages published in
        [start_time, end_time) (ms; None: unbounded) and not expired: found with binary searches,
        O(log n) reads. Positions are dense; the message ids of a position start with it."""
        topic = _topic(topic)
        start_time, end_time = _time("start_time", start_time), _time("end_time", end_time)
        self._ensure_ready()
        with self.hbase.operation():
            return self._reader.positions(topic, start_time, end_time)

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
        topic = _topic(topic)
        first = start if isinstance(start, MessageId) else MessageId.decode(start)
        last = end if end is None or isinstance(end, MessageId) else MessageId.decode(end)
        self._ensure_ready()
        with self.hbase.operation():
            return self._reader.fetch_range(topic, first, last, transaction)

    def batches(
        self, topic: TopicId, generation: int, first: int, last: int, *, transactional_only: bool = False
    ) -> Iterator[BatchInfo]:
        """The batch rows at positions ``first``..``last`` of a generation, described (position, publish
        time, write pointer, message count) without their payloads being decoded; with
        ``transactional_only`` only the rows that carry a write pointer (filtered in HBase)."""
        topic = _topic(topic)
        self._ensure_ready()
        return self._reader.batches(topic, generation, first, last, transactional_only=transactional_only)

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
        topic = _topic(topic)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise InvalidArgument(f"bad limit {limit!r}: expected a positive integer")
        self._ensure_ready()
        with self.hbase.operation():
            return self._reader.stored_sequences(
                topic, generation, tx_write_pointer, start, stop, limit, reverse=reverse
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
