"""Driver-side planning of reads: where a read starts and ends, where a transactional reader must stop,
how many messages a micro-batch admits, and how a range is split into partitions.

Every range is a pair of message ids ``[start, end)`` of one topic generation; ``MessageId(g, p, 0)`` is
where position ``p`` begins, so a range may begin or end inside a batch row (a pointer row of a bulk
publish can hold millions of messages).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from tms_hbase.client import MessagingClient
from tms_hbase.errors import InvalidArgument, TmsError
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.topic import TopicId
from tms_hbase.spark.options import Options
from tms_hbase.tx import Transaction

# Payload sequences are dense within blocks of 2**32: the store counter hands out 1, 2, 3...; the Spark
# writer stores partition k at 2**40 + k * 2**32 + 0, 1, 2... Splitting a pointer row probes each block.
BLOCK_BITS = 32
MAX_BLOCKS = 4096  # probes of one pointer row at most; the rest of it stays in one piece
MIN_PIECE = 10_000  # messages: a pointer row is not split finer than this


def snapshot(options: Options) -> Transaction:
    """A read snapshot from the transaction server: a short transaction, started and aborted at once
    (it wrote nothing, so aborting it changes nothing)."""
    with options.tx_client() as tx_client:
        tx = tx_client.start_short()
        tx_client.abort(tx)
    return tx


def check_generation(client: MessagingClient, topic: TopicId, generation: int) -> None:
    """Refuse to go on with offsets of a generation the topic no longer has (deleted and re-created)."""
    current = client.get_topic(topic).generation
    if current != generation:
        raise TmsError(
            f"topic {topic} was deleted and re-created since this query's offsets were taken (generation "
            f"{generation}, now {current}): its messages are gone and the new generation is another topic; "
            "start a new query with a new checkpoint location to read it"
        )


def batch_range(client: MessagingClient, options: Options) -> tuple[MessageId, MessageId]:
    """The ids ``[start, end)`` a batch read covers: the topic's unexpired messages within the time and
    id bounds of the options, up to the tail as it is now."""
    positions = client.slices.positions(options.topic, options.starting_time, options.ending_time)
    generation = positions.generation
    start, end = MessageId(generation, positions.first, 0), MessageId(generation, positions.last + 1, 0)
    first, last = options.starting_id, options.ending_id
    for name, given in (("startingId", first), ("endingId", last)):
        if given is not None and given.generation > generation:
            raise InvalidArgument(f"{name} is of generation {given.generation}; {options.topic} is at {generation}")
    if first is not None and first.generation == generation:
        start = max(start, first)
    if last is not None:  # an end from an earlier generation ends before this one begins
        end = min(end, last) if last.generation == generation else start
    return start, max(start, end)


def first_unreadable(
    client: MessagingClient, topic: TopicId, generation: int, first: int, last: int, tx: Transaction
) -> int | None:
    """The first position in ``first``..``last`` whose row a reader holding ``tx`` must stop at (a
    transaction in progress for it), or None.

    ``last`` must have been read before ``tx`` was taken. Then a row up to ``last`` was written by a
    transaction that started before ``tx``: committed (visible, the read pointer is the highest
    committed write pointer), invalid, or in ``tx.in_progress``. So with nothing in progress there is
    nothing to look for; otherwise only the rows that carry a write pointer are read, filtered in HBase.
    """
    if not tx.in_progress or last < first:
        return None
    for row in client.slices.batches(topic, generation, first, last, transactional_only=True):
        if _stops_at(tx, row.tx_write_pointer):
            return row.position
    return None


def _stops_at(tx: Transaction | None, pointer: int | None) -> bool:
    return (
        tx is not None
        and pointer is not None
        and pointer > 0
        and not tx.is_invalid(pointer)
        and not (tx.is_visible(pointer))
    )


def _skipped(tx: Transaction | None, pointer: int | None) -> bool:
    return tx is not None and pointer is not None and (pointer < 0 or tx.is_invalid(pointer))


def admit(
    client: MessagingClient,
    topic: TopicId,
    start: MessageId,
    tail: int,
    tx: Transaction | None,
    max_messages: int | None,
) -> MessageId:
    """The end (exclusive) of the next micro-batch from ``start``: at most ``max_messages`` messages
    (None: all), never past ``tail``, and for a transactional reader never at or past the first row of
    a transaction in progress for ``tx`` (``tail`` read before ``tx`` was taken). Rows are counted
    from their headers; a pointer row's messages from its payload keys."""
    generation = start.generation
    end = MessageId(generation, tail + 1, 0)
    if end <= start:
        return start
    if max_messages is None and (tx is None or not tx.in_progress):
        return end
    remaining = max_messages
    for row in client.slices.batches(topic, generation, start.position, tail, transactional_only=max_messages is None):
        pointer = row.tx_write_pointer
        if _stops_at(tx, pointer):
            return max(start, MessageId(generation, row.position, 0))
        if remaining is None or _skipped(tx, pointer):
            continue
        since = start.index if row.position == start.position else 0
        if row.messages is None:  # a pointer row: count its stored payloads, up to one past what fits
            sequences = client.slices.stored_sequences(topic, generation, abs(pointer or 0), since, limit=remaining + 1)
            if len(sequences) > remaining:
                return MessageId(generation, row.position, sequences[remaining])
            remaining -= len(sequences)
        else:
            available = max(0, row.messages - since)
            if available > remaining:
                return MessageId(generation, row.position, since + remaining)
            remaining -= available
        if remaining == 0:
            return MessageId(generation, row.position + 1, 0)
    return end


@dataclass(frozen=True)
class Range:
    """Message ids ``[start, end)`` for one task; ``pointer``: the write pointer of the pointer row the
    range lies in, when it lies in one (its messages are then payload-table rows under that pointer)."""

    start: MessageId
    end: MessageId
    pointer: int | None = None


def split(client: MessagingClient, topic: TopicId, start: MessageId, end: MessageId, partitions: int) -> list[Range]:
    """``[start, end)`` as contiguous id ranges for ``partitions`` tasks or a few more: the positions in
    equal slices, and each big pointer row (a bulk publish) in pieces of its own, of about equal
    numbers of messages (the row's blocks of sequences taken one after the other)."""
    if end <= start:
        return []
    generation = start.generation
    last = end.position if end.index > 0 else end.position - 1
    cuts = {start, end}
    step = max(1, -(-(last - start.position + 1) // partitions))
    cuts.update(MessageId(generation, p, 0) for p in range(start.position + step, last + 1, step))
    rows: dict[int, list[tuple[int, int]]] = {}  # position -> its blocks (first sequence, size), of pointer rows
    pointers: dict[int, int] = {}  # position -> write pointer, of the pointer rows cut in pieces
    for row in client.slices.batches(topic, generation, start.position, last, transactional_only=True):
        if row.messages is None:
            low = start.index if row.position == start.position else 0
            high = end.index if row.position == end.position else None
            pointer = abs(row.tx_write_pointer or 0)
            rows[row.position] = _blocks_of(client, topic, generation, pointer, low, high)
            pointers[row.position] = pointer
    piece = max(MIN_PIECE, -(-sum(size for blocks in rows.values() for _, size in blocks) // partitions))
    for position, blocks in rows.items():
        cuts.update(MessageId(generation, position, sequence) for sequence in _cuts_in(blocks, piece))
        cuts.update((MessageId(generation, position, 0), MessageId(generation, position + 1, 0)))  # its own pieces
    ordered = sorted(c for c in cuts if start <= c <= end)
    return [Range(a, b, _pointer_of(pointers, a, b)) for a, b in itertools.pairwise(ordered)]


def _cuts_in(blocks: list[tuple[int, int]], piece: int) -> list[int]:
    """Where to cut a pointer row whose messages are ``blocks`` (first sequence, size; in order) into
    pieces of at most about ``piece`` messages: the sequences that begin the second, third... piece."""
    total = sum(size for _, size in blocks)
    count = -(-total // piece)
    targets = [k * total // count for k in range(1, count)]  # offsets into the row's messages
    found, before = [], 0
    for first, size in blocks:
        while targets and targets[0] < before + size:
            found.append(first + targets.pop(0) - before)
        before += size
    return found


def _pointer_of(pointers: dict[int, int], start: MessageId, end: MessageId) -> int | None:
    """The write pointer of the pointer row that ``[start, end)`` lies in, if it lies in one of ``pointers``."""
    inside = end.position == start.position or (end.position == start.position + 1 and end.index == 0)
    return pointers.get(start.position) if inside else None


def _blocks_of(
    client: MessagingClient, topic: TopicId, generation: int, pointer: int, low: int, high: int | None
) -> list[tuple[int, int]]:
    """The dense blocks of sequences of one pointer row in [low, high): (first sequence, size)."""
    found: list[tuple[int, int]] = []
    sequence = low
    while len(found) < MAX_BLOCKS:
        first = client.slices.stored_sequences(topic, generation, pointer, sequence, high, limit=1)
        if not first:
            break
        block_end = ((first[0] >> BLOCK_BITS) + 1) << BLOCK_BITS
        bound = block_end if high is None else min(block_end, high)
        top = client.slices.stored_sequences(topic, generation, pointer, first[0], bound, limit=1, reverse=True)
        found.append((first[0], top[0] - first[0] + 1))
        sequence = bound
        if high is not None and sequence >= high:
            break
    return found
