"""``client.slices``: the calls of readers that split a topic among many workers (the Spark data source).

A slice is a range of batch-row positions of one generation; these calls find the positions of a time
range, read a range of message ids, describe batch rows without their payloads, and list a transaction's
stored payloads, each with the rules of a fetch (TTL, swept rows, skip markers, transactions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from tms_hbase.installation.readiness import Readiness
from tms_hbase.model import checks
from tms_hbase.model.clock import check_time_ms
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.slices import BatchInfo, PositionRange
from tms_hbase.model.topic import TopicLike
from tms_hbase.model.topic import as_topic as _topic
from tms_hbase.model.transaction import Transaction
from tms_hbase.storage.hbase import Installation

if TYPE_CHECKING:  # (the reader is made on the first call: a client that only administers topics loads none)
    from tms_hbase.fetch.reader import MessageReader
    from tms_hbase.isolation.committed import CommittedReads
    from tms_hbase.model.message import Message


class Slices:
    """Parallel readers' calls on one client's installation (``MessagingClient.slices``)."""

    def __init__(
        self,
        installation: Installation,
        readiness: Readiness,
        reader: Callable[[], MessageReader],
        committed: Callable[[], CommittedReads],
    ) -> None:
        self._installation = installation
        self._readiness = readiness
        self._reader = reader
        self._committed = committed

    def committed_view(self) -> Transaction:
        """The installation's transaction state now, as a read-only Transaction: what committed-only readers
        (subscriptions, Spark streams) judge transactional rows by (:mod:`~tms_hbase.isolation.committed`)."""
        self._readiness.ensure()
        with self._installation.hbase.operation():
            return self._committed().view()

    def positions(
        self, topic: TopicLike, start_time_ms: int | None = None, end_time_ms: int | None = None
    ) -> PositionRange:
        """The batch-row positions of the topic's current generation that hold messages published in
        [start_time_ms, end_time_ms) (None: unbounded) and not expired: found with binary searches,
        O(log n) reads. The message ids of a position start with it. In a chain generation positions are
        dense (1, 2, 3, ... one per batch row); in a sequencer generation (``ordering=sequencer``) a
        position is its row's first message offset and the next row starts at position + its message
        count, so consecutive rows' positions differ by their sizes. ``last`` is the last row's position
        (the raw tail): in a sequencer generation a reservation below it may still be unwritten, and a
        read up to it waits for that (at most H) as any reader does (docs/ordering.md)."""
        topic = _topic(topic)
        start_time, end_time = _time("start_time_ms", start_time_ms), _time("end_time_ms", end_time_ms)
        self._readiness.ensure()
        from tms_hbase.fetch import slices  # (loaded with the reader: see above)

        with self._installation.hbase.operation():
            return slices.positions(self._reader(), topic, start_time, end_time)

    def fetch_range(
        self,
        topic: TopicLike,
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
        self._readiness.ensure()
        with self._installation.hbase.operation():
            return self._reader().fetch_range(topic, first, last, transaction)

    def batches(
        self, topic: TopicLike, generation: int, first: int, last: int, *, transactional_only: bool = False
    ) -> Iterator[BatchInfo]:
        """The batch rows at positions ``first``..``last`` of a generation, described (position, publish
        time, write pointer, message count) without their payloads being decoded; with
        ``transactional_only`` only the rows that carry a write pointer (filtered in HBase)."""
        topic = _topic(topic)
        self._readiness.ensure()
        from tms_hbase.fetch import slices  # (loaded with the reader: see above)

        return slices.batches(self._reader(), topic, generation, first, last, transactional_only=transactional_only)

    def stored_sequences(
        self,
        topic: TopicLike,
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
        checks.positive_int("limit", limit)
        self._readiness.ensure()
        from tms_hbase.fetch import slices  # (loaded with the reader: see above)

        with self._installation.hbase.operation():
            return slices.stored_sequences(
                self._reader(), topic, generation, tx_write_pointer, start, stop, limit, reverse=reverse
            )


def _time(name: str, value: object) -> int | None:
    return None if value is None else check_time_ms(name, value)
