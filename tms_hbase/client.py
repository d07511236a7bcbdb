"""MessagingClient: the public entry point of tms-hbase (docs/design.md, the API contract)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from tms_hbase.api import MessagingService
from tms_hbase.client_admin import ClientAdmin
from tms_hbase.client_slices import Slices
from tms_hbase.config import Config
from tms_hbase.consume.doorbell import DEFAULT_HOST, Address
from tms_hbase.errors import (
    InvalidArgument,
    PublishOutcomeUnknown,
    SubscriptionAlreadyExists,
    TopicAlreadyExists,
)
from tms_hbase.installation.hbase_clock import HBaseClock, PublishClock
from tms_hbase.installation.metadata import CLOCK_COLUMN, MetadataCache, MetadataStore
from tms_hbase.installation.readiness import Readiness
from tms_hbase.installation.settings import InstallationStore, WriterSettings
from tms_hbase.model import checks
from tms_hbase.model.clock import check_time_ms
from tms_hbase.model.metrics import CLIENT_METRICS
from tms_hbase.model.record import Record
from tms_hbase.model.retry import Retry
from tms_hbase.model.tables import TableNames
from tms_hbase.model.tail_cache import SETTINGS_KEY
from tms_hbase.model.topic import TopicId, TopicLike, TopicMetadata, user_properties
from tms_hbase.model.topic import as_topic as _topic
from tms_hbase.model.transaction import Transaction
from tms_hbase.runtime import green
from tms_hbase.storage.connection import HBaseConnection
from tms_hbase.storage.hbase import Installation
from tms_hbase.tx.pointers import MAX_LIFETIME_SECONDS, validate_max_lifetime

if TYPE_CHECKING:
    # The parts below are made on first use, each importing its module then: a command that only
    # administers topics (``tms-admin topic list``) loads no publish, fetch, consumer or shared-queue code.
    from tms_hbase.consume.consumer import Consumer
    from tms_hbase.consume.doorbell import Doorbells
    from tms_hbase.consume.subscription_admin import SubscriptionAdmin
    from tms_hbase.consume.subscriptions import SubscriptionStore
    from tms_hbase.fetch.reader import MessageReader
    from tms_hbase.fetch.stats import TopicStatistics
    from tms_hbase.isolation.committed import CommittedReads
    from tms_hbase.model.message import Message
    from tms_hbase.model.published import PublishResult
    from tms_hbase.model.stats import Lag, SharedStats, TopicStats
    from tms_hbase.model.subscription import ConsumerSession, PendingMessage, Subscription
    from tms_hbase.model.wire import RollbackDetail
    from tms_hbase.ordering.appends import Resume
    from tms_hbase.publish.writer import MessageWriter
    from tms_hbase.shared.admin import SharedAdmin
    from tms_hbase.shared.consumer import SharedConsumer
    from tms_hbase.shared.store import SharedStore
    from tms_hbase.tx.client import TransactionClient  # passed in by callers

P = TypeVar("P")


class MessagingClient(MessagingService):
    """A connection to tms-hbase: topic administration, publish, store, rollback and fetch.

    ``address`` is the HBase Thrift gateway (``host:port``, or several separated by commas to fail
    over between; default ``$TMS_HBASE_THRIFT`` or 127.0.0.1:9090); ``prefix`` names the installation:
    its tables are ``<prefix>_messages`` and so on (default ``$TMS_TABLE_PREFIX`` or ``tms``; an empty
    prefix is InvalidArgument). All of it can come as one :class:`~tms_hbase.config.Config` instead
    (``config=``), with the ``retry`` policy used wherever the client retries.

    The tables are created only when asked: by ``client.admin.init_tables()`` (``tms-admin init``), or
    by the first :meth:`create_topic` of a client made with ``create_tables=True``. Every call on a
    prefix whose tables do not exist otherwise raises InstallationNotFound and creates nothing, so a
    mistyped prefix is noticed instead of making a new, empty installation.

    ``timeout_seconds`` is a deadline, not a limit per socket read:
    each method returns or raises within about that, all the HBase calls it makes (retries included) sharing it, however
    slowly a gateway answers; HBaseUnavailable (``timed_out`` set) says it passed. The iterator that
    :meth:`fetch` returns reads lazily: each read it makes while you iterate gets ``timeout_seconds`` of its
    own. The first call of a client also looks up (or, with ``create_tables``, creates) the tables, each
    HBase call of that under its own ``timeout_seconds`` (creating a table takes seconds).
    ``max_batch_bytes`` caps one publish or store. A transactional publish or store whose write pointer
    (``ms since the epoch x 10^6``, as Tephra makes them) is older than ``tx_max_lifetime_seconds``
    (default and maximum: Tephra's 25 h) is refused with InvalidArgument, as CDAP refuses it.
    ``tx_server`` (default ``$TMS_TX_SERVER``) is the transaction server whose state its consumers'
    committed-only reads judge transactional messages by (:mod:`~tms_hbase.isolation.committed`; without one, the
    state the server keeps in HBase). Thread-safe; use it as a context manager or call :meth:`close`.
    """

    _pool_class: type[HBaseConnection] = HBaseConnection
    """The storage port's connection pool (the asyncio client's runs its Thrift calls on an event loop)."""

    def __init__(
        self,
        address: str | None = None,
        prefix: str | None = None,
        *,
        config: Config | None = None,
        timeout_seconds: float | None = None,
        pool_size: int | None = None,
        retry: Retry | None = None,
        create_tables: bool = False,
        max_batch_bytes: int = checks.DEFAULT_MAX_BATCH_BYTES,
        metadata_max_age_seconds: float = 1.0,
        tx_max_lifetime_seconds: float = MAX_LIFETIME_SECONDS,
        tx_server: str | None = None,
    ) -> None:
        tx_max_lifetime_seconds = validate_max_lifetime(tx_max_lifetime_seconds)
        config = Config.of_client(
            config, address, prefix, timeout_seconds=timeout_seconds, retry=retry, pool_size=pool_size
        )
        self.config = config
        """Where this client's installation is and how it talks to it (:class:`~tms_hbase.config.Config`)."""
        (host, port), *fallbacks = config.addresses
        pool = self._pool_class(
            host,
            port,
            timeout=config.timeout_seconds,
            pool_size=config.pool_size,
            retry=config.retry,
            fallbacks=fallbacks,
            transport=config.transport,
        )
        self.installation = Installation(pool, TableNames(config.prefix))
        """The installation's tables over this client's connection pool: what the sweeper, the CLIs,
        Spark tasks and other components built on the library use (see docs/architecture.md)."""
        self._readiness = Readiness(self.installation, may_create=create_tables)
        self._metadata = MetadataStore(self.installation.metadata, retry=config.retry)
        self._topics = MetadataCache(self._metadata, metadata_max_age_seconds)
        storage = self.installation
        self._settings = InstallationStore(storage.metadata)
        self._writer_settings = WriterSettings(self._settings)
        self.hbase_clock = HBaseClock(storage.metadata, SETTINGS_KEY, CLOCK_COLUMN)
        """HBase's clock as this client sees it (:mod:`~tms_hbase.installation.hbase_clock`): what publishes are dated
        against, leases expire on and the sweeper judges expiry by, whatever this host's clock says."""
        self._max_batch_bytes = max_batch_bytes
        self._tx_max_lifetime_seconds = tx_max_lifetime_seconds
        self._tx_server = tx_server
        self.admin = ClientAdmin(
            self.installation,
            self._readiness,
            settings=self._settings,
            metadata=self._metadata,
            reader=lambda: self._reader,
            writer=lambda: self._writer,
            client=self,
            topic_report=self._topic_report,
            topic_reports=self._topic_reports,
        )
        """An operator's calls: tables, the tail-cache setting, inspection, diagnostics
        (:class:`~tms_hbase.client_admin.ClientAdmin`)."""
        self.slices = Slices(self.installation, self._readiness, lambda: self._reader, lambda: self._committed_reads)
        """Parallel readers' calls, such as the Spark data source's (:class:`~tms_hbase.client_slices.Slices`)."""
        self._parts: dict[str, object] = {}  # the parts made so far (see _part)
        self._parts_lock = green.no_wait_lock(reentrant=True)  # (a part's maker asks for the parts it is made of)
        self._publishing: tuple[MessageWriter, Doorbells] | None = None  # the parts every publish uses, once made

    # -- parts, each made on first use ----------------------------------------------------------

    def _part(self, make: Callable[[], P]) -> P:
        """The part ``make`` makes, made once (under a lock: two threads never get two writers); the
        module it needs is imported then, so a command that never publishes never loads the writer."""
        part = self._parts.get(make.__name__)
        if part is None:
            with self._parts_lock:  # (no part's constructor waits: a greenlet never switches holding it)
                part = self._parts.get(make.__name__)
                if part is None:
                    part = self._parts[make.__name__] = make()
        return part  # type: ignore[return-value]

    @property
    def _writer(self) -> MessageWriter:
        return self._part(self._make_writer)

    def _make_writer(self) -> MessageWriter:
        from tms_hbase.publish.writer import MessageWriter

        storage, settings, writer_id = self.installation, self._writer_settings, uuid.uuid4().bytes
        return MessageWriter(
            storage.messages,
            storage.payloads,
            self._topics,
            settings,
            writer_id=writer_id,
            max_batch_bytes=self._max_batch_bytes,
            retry=self.config.retry,
            tx_max_lifetime=self._tx_max_lifetime_seconds,
            clock=PublishClock(self.hbase_clock, lambda: settings.tail_cache_seconds() * 1000, writer_id.hex()).now_ms,
        )

    @property
    def _reader(self) -> MessageReader:
        return self._part(self._make_reader)

    def _make_reader(self) -> MessageReader:
        from tms_hbase.fetch.reader import MessageReader

        storage = self.installation
        return MessageReader(
            storage.messages, storage.payloads, self._topics, self._writer_settings.skew_bound_seconds, self.hbase_clock
        )

    @property
    def _committed_reads(self) -> CommittedReads:
        return self._part(self._make_committed_reads)

    def _make_committed_reads(self) -> CommittedReads:
        from tms_hbase.isolation.committed import CommittedReads

        return CommittedReads(
            self.installation.txstate,
            self._tx_server,
            timeout_seconds=self.config.timeout_seconds,
            socket_class=self.installation.hbase.connection_class.socket_class,  # under asyncio, the loop's
        )

    def _isolated(self, isolation: str, transaction: object = None) -> CommittedReads | None:
        """The view a consumer reading with ``isolation`` judges transactional rows by: the installation's
        transaction state (committed only), or none (every row as stored, or a transaction's view)."""
        from tms_hbase.model.isolation import COMMITTED, check_isolation

        if check_isolation(isolation) != COMMITTED:
            if transaction is not None:
                raise InvalidArgument("a transactional consumer reads what its transaction sees: no isolation")
            return None
        return None if transaction is not None else self._committed_reads

    @property
    def _subscriptions(self) -> SubscriptionStore:
        return self._part(self._make_subscriptions)

    def _make_subscriptions(self) -> SubscriptionStore:
        from tms_hbase.consume.subscriptions import SubscriptionStore

        return SubscriptionStore(self.installation.table("subscriptions"))

    @property
    def _subscription_admin(self) -> SubscriptionAdmin:
        return self._part(self._make_subscription_admin)

    def _make_subscription_admin(self) -> SubscriptionAdmin:
        from tms_hbase.consume.subscription_admin import SubscriptionAdmin

        return SubscriptionAdmin(self._subscriptions, self.installation.messages, self._reader, self.admin.tx_state)

    @property
    def _stats(self) -> TopicStatistics:
        return self._part(self._make_stats)

    def _make_stats(self) -> TopicStatistics:
        from tms_hbase.fetch.stats import TopicStatistics

        return TopicStatistics(
            self.installation.messages, self.installation.payloads, self._reader, lambda: self._committed_reads.view()
        )

    @property
    def _shared_store(self) -> SharedStore:
        return self._part(self._make_shared_store)

    def _make_shared_store(self) -> SharedStore:
        from tms_hbase.shared.store import SharedStore

        return SharedStore(self.installation.table("subscriptions"))

    @property
    def _shared(self) -> SharedAdmin:
        return self._part(self._make_shared)

    def _make_shared(self) -> SharedAdmin:
        from tms_hbase.shared.admin import SharedAdmin

        return SharedAdmin(
            self._subscription_admin,
            self._shared_store,
            self._reader,
            self._stats,
            self._metadata.get,
            self.hbase_clock.now_ms,
        )

    @property
    def _doorbells(self) -> Doorbells:
        return self._part(self._make_doorbells)

    def _make_doorbells(self) -> Doorbells:
        from tms_hbase.consume.doorbell import Doorbells

        return Doorbells(self.installation.prefix, self._doorbells_of)

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> MessagingClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections (consumers of this client should be closed first), after
        releasing the offsets its writer reserved ahead in sequencer topics."""
        parts = self._parts
        try:
            if "_make_writer" in parts:
                self._writer.close()
        finally:
            try:
                if "_make_doorbells" in parts:
                    self._doorbells.close()
            finally:
                if "_make_committed_reads" in parts:
                    self._committed_reads.close()
                self.installation.hbase.close()

    @property
    def max_batch_bytes(self) -> int:
        """The largest batch (sum of payload sizes plus 4 bytes each) one publish or store takes."""
        return self._max_batch_bytes

    def __repr__(self) -> str:
        return f"MessagingClient({self.installation.address!r}, prefix={self.installation.prefix!r})"

    def ping(self) -> None:
        """One cheap round trip to HBase (it lists the table names): HBaseUnavailable if it does not
        answer, InstallationNotFound if this prefix's tables are not all there.

        For health checks (``tms-gateway``'s ``GET /health``): it creates nothing and reads no topic.
        """
        self._readiness.check()

    def _ensure_ready(self, *, create: bool = False) -> None:
        self._readiness.ensure(create=create)

    def _ensure_subscriptions(self) -> None:
        self._readiness.ensure_subscriptions()

    # -- topics -------------------------------------------------------------------------------

    def create_topic(
        self, topic: TopicLike, properties: Mapping[str, str] | None = None, *, exist_ok: bool = False
    ) -> TopicMetadata:
        """Create a topic; ``properties`` may set ``ttl`` (seconds, default 7 days) and any other key.

        Creates the installation's tables first if they do not exist yet and the client was made with
        ``create_tables=True``; otherwise InstallationNotFound (see the class doc).
        Raises TopicAlreadyExists (properties unchanged), unless ``exist_ok``: then the existing topic is
        returned as it is, whatever ``properties`` say; InvalidArgument.
        """
        topic = _topic(topic)
        user_properties(properties)  # bad input changes nothing, not even the tables
        self._ensure_ready(create=True)
        try:
            with self.installation.hbase.operation():
                return self._metadata.create(topic, properties)
        except TopicAlreadyExists:
            if not exist_ok:
                raise
        finally:
            self._topics.forget(topic)  # after the change: a read in flight across it is not kept either
        return self.get_topic(topic)

    def update_topic(
        self,
        topic: TopicLike,
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
        try:
            with self.installation.hbase.operation():
                return self._metadata.update(topic, properties, expected)
        finally:  # this client's next publish sees the new tx.mode; others within metadata_max_age_seconds
            self._topics.forget(topic)

    def get_topic(self, topic: TopicLike) -> TopicMetadata:
        """The topic's metadata; TopicNotFound if it does not exist."""
        topic = _topic(topic)
        self._ensure_ready()
        with self.installation.hbase.operation():
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
            checks.namespace(namespace)
        self._ensure_ready()
        with self.installation.hbase.operation():
            return self._metadata.list(namespace)

    def delete_topic(self, topic: TopicLike) -> None:
        """Delete a topic (its data becomes unreadable at once); TopicNotFound if it does not exist."""
        topic = _topic(topic)
        self._ensure_ready()
        try:
            with self.installation.hbase.operation():
                self._metadata.delete(topic)
        finally:
            self._topics.forget(topic)

    # -- messages -----------------------------------------------------------------------------

    def publish(
        self,
        topic: TopicLike,
        payloads: Sequence[bytes | Record],
        tx_write_pointer: int | None = None,
        *,
        ttl_seconds: float | None = None,
        resume: PublishOutcomeUnknown | None = None,
    ) -> PublishResult:
        """Publish a batch of payloads, in order, as one unit: all of it is stored or none.

        Returns a :class:`~tms_hbase.model.published.PublishResult`: the batch row's generation and
        position, the count and the message ids. With ``tx_write_pointer`` the batch carries the
        transaction's write pointer and the result's ``rollback`` is the handle :meth:`rollback` takes
        (``bytes(result.rollback)`` is CDAP's opaque handle); an empty list then publishes the payloads
        stored before with :meth:`store` (a pointer row: no ids in the result).
        ``ttl_seconds`` expires these messages sooner than the topic's TTL.

        If HBase stops answering mid-publish, PublishOutcomeUnknown is raised; calling publish again
        with the same arguments and ``resume=`` that error stores the batch exactly once.
        """
        topic = _topic(topic)
        self._ensure_ready()
        point: Resume | None = None
        if resume is not None:
            from tms_hbase.ordering.appends import Resume

            found = resume.resume
            if found is not None and not isinstance(found, Resume):
                raise InvalidArgument("resume= takes the PublishOutcomeUnknown a MessagingClient's publish raised")
            point = found
        return self._publish(topic, (payloads,), tx_write_pointer, ttl_seconds, point)

    def _publish(
        self,
        topic: TopicId,
        batches: Sequence[Sequence[bytes | Record]],
        tx_write_pointer: int | None,
        ttl_seconds: float | None,
        resume: Resume | None,
    ) -> PublishResult:
        """Write ``batches`` as one batch row (several: publishes put together, as the asyncio client does),
        each counted as one publish in the metrics, and ring the topic's consumers."""
        payloads = batches[0] if len(batches) == 1 else [p for batch in batches for p in batch]
        publishing = self._publishing
        if publishing is None:
            publishing = self._publishing = (self._writer, self._doorbells)
        writer, doorbells = publishing
        started = time.perf_counter()
        with self.installation.hbase.operation():
            result, cell, size = writer.publish(topic, payloads, tx_write_pointer, ttl_seconds, resume)
        CLIENT_METRICS.published(str(topic), result.count, size, time.perf_counter() - started, len(batches))
        doorbells.ring(topic, (result.generation, result.position), cell)
        return result

    def notify_consumers(self, topic: TopicLike) -> None:
        """Wake the consumers waiting on ``topic`` (publish does this itself; a transactional publisher
        calls it again once its transaction committed, when the messages become visible)."""
        self._doorbells.ring(_topic(topic))

    def store(
        self,
        topic: TopicLike,
        payloads: Sequence[bytes | Record],
        tx_write_pointer: int,
        *,
        sequence: int | None = None,
    ) -> None:
        """Store payloads under a transaction write pointer; invisible until that pointer is published.

        ``sequence`` (>= 2**40) makes the keys deterministic, so storing the same payloads again
        (a retried task) overwrites them instead of adding copies.
        """
        topic = _topic(topic)
        self._ensure_ready()
        with self.installation.hbase.operation():
            self._writer.store(topic, payloads, tx_write_pointer, sequence)

    def rollback(self, topic: TopicLike, handle: PublishResult | RollbackDetail | bytes) -> None:
        """Mark a transactional publish rolled back (``handle``: its result, the result's ``rollback`` or
        that detail's bytes): transactional readers skip it from now on."""
        from tms_hbase.model.published import rollback_detail

        topic = _topic(topic)
        detail = rollback_detail(handle)
        self._ensure_ready()
        with self.installation.hbase.operation():
            self._writer.rollback(topic, detail)

    def fetch(
        self,
        topic: TopicLike,
        start_message: bytes | None = None,
        start_time_ms: int | None = None,
        inclusive: bool = True,
        limit: int | None = None,
        transaction: Transaction | None = None,
    ) -> Iterator[Message]:
        """Messages in order from a message id or a publish time (``start_time_ms``: milliseconds
        since the epoch), up to ``limit``.

        Without a transaction every message is returned, rolled-back ones included. With one,
        rolled-back and invalid messages are skipped and the fetch stops at the first message of a
        transaction the reader cannot see yet. Bad arguments raise here, before iterating.
        Finding the start takes one deadline (``timeout_seconds``); each read while iterating another.
        """
        topic = _topic(topic)
        self._ensure_ready()
        with self.installation.hbase.operation():
            return self._reader.fetch(topic, start_message, start_time_ms, inclusive, limit, transaction)

    # -- subscriptions and consumers ------------------------------------------------------------

    def create_subscription(
        self,
        topic: TopicLike,
        name: str,
        start: str | int = "earliest",
        *,
        exist_ok: bool = False,
        shared: bool = False,
        ack_timeout_seconds: float | None = None,
        max_deliveries: int | None = None,
        dead_letter: TopicLike | None = None,
        claim_size: int | None = None,
        ordering: str | None = None,
    ) -> Subscription:
        """A durable consume mark named ``name`` on the topic, consuming from ``start``: "earliest"
        (every readable message), "latest" (messages published from now on) or a publish time (ms).

        ``shared=True`` makes it a work queue for any number of consumers (:meth:`shared_consumer`,
        docs/shared.md): ``ack_timeout_seconds`` (default 30) a delivery is held before it goes to
        another consumer, ``max_deliveries`` (default 5) before a message goes to the ``dead_letter``
        topic (default: none, dead letters are only counted), ``claim_size`` (default 16) positions a
        consumer reads at a time, ``ordering="key"`` messages of one key one at a time in topic order
        (the next only once the one before is settled; keyless ones in no order). Raises
        SubscriptionAlreadyExists (unless ``exist_ok``: then the existing subscription is returned as it
        is), TopicNotFound or InvalidArgument. Subscriptions go with their
        topic: deleting (and re-creating) the topic removes them.
        """
        options = {
            "ack_timeout_seconds": ack_timeout_seconds,
            "max_deliveries": max_deliveries,
            "claim_size": claim_size,
            "ordering": ordering,
        }
        checks.subscription_options(shared, {**options, "dead_letter": dead_letter})
        self._ensure_subscriptions()
        meta = self._metadata.get(_topic(topic))
        try:
            if not shared:
                return self._subscription_admin.create(meta, name, start)
            given = {k: v for k, v in options.items() if v is not None}
            return self._shared.create(meta, name, start, dead_letter=dead_letter, **given)
        except SubscriptionAlreadyExists:
            if not exist_ok:
                raise
        return self.get_subscription(meta.topic, name)

    def release_subscription(self, topic: TopicLike, name: str) -> Subscription:
        """Take the lease away from whoever holds the subscription, keeping its mark (what a consumer's
        close does, for a consumer that is gone or unreachable; it fails with LeaseLost at its next
        write and its uncommitted messages are delivered again). SubscriptionNotFound."""
        self._ensure_subscriptions()
        return self._subscription_admin.release(self._metadata.get(_topic(topic)), name)

    def get_subscription(self, topic: TopicLike, name: str) -> Subscription:
        """The subscription (its committed mark, who consumes it; a shared one's numbers in
        ``shared``); SubscriptionNotFound."""
        self._ensure_subscriptions()
        meta = self._metadata.get(_topic(topic))
        return self._with_numbers(meta, self._subscription_admin.get(meta, name))

    def list_subscriptions(self, topic: TopicLike) -> list[Subscription]:
        """The topic's subscriptions, in name order."""
        self._ensure_subscriptions()
        meta = self._metadata.get(_topic(topic))
        return self._shared.listed(meta)

    def delete_subscription(self, topic: TopicLike, name: str, *, force: bool = False) -> None:
        """Delete a subscription; SubscriptionNotFound. SubscriptionBusy while a consumer holds it,
        unless ``force`` (that consumer then fails with LeaseLost). A shared one is deleted at once: its
        consumers fail with SubscriptionNotFound on their next call."""
        self._ensure_subscriptions()
        meta = self._metadata.get(_topic(topic))
        if self._shared.settings(meta, name) is not None:
            self._shared.delete(meta, name)
        else:
            self._subscription_admin.delete(meta, name, force=force)

    def reset_subscription(
        self,
        topic: TopicLike,
        name: str,
        start_message: bytes | str | None = None,
        start_time_ms: int | None = None,
        *,
        force: bool = False,
    ) -> Subscription:
        """Move the mark: the next message delivered is ``start_message`` (a message id, or "earliest"
        or "latest"), or the first one published at ``start_time_ms`` or later. It may move
        backwards (to consume again) or forwards (to skip). SubscriptionBusy while a consumer holds
        the subscription, unless ``force`` (that consumer then fails with LeaseLost). A shared one
        starts afresh at once: what its consumers hold is void (NotHeld when they settle it)."""
        checks.reset_start(start_message, start_time_ms)
        self._ensure_subscriptions()
        meta = self._metadata.get(_topic(topic))
        if self._shared.settings(meta, name) is not None:
            return self._shared.reset(meta, name, start_message, start_time_ms)
        return self._subscription_admin.reset(meta, name, start_message, start_time_ms, force=force)

    def lag(self, topic: TopicLike, name: str) -> Lag:
        """How far the subscription is behind, in what a committed-only reader receives: ``Lag(messages,
        seconds, exact, held)``, ``held`` what a transaction in progress holds back (a few reads, no scan).
        For a shared one: the messages not settled yet, and the age of the oldest of them."""
        self._ensure_subscriptions()
        meta = self._metadata.get(_topic(topic))
        subscription = self._with_numbers(meta, self._subscription_admin.get(meta, name))
        if subscription.shared is not None:
            return _unsettled(subscription.shared)
        return self._stats.lag(meta.topic, meta.generation, meta.ttl, subscription.position)

    def pending(self, topic: TopicLike, name: str, *, limit: int | None = None) -> list[PendingMessage]:
        """The messages of a shared subscription delivered and not settled: holder, deadline, deliveries."""
        checks.positive_int("limit", limit, optional=True)
        self._ensure_subscriptions()
        return self._shared.pending(self._metadata.get(_topic(topic)), name, limit)

    def shared_consumer(
        self,
        topic: TopicLike,
        name: str,
        *,
        owner: str | None = None,
        max_wait_seconds: float = 5.0,
        poll_interval_seconds: float = 0.5,
        reap_interval: float | None = None,
        doorbell: str | None = DEFAULT_HOST,
        isolation: str = "committed",
    ) -> SharedConsumer:
        """One consumer of a shared subscription; any number may run at once (docs/shared.md).
        ``owner`` names it (at most 300 characters; default: host, pid and a random part; the gateway
        reuses a name to settle across calls); ``max_wait_seconds``: seconds an iteration waits for a
        delivery before it ends;
        ``poll_interval_seconds``: seconds between looks while idle (a publish, or a message given back by another
        consumer, wakes it sooner through its doorbell: ``doorbell`` is the address other processes ring,
        None for only this process's); ``reap_interval``: seconds between scans for expired deliveries
        (default: a quarter of the ack timeout, at most 1 s). ``isolation``: "committed" (committed
        messages only: rolled-back and invalid ones are skipped, one still in progress waits in its range;
        docs/shared.md) or "uncommitted" (every message as stored). InvalidArgument for an exclusive
        subscription."""
        committed = self._isolated(isolation)
        self._ensure_subscriptions()
        topic = _topic(topic)
        meta = self._metadata.get(topic)
        if self._shared.settings(meta, name) is None:
            raise InvalidArgument(f"subscription {name!r} of {topic} is not shared: use consumer()")
        from tms_hbase.consume.subscriptions import row_key
        from tms_hbase.shared.consumer import SharedConsumer

        return SharedConsumer(
            topic=topic,
            name=name,
            generation=meta.generation,
            subscription_key=row_key(topic, meta.generation, name),
            store=self._shared_store,
            reader=self._reader,
            topics=self._topics,
            clock=self.hbase_clock.now_ms,
            publish=self.publish,
            owner=owner,
            max_wait_seconds=max_wait_seconds,
            poll_interval_seconds=poll_interval_seconds,
            reap_interval=reap_interval,
            tx_state=self.admin.tx_state,
            prefix=self.installation.prefix,
            doorbell=doorbell,
            committed=committed,
        )

    def _with_numbers(self, meta: TopicMetadata, subscription: Subscription) -> Subscription:
        if self._shared.settings(meta, subscription.name) is None:
            return subscription
        return replace(subscription, shared=self._shared.stats(meta, subscription.name))

    def topic_stats(self, topic: TopicLike, *, windows: Sequence[int] | None = None) -> TopicStats:
        """Generation, first and last position and publish time, messages and bytes, publish rates over
        ``windows`` (seconds; default 1, 5 and 15 minutes) and every subscription with its lag."""
        return self._topic_report(topic, windows)[0]

    def _topic_report(self, topic: TopicLike, windows: Sequence[int] | None) -> tuple[TopicStats, list[Subscription]]:
        """:meth:`topic_stats` and :meth:`list_subscriptions` from one read of the topic's subscriptions
        (``client.admin.topic_report``)."""
        checks.windows(windows)
        self._ensure_subscriptions()
        meta = self._metadata.get(_topic(topic))
        return self._report(meta, self._shared.listed(meta), windows)

    def _topic_reports(
        self, topics: Sequence[TopicLike], windows: Sequence[int] | None
    ) -> list[tuple[TopicStats, list[Subscription]]]:
        """:meth:`_topic_report` of each of ``topics`` that exists: their metadata in one round trip, their
        subscriptions in one scan (``client.admin.topic_reports``)."""
        checks.windows(windows)
        self._ensure_subscriptions()
        metas = self._metadata.read_many([_topic(t) for t in topics])
        return [
            self._report(meta, listed, windows)
            for meta, listed in zip(metas, self._shared.listed_many(metas), strict=True)
        ]

    def _report(
        self, meta: TopicMetadata, listed: list[Subscription], windows: Sequence[int] | None
    ) -> tuple[TopicStats, list[Subscription]]:
        """The statistics of a topic whose subscriptions are ``listed``, and those."""
        subscriptions = [(s.name, s.position) for s in listed]
        if windows is None:
            stats = self._stats.topic_stats(meta.topic, meta.generation, meta.ttl, subscriptions)
        else:
            stats = self._stats.topic_stats(meta.topic, meta.generation, meta.ttl, subscriptions, windows)
        shared = {s.name: s.shared for s in listed if s.shared is not None}
        if not shared:
            return stats, listed
        # a shared subscription's mark stays where it started: its lag is what is not settled yet
        lags = [
            (name, mark, _unsettled(shared[name]) if name in shared else lag) for name, mark, lag in stats.subscriptions
        ]
        return replace(stats, subscriptions=lags), listed

    def consumer(
        self,
        topic: TopicLike,
        name: str,
        *,
        max_wait_seconds: float = 5.0,
        transaction: Transaction | TransactionClient | None = None,
        auto_commit: bool = False,
        lease_seconds: float = 10.0,
        wait_for_lease: float | None = 0.0,
        doorbell: str | None = DEFAULT_HOST,
        poll_interval_seconds: float = 0.5,
        batch: int = 1000,
        session: ConsumerSession | None = None,
        owner: str | None = None,
        rows: bool = False,
        isolation: str = "committed",
    ) -> Consumer:
        """The active consumer of a subscription (docs/consumers.md).

        ``max_wait_seconds``: seconds an iteration waits for a new message before it ends. ``transaction``:
        read transactionally, with a fresh view per read from a TransactionClient (which also settles
        transactional marks left by a crashed consumer) or with one fixed Transaction.
        ``auto_commit``: commit delivered messages once handled (the next one asked for, the iteration
        or the ``with`` block ended without an error), at most every second. ``lease_seconds``: a
        crashed consumer's standby takes over after this long; ``wait_for_lease``: seconds to wait
        for another consumer's lease to run out (None: forever) before SubscriptionBusy.
        ``doorbell``: the address publishers ring to wake this consumer (None: only publishers of this
        process wake it); ``poll_interval_seconds``: seconds between reads while waiting regardless.
        ``session``: resume a consumer that was detached (:meth:`Consumer.detach`), here or in another
        process, after the last message it delivered; LeaseLost if its lease ran out meanwhile.
        ``owner``: the name the lease is held under (default: host, pid and a random part), for
        services that resume their consumers' sessions by a name of their own. ``rows``: a consumer of
        rows, delivering the stored rows' slices (:meth:`Consumer.poll_rows`) instead of messages, for
        services that write them out as they are (the gateway). ``isolation``: "committed" (the default:
        committed messages only; a rolled-back or invalid one is skipped, one still in progress holds the
        subscription there until its transaction ends; docs/consumers.md) or "uncommitted" (every message as
        stored, rolled-back ones included, as Kafka's read_uncommitted).
        """
        committed = self._isolated(isolation, transaction)
        self._ensure_subscriptions()
        topic = _topic(topic)
        meta = self._metadata.get(topic)
        if self._shared.settings(meta, name) is not None:
            raise InvalidArgument(f"subscription {name!r} of {topic} is shared: use shared_consumer()")
        from tms_hbase.consume.consumer import Consumer
        from tms_hbase.model.subscription import check_name

        return Consumer(
            topic=topic,
            name=check_name(name),
            generation=meta.generation,
            store=self._subscriptions,
            reader=self._reader,
            topics=self._topics,
            prefix=self.installation.prefix,
            tx_state=self.admin.tx_state,
            max_wait_seconds=max_wait_seconds,
            transaction=transaction,
            auto_commit=auto_commit,
            lease_seconds=lease_seconds,
            wait_for_lease=wait_for_lease,
            doorbell=doorbell,
            poll_interval_seconds=poll_interval_seconds,
            batch=batch,
            session=session,
            owner=owner,
            rows=rows,
            committed=committed,
        )

    def _doorbells_of(self, topic: TopicId) -> list[Address]:
        meta = self._topics.get(topic)
        return self._subscription_admin.bells(meta) + [Address(a) for a in self._shared.bells(meta)]


def _unsettled(numbers: SharedStats) -> Lag:
    """A shared subscription's lag: the messages not settled yet, and the age of the oldest of them."""
    from tms_hbase.model.stats import Lag

    return Lag(numbers.waiting + numbers.in_flight + numbers.due, numbers.oldest_unacked_seconds)


def _time(name: str, value: object) -> int | None:
    return None if value is None else check_time_ms(name, value)
