"""MessagingClient: the public entry point of tms-hbase (DESIGN.md §10)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from . import config
from .connection import HBaseConnection
from .errors import InvalidArgument
from .metadata import MetadataStore
from .tables import TableNames, drop_tables, ensure_tables
from .topic import TopicId, TopicMetadata


class MessagingClient:
    """A connection to tms-hbase: topic administration (and, later, publish and fetch).

    ``address`` is the HBase Thrift gateway (``host:port``, default ``$TMS_HBASE_THRIFT`` or
    127.0.0.1:9090); ``prefix`` namespaces the tables (default ``$TMS_TABLE_PREFIX`` or ``tms``).
    The tables are created on first use unless ``create_tables`` is False. Thread-safe; use it as
    a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        address: str | None = None,
        prefix: str | None = None,
        *,
        timeout: float = 10.0,
        pool_size: int = 8,
        create_tables: bool = True,
    ) -> None:
        host, port = config.thrift_address(address)
        self.tables = TableNames(config.table_prefix(prefix))
        self.hbase = HBaseConnection(host, port, timeout=timeout, pool_size=pool_size)
        self._create_tables = create_tables
        self._ready = False
        self._ready_lock = threading.Lock()
        self._metadata = MetadataStore(self.hbase, self.tables.metadata)

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> MessagingClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections."""
        self.hbase.close()

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
        return self._metadata.create(_topic(topic), properties)

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
        self._metadata.delete(_topic(topic))


def _topic(topic: object) -> TopicId:
    """Accept a TopicId (or a ``"namespace:topic"`` string) and nothing else."""
    if isinstance(topic, TopicId):
        return topic
    if isinstance(topic, str):
        return TopicId.parse(topic)
    raise InvalidArgument(f"expected a TopicId or 'namespace:topic', got {type(topic).__name__}")
