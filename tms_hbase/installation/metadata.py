"""Topic administration in the metadata table: every change is a compare-and-set on the old value.

Generation rules (CDAP's): create on absent → 1; delete → −generation (row kept); create after
delete → |old| + 1; update keeps the generation. A topic exists iff its generation is > 0.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

from tms_hbase.errors import (
    ConcurrentModification,
    HBaseUnavailable,
    InvalidArgument,
    TopicAlreadyExists,
    TopicNotFound,
)
from tms_hbase.model.integrity import TopicScan, check_metadata_row
from tms_hbase.model.retry import Retry
from tms_hbase.model.tables import FAMILY
from tms_hbase.model.tail_cache import SETTINGS_KEY
from tms_hbase.model.topic import (
    DEFAULT_ORDERING,
    GENERATION_KEY,
    ORDERING_KEY,
    TopicId,
    TopicMetadata,
    user_properties,
)
from tms_hbase.runtime import green
from tms_hbase.storage.hbase import Table

log = logging.getLogger(__name__)

COLUMN = f"{FAMILY}:p".encode()
CLOCK_COLUMN = f"{FAMILY}:t".encode()  # in the installation row: the cell HBase's clock is read from
# A compare-and-set retried this many times without winning means something is badly wrong.
_MAX_ROUNDS = 1000


class MetadataStore:
    """Reads and compare-and-sets topic rows (key ``namespace:topic:``) in one metadata table."""

    def __init__(self, table: Table, *, retry: Retry | None = None) -> None:
        self.table = table
        self.retry = retry or Retry()

    def create(self, topic: TopicId, properties: Mapping[str, str] | None = None) -> TopicMetadata:
        """Create the topic (generation 1, or |old|+1 after a delete); TopicAlreadyExists if it exists.

        The generation's ``ordering`` is recorded with it: ``sequencer`` unless the properties ask for
        ``chain`` (a topic row without it is a chain generation created before the sequencer was the
        default, so the default must be written down)."""
        props = {ORDERING_KEY: DEFAULT_ORDERING, **user_properties(properties)}

        def step(old: TopicMetadata | None) -> TopicMetadata:
            if old is not None and old.exists:
                raise TopicAlreadyExists(topic)
            generation = 1 if old is None else abs(old.generation) + 1
            return TopicMetadata(topic, {**props, GENERATION_KEY: str(generation)})

        return self._change(topic, step, f"create topic {topic}")

    def update(
        self,
        topic: TopicId,
        properties: Mapping[str, str],
        expected: TopicMetadata | None = None,
    ) -> TopicMetadata:
        """Replace the properties, keeping the generation.

        With ``expected``, the update applies only if the stored metadata still equals it
        (ConcurrentModification otherwise): read-modify-write without lost updates.
        """
        props = user_properties(properties)

        def step(old: TopicMetadata | None) -> TopicMetadata:
            if old is None or not old.exists:
                raise TopicNotFound(topic)
            if expected is not None and dict(old.properties) != dict(expected.properties):
                raise ConcurrentModification(
                    f"topic {topic} was changed since it was read (now generation {old.generation}, "
                    f"properties {dict(old.properties)})"
                )
            if ORDERING_KEY in props and props[ORDERING_KEY] != old.ordering:
                raise InvalidArgument(
                    f"the {ORDERING_KEY} of topic {topic} is {old.ordering}, fixed for its generation; "
                    "delete and re-create the topic to change it"
                )
            kept = {ORDERING_KEY: old.properties[ORDERING_KEY]} if ORDERING_KEY in old.properties else {}
            return TopicMetadata(topic, {**props, **kept, GENERATION_KEY: str(old.generation)})

        return self._change(topic, step, f"update topic {topic}")

    def delete(self, topic: TopicId) -> TopicMetadata:
        """Mark the topic deleted (generation → −generation); TopicNotFound if it does not exist."""

        def step(old: TopicMetadata | None) -> TopicMetadata:
            if old is None or not old.exists:
                raise TopicNotFound(topic)
            return TopicMetadata(topic, {**old.properties, GENERATION_KEY: str(-old.generation)})

        return self._change(topic, step, f"delete topic {topic}")

    def get(self, topic: TopicId) -> TopicMetadata:
        """The metadata of an existing topic; TopicNotFound if it was never created or is deleted."""
        meta = self.read(topic)
        if meta is None or not meta.exists:
            raise TopicNotFound(topic)
        return meta

    def read(self, topic: TopicId) -> TopicMetadata | None:
        """The stored row as it is (deleted topics included), or None if there is none."""
        data = self.table.get_cell(topic.key, COLUMN)
        return None if data is None else TopicMetadata.decode(topic, data)

    def scan(self, namespace: str | None = None, include_deleted: bool = False) -> TopicScan:
        """Topics of a namespace (or of all namespaces) in name order, and the rows that do not
        decode, each with its topic and what is wrong: one bad row never hides the others."""
        prefix = f"{TopicId(namespace, 'x').namespace}:".encode() if namespace is not None else None

        found = TopicScan([], [])
        for key, data in self.table.scan(prefix=prefix, columns=[COLUMN]):
            if key == SETTINGS_KEY:
                continue
            check = check_metadata_row(key, data.get(COLUMN))
            if check.metadata is None:
                found.corrupt.append(check)
            elif include_deleted or check.metadata.exists:
                found.topics.append(check.metadata)
        found.topics.sort(key=lambda m: m.topic)
        return found

    def read_many(self, topics: Sequence[TopicId]) -> list[TopicMetadata]:
        """The existing ones of ``topics`` (deleted, missing and corrupt rows left out), in the order given: their
        rows read in one round trip."""
        cells = self.table.get_cells([topic.key for topic in topics], COLUMN)
        found = [
            check_metadata_row(t.key, data).metadata for t, data in zip(topics, cells, strict=True) if data is not None
        ]
        return [meta for meta in found if meta is not None and meta.exists]

    def first(self, count: int, after: TopicId | None = None) -> tuple[list[TopicMetadata], bool]:
        """The first ``count`` existing topics in key order (``namespace:topic:`` bytes, which is name order but
        where one topic's whole name starts another's) after ``after``, and whether they are every topic there
        is from there: a page of a long list without reading the whole table. Reads ``count`` rows at a time
        until it has them (deleted topics' rows and corrupt ones are passed over)."""
        found: list[TopicMetadata] = []
        start = b"" if after is None else after.key + b"\x00"
        while True:
            rows = self.table.scan(start, None, columns=[COLUMN], limit=count)
            for key, data in rows:
                meta = None if key == SETTINGS_KEY else check_metadata_row(key, data.get(COLUMN)).metadata
                if meta is not None and meta.exists:
                    found.append(meta)
                    if len(found) == count:
                        return found, False
            if len(rows) < count:
                return found, True
            start = rows[-1][0] + b"\x00"

    def list(self, namespace: str | None = None, include_deleted: bool = False) -> list[TopicMetadata]:
        """Topics of a namespace (or of all namespaces), in name order; deleted ones hidden by default.

        A row that does not decode is skipped with a warning in the log (:meth:`scan` returns them).
        """
        found = self.scan(namespace, include_deleted)
        for check in found.corrupt:
            log.warning("skipped the corrupt metadata row of %s: %s", check.where(), check.reason)
        return found.topics

    def _change(
        self,
        topic: TopicId,
        step: Callable[[TopicMetadata | None], TopicMetadata],
        what: str,
    ) -> TopicMetadata:
        """Read, compute the new row with ``step``, compare-and-set; re-read and retry on a lost race.

        If the link fails during the compare-and-set, the write may or may not have happened: the
        row is re-read (as the retry policy allows), and finding exactly the value we wrote means it did.
        """
        unsure: TopicMetadata | None = None
        link_failures = 0
        for _ in range(_MAX_ROUNDS):
            old = self.read(topic)
            if unsure is not None and old is not None and old.encode() == unsure.encode():
                return unsure
            new = step(old)
            try:
                if self.table.compare_and_set(topic.key, COLUMN, None if old is None else old.encode(), new.encode()):
                    return new
            except HBaseUnavailable as exc:
                link_failures += 1
                if not self.retry.pause(exc, link_failures, what=what):
                    raise
                unsure = new
        raise ConcurrentModification(f"{what}: lost {_MAX_ROUNDS} compare-and-set rounds in a row")


class MetadataCache:
    """Topic metadata for the hot paths (publish, fetch), re-read when older than ``max_age`` seconds.

    A short age bounds how long a publish may still go to a generation that was just deleted; that is
    no different from a publish that happened just before the delete.

    :meth:`forget`, called once this client's change of the topic is written, also voids the reads in flight
    then: a read that another thread (the doorbells' refresh) started before a delete and finished after it
    would otherwise cache the deleted generation again, and this client's next fetch read the old messages.
    """

    def __init__(self, store: MetadataStore, max_age: float = 1.0) -> None:
        self.store = store
        self.max_age = max_age
        self._cache: dict[TopicId, tuple[float, TopicMetadata]] = {}
        self._forgets = 0  # how many forget() calls so far: a read started before one is not kept
        self._lock = green.no_wait_lock()

    def get(self, topic: TopicId) -> TopicMetadata:
        """The topic's metadata (TopicNotFound if it does not exist), from the cache when fresh."""
        now = time.monotonic()
        with self._lock:
            hit, forgets = self._cache.get(topic), self._forgets
        if hit is not None and now - hit[0] < self.max_age:
            return hit[1]
        meta = self.store.get(topic)
        with self._lock:
            if self._forgets == forgets:
                self._cache[topic] = (now, meta)
        return meta

    def forget(self, topic: TopicId) -> None:
        """Drop what is kept of ``topic``, and keep no read of any topic that is in flight now."""
        with self._lock:
            self._cache.pop(topic, None)
            self._forgets += 1
