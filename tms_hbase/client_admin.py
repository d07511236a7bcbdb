"""``client.admin``: an operator's calls on one client's installation, apart from the messaging interface.

Creating and dropping the tables (and application tables under the prefix, for ``TransactionalTable``), the
installation-wide tail-cache setting, a scan of the topics' metadata that reports corrupt rows, row-level
inspection, the transaction state rebuilt from HBase, replaying a dead-letter topic, and what this client
counted (future predecessors, the longest wait on a sequencer hole). ``tms-admin``, ``tms-sweeper``, the
gateway and tests use them; an application that only publishes and consumes never needs them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tms_hbase.errors import InvalidArgument
from tms_hbase.installation.metadata import MetadataStore
from tms_hbase.installation.readiness import Readiness
from tms_hbase.installation.settings import InstallationStore
from tms_hbase.model import checks
from tms_hbase.model.integrity import TopicScan
from tms_hbase.model.tables import APPLICATION_MAX_VERSIONS, FAMILIES
from tms_hbase.model.tail_cache import TailCacheSetting
from tms_hbase.model.topic import TopicId, TopicLike, TopicMetadata, as_topic
from tms_hbase.model.transaction import Transaction
from tms_hbase.storage.hbase import Installation, Table

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

if TYPE_CHECKING:  # (imported where used: listing topics loads no reader, writer or shared-queue code)
    from tms_hbase.client import MessagingClient
    from tms_hbase.fetch.inspect import Inspector
    from tms_hbase.fetch.reader import MessageReader
    from tms_hbase.model.dead_letter import DeadLetters
    from tms_hbase.model.stats import TopicStats
    from tms_hbase.model.subscription import Subscription
    from tms_hbase.publish.writer import MessageWriter

    Report = tuple[TopicStats, list[Subscription]]  # a topic's statistics and its subscriptions


class ClientAdmin:
    """Installation administration and diagnostics (``MessagingClient.admin``)."""

    def __init__(
        self,
        installation: Installation,
        readiness: Readiness,
        *,
        settings: InstallationStore,
        metadata: MetadataStore,
        reader: Callable[[], MessageReader],
        writer: Callable[[], MessageWriter],
        client: MessagingClient,
        topic_report: Callable[[TopicLike, Sequence[int] | None], tuple[TopicStats, list[Subscription]]],
        topic_reports: Callable[
            [Sequence[TopicLike], Sequence[int] | None], list[tuple[TopicStats, list[Subscription]]]
        ],
    ) -> None:
        self._installation = installation
        self._readiness = readiness
        self._settings = settings
        self._metadata = metadata
        self._reader = reader
        self._writer = writer
        self._client = client
        self._topic_report = topic_report
        self._topic_reports = topic_reports

    def init_tables(self) -> list[str]:
        """Create any missing table of this prefix now (``tms-admin init``); returns the names created."""
        return self._readiness.create_all()

    def create_table(
        self, name: str, families: Sequence[str] = ("d",), *, max_versions: int = APPLICATION_MAX_VERSIONS
    ) -> Table:
        """The application table ``<prefix>_<name>``, created now with ``families`` unless it exists (for a
        ``TransactionalTable``, which keeps up to ``max_versions`` versions of a cell: one per transaction
        that wrote it). Creates the installation's tables if they are missing, as ``create_topic`` does.
        ``tms-admin drop`` leaves application tables alone. InvalidArgument for a name HBase would refuse,
        one of the installation's own, or no family."""
        if not _NAME.fullmatch(name) or name in FAMILIES:
            raise InvalidArgument(
                f"application table name {name!r}: letters, digits, '_', '.', '-', and none of {', '.join(FAMILIES)}"
            )
        if not families or not all(_NAME.fullmatch(family) for family in families):
            raise InvalidArgument(f"column families {list(families)!r}: at least one, each letters, digits, '_.-'")
        if not 1 <= max_versions <= 10_000:
            raise InvalidArgument(f"max_versions {max_versions}: between 1 and 10,000")
        self._readiness.ensure(create=True)
        self._installation.create_table(name, {family: {"max_versions": max_versions} for family in families})
        return self._installation.table(name)

    def drop_tables(self) -> list[str]:
        """Delete this prefix's tables and everything in them (``tms-admin drop``, tests); returns the names."""
        return self._readiness.drop_all()

    def require_installation(self) -> None:
        """InstallationNotFound unless every table of this prefix exists; never creates anything
        (what read-only tools call first). Checked once per client."""
        self._readiness.ensure(create=False)

    def tail_cache_setting(self) -> TailCacheSetting | None:
        """The installation's tail-cache setting (None if it has none yet: writers then trust a
        remembered tail for 1 s and sweepers assume 30 s). See docs/guarantees.md."""
        return self._settings.read()

    def set_tail_cache_seconds(self, seconds: int) -> TailCacheSetting:
        """Set how long every writer may trust a remembered tail (whole seconds, 1-86400); the smallest
        sweeper grace is 4 x this. Changing an existing value starts a transition (4 x the larger value)
        during which writers use the smaller and sweepers the larger value, and another change is
        refused (InvalidArgument). InstallationNotFound if the tables are missing (unless the client was
        made with ``create_tables=True``: then it creates them, as `init` does)."""
        self._readiness.ensure(create=True)
        return self._settings.set_tail_cache(seconds)

    def scan_topics(self, namespace: str | None = None) -> TopicScan:
        """The existing topics' metadata, and the metadata rows that do not decode (``.corrupt``:
        :class:`~tms_hbase.model.integrity.RowCheck` with the topic and what is wrong), logging nothing."""
        self._readiness.ensure()
        return self._metadata.scan(namespace)

    def topics_metadata(self, topics: Sequence[TopicLike]) -> list[TopicMetadata]:
        """The metadata of those of ``topics`` that exist, in the order given, from one round trip (the console's
        list of every subscription reads the topics that have subscriptions, not every topic's)."""
        self._readiness.ensure()
        return self._metadata.read_many([as_topic(t) for t in topics])

    def first_topics(self, count: int, after: TopicLike | None = None) -> tuple[list[TopicMetadata], bool]:
        """The first ``count`` existing topics' metadata in key order (name order, but for a topic whose whole
        name starts another's, as ``a:b-c`` before ``a:b``) after ``after`` (a topic, existing or not), and
        whether they are all the topics there are from there: reads about ``count`` rows, where
        :meth:`scan_topics` reads every topic's (the console's first page of a long topic list, and its read
        of every topic a thousand at a time)."""
        checks.positive_int("count", count)
        self._readiness.ensure()
        return self._metadata.first(count, None if after is None else as_topic(after))

    def topic_report(self, topic: TopicLike, *, windows: Sequence[int] | None = None) -> Report:
        """``client.topic_stats(topic, windows=windows)`` and ``client.list_subscriptions(topic)`` from one read of
        the topic's subscriptions (and of a shared one's numbers), where the two calls read them twice: for a
        screen that shows both (the console's topic screen)."""
        return self._topic_report(topic, windows)

    def topic_reports(self, topics: Sequence[TopicLike], *, windows: Sequence[int] | None = None) -> list[Report]:
        """:meth:`topic_report` of each of ``topics`` that exists (deleted and missing ones left out), in the order
        given: their metadata read in one round trip and their subscriptions in one scan, where a report each
        reads them in a round trip each (a page of a topic list: the console's)."""
        return self._topic_reports(topics, windows)

    def subscription_names(self) -> list[tuple[TopicId, int, str]]:
        """Every subscription of the installation as (topic, generation, name), from one scan of the
        subscriptions table without reading any subscription's numbers: for lists across topics (the
        console's list of every subscription reads the numbers of the page it shows only). A generation
        other than its topic's current one is a deleted generation's leftover."""
        from tms_hbase.consume.subscriptions import SubscriptionStore

        self._readiness.ensure_subscriptions()
        return SubscriptionStore(self._installation.table("subscriptions")).names()

    def inspector(self) -> Inspector:
        """Row-level reading of topics for people (``tms-admin topic tail``): corrupt rows are reported
        as such instead of raising, and each message shows its transaction's state."""
        from tms_hbase.fetch.inspect import Inspector

        self._readiness.ensure()
        return Inspector(self._installation.messages, self._installation.payloads, self._reader())

    def tx_state(self) -> Transaction:
        """The transaction state as a read-only Transaction rebuilt from HBase, without the server: it
        sees committed transactions only. Resolves transactional marks; inspection uses it too."""
        from tms_hbase.isolation.fate import snapshot_from_hbase

        return snapshot_from_hbase(self._installation.txstate)

    def dead_letter_topic(self, topic: TopicLike, subscription: str) -> TopicId:
        """The dead-letter topic of shared subscription ``subscription`` of ``topic`` (InvalidArgument: none)."""
        shared = self._client.get_subscription(topic, subscription).shared
        if shared is None or shared.dead_letter is None:
            raise InvalidArgument(f"subscription {subscription} of {as_topic(topic)} sends no dead letters to a topic")
        return shared.dead_letter

    def dead_letters(
        self,
        topic: TopicLike,
        subscription: str,
        *,
        replay: bool = False,
        dry_run: bool = False,
        via: str = "replay",
        limit: int = 1000,
    ) -> DeadLetters:
        """The dead letters in the dead-letter topic of shared subscription ``subscription`` of ``topic`` not
        replayed yet (at most ``limit``, oldest first), or with ``replay`` those it publishes back to ``topic``
        (``dry_run``: those it would, changing nothing).

        A replay publishes only to ``topic``, the topic whose subscription names the dead-letter topic,
        never to a topic read from a letter: whoever may publish to the dead-letter topic can write a letter
        naming any topic. A letter naming another topic is ``refused`` (with the reason), never published,
        and passed over by the replay's mark. Which were replayed is the mark of subscription ``via`` of
        the dead-letter topic: replaying creates it at the earliest message if it is missing, reads through
        it (its one consumer at a time: a second replay at once is refused with the lease error) and
        commits it after each dead letter is published again, so each one is replayed **at least once**
        (twice if the replay dies between the two); listing and ``dry_run`` only read after that mark. The
        replayed message is a **new message** of ``topic`` (the original payload, key and headers), with a new
        id and publish time; the dead letter
        stays in the dead-letter topic. InvalidArgument for a subscription without a dead-letter topic, a
        message there that is not a dead letter (those before it stay replayed), a bad ``via`` name or a
        ``limit`` below 1."""
        from tms_hbase.model.dead_letter import DeadLetter, DeadLetters
        from tms_hbase.model.subscription import check_name

        check_name(via)
        if limit < 1:
            raise InvalidArgument(f"limit {limit} must be at least 1")
        client, topic = self._client, as_topic(topic)
        found = DeadLetters(self.dead_letter_topic(topic, subscription), [], [])
        marks = {s.name: s.position for s in client.list_subscriptions(found.dead_letter_topic)}
        if not replay or dry_run:  # read after the mark, without taking the subscription from a replay
            mark = marks.get(via)
            messages = (
                client.fetch(found.dead_letter_topic, start_message=mark, inclusive=False, limit=limit)
                if mark
                else client.fetch(found.dead_letter_topic, limit=limit)
            )
            for message in messages:
                found.sort(DeadLetter.of(message), topic)
            return found
        if via not in marks:
            client.create_subscription(found.dead_letter_topic, via)
        with client.consumer(found.dead_letter_topic, via, max_wait_seconds=0.5) as consumer:
            for message in consumer.poll(max_messages=limit, timeout_seconds=1.0):
                if found.sort(DeadLetter.of(message), topic):
                    client.publish(topic, [found.letters[-1].original()])
                consumer.commit(message)
        return found

    @property
    def future_predecessors(self) -> int:
        """Publishes of this client that did not follow the row before them because it was dated more than
        the clock-skew bound ahead of this client's clock (each is logged; docs/guarantees.md)."""
        return self._writer().chain.future_predecessors

    @property
    def longest_hole_wait(self) -> float:
        """Seconds the fetches of this client were held by one hole of a sequencer generation, at most
        (from first sighting to passing it; docs/ordering.md bounds it by H + one poll)."""
        return self._reader().sequencer.longest_hole_wait
