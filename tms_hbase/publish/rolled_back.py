"""The rollback index: where a generation's rolled-back rows are, so lag and topic statistics leave their
messages out without scanning the topic (:mod:`tms_hbase.fetch.stats`).

A rolled-back row keeps its place and its running totals; only the sign of its write pointer says it is
rolled back. Whoever flips the sign (a rollback, or the sweeper marking a row of an invalid transaction)
first puts one cell in the generation's counter row, ``d:x<position, 16 hex digits>`` (empty), then
flips: a crash in between leaves a cell whose row is not rolled back, so readers take a cell as a
candidate and check the row's sign. Rows rolled back before this index existed are not in it.
"""

from __future__ import annotations

from tms_hbase.model.rows import ROLLED_BACK_PREFIX, counter_key, rolled_back_column
from tms_hbase.model.topic import TopicId
from tms_hbase.storage.hbase import Table


def index(messages: Table, topic: TopicId, generation: int, position: int) -> None:
    """Record the row at ``position`` as (about to be) rolled back: one blind, idempotent put."""
    messages.put(counter_key(topic, generation), {rolled_back_column(position): b""})


def positions(messages: Table, topic: TopicId, generation: int, low: int, high: int) -> list[int]:
    """The indexed positions ``low`` <= p <= ``high``, in order: one read of the counter row, filtered in
    HBase to that range of the index."""
    if high < low:
        return []
    key = counter_key(topic, generation)
    low_q, high_q = (rolled_back_column(p).split(b":", 1)[1].decode() for p in (low, high))
    rows = messages.scan(key, key + b"\x00", limit=1, filter=f"ColumnRangeFilter('{low_q}', true, '{high_q}', true)")
    columns = [column for _, row in rows for column in row if column.startswith(ROLLED_BACK_PREFIX)]
    return sorted(int(column[len(ROLLED_BACK_PREFIX) :], 16) for column in columns)
