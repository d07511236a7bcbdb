"""Consuming: read a topic generation's batch rows in position order and turn them into messages.

* TTL is applied at read: expired rows are never returned, swept or not.
* Where rows are, which gaps are swept and which are holes to wait on, and how a time seek searches, is
  the ordering's (the chain's or the sequencer's, :mod:`tms_hbase.ordering`), chosen by the topic's
  metadata; the rules below are common to both.
* With a transaction, a row is accepted (no pointer, or visible), skipped (rolled back or invalid),
  or stops the whole fetch (in progress or above the read pointer), so order is kept. A subscription's
  committed-only read applies the same rule with the installation's transaction state
  (``committed``: :class:`~tms_hbase.isolation.committed.CommittedReads`).
* A pointer row expands to its payload-table rows in store order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast

from tms_hbase.errors import CorruptData, InvalidArgument
from tms_hbase.installation.hbase_clock import HBaseClock
from tms_hbase.installation.metadata import MetadataCache
from tms_hbase.isolation.committed import CommittedReads
from tms_hbase.model import checks, record
from tms_hbase.model.clock import now_ms
from tms_hbase.model.message import Message
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.message_id import encode as encode_id
from tms_hbase.model.record import NONE, Extra
from tms_hbase.model.rows import (
    EXTRA_COLUMN,
    MESSAGE_COLUMN,
    PAYLOAD_COLUMN,
    BatchRow,
    RowSlice,
    decode_row,
    generation_prefix,
    message_key,
    next_position,
    past_last,
    payload_key,
    pointer_prefix,
    position_of,
    sequence_of,
)
from tms_hbase.model.tail_cache import DEFAULT_TAIL_CACHE_SECONDS
from tms_hbase.model.topic import TopicId, TopicMetadata
from tms_hbase.model.transaction import Transaction
from tms_hbase.ordering.base import OrderedReads
from tms_hbase.ordering.chain_reads import ChainReads
from tms_hbase.ordering.lookup import CHUNK_ROWS, RowLookup
from tms_hbase.ordering.sequencer_reads import SequencerReads
from tms_hbase.storage.hbase import Table

PAYLOAD_CHUNK = 1000


@dataclass
class Cursor:
    """Where a fetch has read to (pass one to :meth:`MessageReader.fetch`): ``next_position``, where the
    row after the last row it passed starts (None: it passed none yet). A consumer that has delivered
    everything up to there can read exactly the next row with :meth:`MessageReader.row_at`."""

    next_position: int | None = None


@dataclass(frozen=True)
class _Start:
    position: int
    index: int  # first message index wanted in the start row
    inclusive: bool


class MessageReader:
    """Fetches messages in order from the ``messages`` and ``payloads`` tables; every fetch is a poll
    that ends at the topic's current tail (or, in a sequencer generation, at a hole not yet due to fill).

    ``tail_cache_seconds`` says the installation's tail-cache time C (re-read as it may change; during a
    change, the larger value): W, H and D of sequencer generations follow from it (docs/guarantees.md);
    without it C is the default 30 s. ``hbase_clock`` (HBase's clock, :mod:`.hbase_clock`) lets a hole be
    filled H after HBase stored the row above it, whoever first saw it; without it a hole is due H after
    this reader first saw it, and seeks judge settling by this host's clock. ``chain`` and ``sequencer``
    are the two orderings' reads (:mod:`tms_hbase.ordering`); the sequencer's counts the holes it filled.
    """

    def __init__(
        self,
        messages: Table,
        payloads: Table,
        topics: MetadataCache,
        tail_cache_seconds: Callable[[], float] | None = None,
        hbase_clock: HBaseClock | None = None,
    ) -> None:
        self.messages = messages
        self.payloads = payloads
        self.topics = topics
        self.tail_cache_seconds = tail_cache_seconds or (lambda: DEFAULT_TAIL_CACHE_SECONDS)
        self.hbase_clock = hbase_clock
        lookup = RowLookup(messages)
        self.chain = ChainReads(lookup)
        self.sequencer = SequencerReads(messages, lookup, self.tail_cache_seconds, self.hbase_now, hbase_clock)

    def _ordering(self, meta: TopicMetadata, generation: int) -> OrderedReads:
        """The reads of the ordering of ``generation`` of the topic: the sequencer's if the topic's metadata
        says so and that generation is its current one, else the chain's."""
        return self.sequencer if meta.sequencer and meta.generation == generation else self.chain

    def fetch(
        self,
        topic: TopicId,
        start_message: bytes | None = None,
        start_time: int | None = None,
        inclusive: bool = True,
        limit: int | None = None,
        transaction: Transaction | None = None,
        cursor: Cursor | None = None,
        committed: CommittedReads | None = None,
    ) -> Iterator[Message]:
        """Validate and place the start now (bad input raises here), then iterate lazily; ``cursor`` is kept
        at the row after the last one passed. ``committed``: judge transactional rows by the installation's
        transaction state instead of a transaction's (a subscription's committed-only read)."""
        checks.fetch_args(start_message, start_time, inclusive, limit, transaction)
        placed = self._placed(topic, start_message, start_time, inclusive)
        return self._iterate(*placed, limit, transaction or committed, cursor=cursor)

    def fetch_rows(
        self,
        topic: TopicId,
        start_message: bytes | None = None,
        inclusive: bool = True,
        transaction: Transaction | None = None,
        committed: CommittedReads | None = None,
    ) -> Iterator[RowSlice]:
        """The messages :meth:`fetch` gives, as the slices of the rows that hold them, in order: no message
        object and no payload copy each (inline payloads are memoryview slices of the row's cell); for a
        service that writes them out as they are (the gateway's consumer pages)."""
        checks.fetch_args(start_message, None, inclusive, None, transaction)
        topic, generation, start, floor, order = self._placed(topic, start_message, None, inclusive)
        view = transaction or committed
        return self._slices(topic, generation, start, floor, order, None, view, views=True)

    def _placed(
        self, topic: TopicId, start_message: bytes | None, start_time: int | None, inclusive: bool
    ) -> tuple[TopicId, int, _Start, int, OrderedReads]:
        """Where a fetch starts: (topic, generation, start, the TTL's floor in ms, the generation's ordering)."""
        meta = self.topics.get(topic)
        generation = meta.generation
        floor = self.hbase_now() - meta.ttl * 1000
        if start_message is not None:
            mid = MessageId.decode(start_message)
            if mid.generation > generation:
                raise InvalidArgument(f"message id is from generation {mid.generation}; {topic} is at {generation}")
            if mid.generation == generation:
                start = _Start(mid.position, mid.index, inclusive)
            else:  # from before the topic was re-created: the new generation is all new
                start = _Start(self.seek(topic, generation, floor, exact=False), 0, True)
        elif start_time is None or start_time + (0 if inclusive else 1) <= floor:
            start = _Start(self.seek(topic, generation, floor, exact=False), 0, True)
        else:
            start = _Start(self.seek(topic, generation, start_time + (0 if inclusive else 1)), 0, True)
        return topic, generation, start, floor, self._ordering(meta, generation)

    def fetch_range(
        self, topic: TopicId, start: MessageId, end: MessageId | None = None, transaction: Transaction | None = None
    ) -> Iterator[Message]:
        """The messages with ``start`` <= id < ``end`` (to the tail if ``end`` is None), in order; both ids
        of the topic's current generation. With a transaction it stops where a fetch would."""
        checks.fetch_args(None, None, True, None, transaction)
        meta = self.topics.get(topic)
        for edge in (start, end):
            if edge is not None and edge.generation != meta.generation:
                raise InvalidArgument(
                    f"message id {bytes(edge).hex()} is from generation {edge.generation}; "
                    f"{topic} is at generation {meta.generation}"
                )
        if end is not None and end <= start:
            return iter(())
        last = None if end is None else (end.position if end.index > 0 else end.position - 1)
        stop = None if end is None else (end.position, end.index)
        floor = self.hbase_now() - meta.ttl * 1000
        start_at = _Start(start.position, start.index, True)
        order = self._ordering(meta, meta.generation)
        return self._iterate(topic, meta.generation, start_at, floor, order, None, transaction, last, stop)

    def row_at(self, topic: TopicId, generation: int, position: int) -> tuple[list[Message], int] | None:
        """The messages of the batch row at exactly ``position`` (one get, no scan) and where the next row
        starts; None unless a plain batch is there: no row, a skip marker, a pointer or transactional row,
        an expired one, or another generation than the topic's (read those with :meth:`fetch`)."""
        if self.topics.get(topic).generation != generation:
            return None
        value = self.messages.get(message_key(topic, generation, position), [MESSAGE_COLUMN]).get(MESSAGE_COLUMN)
        return None if value is None else self.row_of(topic, generation, position, value)

    def row_of(self, topic: TopicId, generation: int, position: int, value: bytes) -> tuple[list[Message], int] | None:
        """What :meth:`row_at` gives for ``value``, the batch row cell stored at ``position`` (a doorbell ring
        carries it, authenticated: :mod:`~tms_hbase.consume.doorbell`), decoded as a read decodes it; None
        unless it holds a plain live batch of the topic's generation. CorruptData if it does not decode."""
        meta = self.topics.get(topic)
        if meta.generation != generation:
            return None
        row = decode_row(message_key(topic, generation, position), value)
        now = self.hbase_now()
        if row.skip or row.pointer or row.tx_pointer is not None or _expired(row, now - meta.ttl * 1000, now):
            return None
        part = RowSlice(generation, position, 0, row.publish_time, row.payloads, row.extras)
        return list(_messages(part)), next_position(position, row.span)

    # -- positions ----------------------------------------------------------------------------

    def seek(self, topic: TopicId, generation: int, time_ms: int, *, exact: bool = True) -> int:
        """The first position, in order, of a row holding messages dated >= ``time_ms`` (the next position
        past the last row if none), as the generation's ordering finds it (:meth:`.ChainReads.seek`,
        :meth:`.SequencerReads.seek`: there rows after the answer may be dated up to D earlier, and with
        ``exact=False`` the answer is a lower bound)."""
        return self._ordering(self.topics.get(topic), generation).seek(topic, generation, time_ms, exact=exact)

    def tail(self, topic: TopicId, generation: int) -> int:
        """The last position of a generation (0 if it has no row): one reverse scan of one row."""
        last = self.messages.last_row(generation_prefix(topic, generation))
        return 0 if last is None else position_of(last[0])

    def hbase_now(self) -> int:
        """HBase's clock if this reader has it, else this host's (ms)."""
        return now_ms() if self.hbase_clock is None else self.hbase_clock.now_ms()

    # -- rows to messages ---------------------------------------------------------------------

    def _iterate(
        self,
        topic: TopicId,
        generation: int,
        start: _Start,
        floor: int,
        order: OrderedReads,
        limit: int | None,
        transaction: Transaction | CommittedReads | None,
        end: int | None = None,
        stop: tuple[int, int] | None = None,
        *,
        cursor: Cursor | None = None,
    ) -> Iterator[Message]:
        """Messages from ``start``, at most ``limit``: those of :meth:`_slices`."""
        remaining = limit
        slices = self._slices(topic, generation, start, floor, order, limit, transaction, end, stop, cursor=cursor)
        for part in slices:
            for message in _messages(part):
                yield message
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return

    def _slices(
        self,
        topic: TopicId,
        generation: int,
        start: _Start,
        floor: int,
        order: OrderedReads,
        limit: int | None,
        transaction: Transaction | CommittedReads | None,
        end: int | None = None,
        stop: tuple[int, int] | None = None,
        *,
        views: bool = False,
        cursor: Cursor | None = None,
    ) -> Iterator[RowSlice]:
        """The messages from ``start`` as row slices, read through ``order`` (the generation's ordering);
        ``end`` is the last position to read, ``stop`` the (position, index) of the first message not to
        return and ``limit`` (the messages wanted, if known) bounds the first scan; ``views``: inline
        payloads as views of their cells. ``cursor`` moves past each row passed."""
        now = self.hbase_now()
        first_chunk = CHUNK_ROWS if limit is None else min(limit, CHUNK_ROWS)  # every row holds a message or more
        if end is not None:
            first_chunk = max(1, min(first_chunk, end - start.position + 1))
        rows = order.rows(topic, generation, start.position, first_chunk, end, views)  # (waits on holes below end)
        for position, row in rows:
            if end is not None and position > end:
                return
            if _expired(row, floor, now):
                if cursor is not None:
                    cursor.next_position = next_position(position, row.span)
                continue
            pointer = row.tx_pointer
            if transaction is not None and pointer is not None:
                if pointer < 0 or transaction.is_invalid(pointer):
                    if cursor is not None:
                        cursor.next_position = next_position(position, row.span)
                    continue
                if not transaction.is_visible(pointer):
                    return  # in progress or not yet committed for this reader: keep the order
            first_index = 0
            if position == start.position:
                first_index = start.index if start.inclusive else start.index + 1
            end_index = stop[1] if stop is not None and position == stop[0] else None
            if row.pointer:
                if pointer is None:  # the payloads are stored under the write pointer the row lacks
                    raise CorruptData(
                        f"corrupt message row at position {position} of {topic} (generation {generation}): it "
                        "points at stored payloads but has no transaction write pointer",
                        topic=str(topic),
                        generation=generation,
                        position=position,
                    )
                yield from self._stored(topic, generation, abs(pointer), position, row, first_index, end_index)
            else:
                payloads = row.payloads[first_index:end_index]
                if payloads:
                    extras = None if row.extras is None else row.extras[first_index:end_index]
                    yield RowSlice(generation, position, first_index, row.publish_time, payloads, extras)
            if cursor is not None:
                cursor.next_position = next_position(position, row.span)

    def _stored(
        self,
        topic: TopicId,
        generation: int,
        pointer: int,
        position: int,
        row: BatchRow,
        first_index: int,
        end_index: int | None = None,
    ) -> Iterator[RowSlice]:
        """The payload-table rows of a pointer row, in store order, from sequence ``first_index`` up to
        (not including) ``end_index``: a slice for each run of consecutive sequences."""
        sequence = max(first_index, 1)
        if end_index is None:
            stop = past_last(pointer_prefix(topic, generation, pointer))
        elif end_index <= sequence:
            return  # (HBase would read a scan from a key to the same key as a get of that row)
        else:
            stop = payload_key(topic, generation, pointer, end_index)
        while True:
            start = payload_key(topic, generation, pointer, sequence)
            keys, (payloads, extras) = self.payloads.scan_columns(
                start, stop, (PAYLOAD_COLUMN, EXTRA_COLUMN), PAYLOAD_CHUNK
            )
            run: list[bytes] = []
            run_extras: list[Extra] = []
            first = sequence
            for key, payload, extra in zip(keys, payloads, extras, strict=True):
                seq = sequence_of(key)
                if payload is None:
                    raise _corrupt_stored(topic, generation, position, seq, f"it has no {PAYLOAD_COLUMN.decode()} cell")
                if seq != first + len(run):  # a gap in the sequences: the next slice starts at seq
                    if run:
                        yield _stored_slice(generation, position, first, row.publish_time, run, run_extras)
                    run, run_extras, first = [], [], seq
                run.append(payload)
                try:
                    run_extras.append(NONE if extra is None else record.decode_all(extra, 0, 1)[0][0])
                except CorruptData as exc:
                    raise _corrupt_stored(topic, generation, position, seq, str(exc)) from None
                sequence = seq + 1
            if run:
                yield _stored_slice(generation, position, first, row.publish_time, run, run_extras)
            if len(keys) < PAYLOAD_CHUNK:
                return


def _corrupt_stored(topic: TopicId, generation: int, position: int, sequence: int, reason: str) -> CorruptData:
    """A stored payload of a pointer row that does not read: which one, of which row, and why."""
    return CorruptData(
        f"corrupt stored payload {sequence} of the message row at position {position} of {topic} "
        f"(generation {generation}): {reason}",
        topic=str(topic),
        generation=generation,
        position=position,
    )


def _expired(row: BatchRow, floor: int, now: int) -> bool:
    """Past the topic's TTL (published before ``floor``) or its own expiry (at or before ``now``)."""
    return row.publish_time < floor or (row.expires_at is not None and row.expires_at <= now)


def _messages(part: RowSlice) -> Iterator[Message]:
    """The messages of a row slice read without views (its payloads are copies)."""
    generation, position, time_ms = part.generation, part.position, part.publish_time
    payloads = cast("Sequence[bytes]", part.payloads)
    if part.extras is None:
        for index, payload in enumerate(payloads, part.first):
            yield Message(encode_id(generation, position, index), payload, time_ms)
    else:
        for index, (payload, (key, headers)) in enumerate(zip(payloads, part.extras, strict=True), part.first):
            yield Message(encode_id(generation, position, index), payload, time_ms, key, headers)


def _stored_slice(
    generation: int, position: int, first: int, publish_time: int, payloads: list[bytes], extras: list[Extra]
) -> RowSlice:
    """A run of stored payloads as a slice (its extras None when none of them has a key or headers)."""
    has_extras = any(extra is not NONE for extra in extras)
    return RowSlice(generation, position, first, publish_time, payloads, extras if has_extras else None)
