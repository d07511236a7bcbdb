"""What a pointer row holds: the payloads stored under its write pointer, counted and sized exactly.

A pointer row (a transactional publish of payloads stored first, from one process or many, as a Spark
write does) adds to its generation's totals what is stored under its pointer when it is published. The
payloads are counted from their keys, not from the pointer's counter: a store with explicit sequences
(Spark's, so that a retried task overwrites) does not move the counter. One key-only scan (values come
back as their lengths), paged for a large transaction; stats read the same when they need a pointer
row's own size.
"""

from __future__ import annotations

from tms_hbase.model.rows import EXTRA_COLUMN, PAYLOAD_COLUMN, past_last, payload_key, pointer_prefix, sequence_of
from tms_hbase.model.topic import TopicId
from tms_hbase.storage.hbase import VALUE_LENGTHS, Table


def stored_sizes(payloads: Table, topic: TopicId, generation: int, write_pointer: int) -> list[tuple[int, int]]:
    """(sequence, size) of each payload stored under ``write_pointer`` in this generation, in sequence
    order (a stored message's id has its sequence as its index); a size counts the payload and its stored
    key and headers, if any (:func:`tms_hbase.model.record.counted_size`)."""
    rows = payloads.scan(
        payload_key(topic, generation, write_pointer, 1),  # sequence 0 is the counter row's place
        past_last(pointer_prefix(topic, generation, write_pointer)),
        columns=[PAYLOAD_COLUMN, EXTRA_COLUMN],
        filter=VALUE_LENGTHS,
    )
    return [(sequence_of(key), sum(int.from_bytes(size, "big") for size in cells.values())) for key, cells in rows]
