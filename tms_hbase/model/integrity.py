"""Checking raw rows: is a row of the message, payload or metadata table sound, and if not, why.

One row that does not decode must never stop a daemon or hide every other row: the sweeper leaves
such rows in place and reports them, topic listings skip them with a warning, and inspection tools
show them. Each check returns a :class:`RowCheck` that says where the row sits (topic, generation,
position as far as the key tells) and, for a corrupt row, what is wrong with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tms_hbase.errors import CorruptData
from tms_hbase.model.rows import (
    BYTES_PREFIX,
    COUNTER_COLUMN,
    FRONTIER_COLUMN,
    LOW_WATER_COLUMN,
    MESSAGE_COLUMN,
    PAYLOAD_COLUMN,
    ROLLED_BACK_PREFIX,
    SEQUENCE_COLUMN,
    SKIPPED_PREFIX,
    RowHeader,
    check_cell,
    position_of,
    split_key,
)
from tms_hbase.model.topic import TopicId, TopicMetadata

_SUFFIX = 4 + 8  # generation u32 and position (or write pointer) u64 after the topic key


@dataclass(slots=True)  # not frozen: made for every row the sweeper reads, and a frozen one costs 4x
class RowCheck:
    """The verdict on one raw row: sound (``reason`` is None) or corrupt, and where it sits.

    ``table`` is the kind of table (``messages``, ``payloads``, ``metadata``); ``topic``,
    ``generation`` and ``position`` are what the key tells (None where it does not). A sound message
    row carries its decoded ``header``, a sound metadata row its ``metadata``.
    """

    table: str
    key: bytes
    topic: TopicId | None = None
    generation: int | None = None
    position: int | None = None
    reason: str | None = None
    header: RowHeader | None = field(default=None, repr=False, compare=False)
    metadata: TopicMetadata | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.reason is None

    def where(self) -> str:
        """``topic ns:t generation 1 position 5``, or the key in hex when it names no topic."""
        if self.topic is None:
            return f"row 0x{self.key.hex()}"
        parts = [f"topic {self.topic}"]
        if self.generation is not None:
            parts.append(f"generation {self.generation}")
        if self.position is not None:
            parts.append(f"position {self.position}")
        return " ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """For JSON reports: the key in hex, the topic as ``namespace:topic``."""
        return {
            "table": self.table,
            "key": self.key.hex(),
            "topic": None if self.topic is None else str(self.topic),
            "generation": self.generation,
            "position": self.position,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class TopicScan:
    """What a listing of the metadata table found: the topics, and the rows it skipped as corrupt."""

    topics: list[TopicMetadata]
    corrupt: list[RowCheck]


def _topic_key_length(key: bytes) -> int:
    """Length of the ``namespace:topic:`` a row key starts with (names hold no ':')."""
    return key.find(b":", key.find(b":") + 1) + 1


def is_counter_row(key: bytes, columns: Mapping[bytes, Any]) -> bool:
    """Whether a message-table row is a generation's counter row (topic key and generation only, with the
    offset counter, the low-water mark, the frontier, skip index, bytes checkpoint or rollback index cells):
    sound, and no batch row."""
    where = split_key(key)
    if where is None or len(key) != _topic_key_length(key) + 4:
        return False
    known = {SEQUENCE_COLUMN, LOW_WATER_COLUMN, FRONTIER_COLUMN}
    return bool(columns) and all(
        c in known or c.startswith((SKIPPED_PREFIX, BYTES_PREFIX, ROLLED_BACK_PREFIX)) for c in columns
    )


def check_message_row(key: bytes, columns: Mapping[bytes, Any]) -> RowCheck:
    """A message-table row: a key of topic, generation and position, and a ``d:m`` cell that decodes
    (a counter row, see :func:`is_counter_row`, is checked apart)."""
    where = split_key(key)
    if where is None or len(key) != _topic_key_length(key) + _SUFFIX:
        return RowCheck("messages", key, reason="the row key is not topic, generation and position")
    topic, generation = where
    position = position_of(key)
    value = columns.get(MESSAGE_COLUMN)
    if value is None:
        reason = f"no {MESSAGE_COLUMN.decode()} column (has {sorted(c.decode(errors='replace') for c in columns)})"
        return RowCheck("messages", key, topic, generation, position, reason)
    try:
        header = check_cell(value)
    except CorruptData as exc:
        return RowCheck("messages", key, topic, generation, position, f"{exc} ({len(value)} bytes)")
    return RowCheck("messages", key, topic, generation, position, header=header)


def check_payload_row(key: bytes, columns: Mapping[bytes, Any]) -> RowCheck:
    """A payload-table row: a sequence counter (topic, generation, pointer; ``d:c``) or a payload
    (the same and a sequence; ``d:p``). Any bytes are a valid payload, so only the shape is checked."""
    where = split_key(key)
    extra = None if where is None else len(key) - _topic_key_length(key)
    expected = {_SUFFIX: COUNTER_COLUMN, _SUFFIX + 8: PAYLOAD_COLUMN}.get(extra)  # type: ignore[arg-type]
    if where is None or expected is None:
        return RowCheck("payloads", key, reason="the row key is not topic, generation, write pointer [, sequence]")
    if expected not in columns:
        return RowCheck("payloads", key, *where, reason=f"no {expected.decode()} column")
    return RowCheck("payloads", key, *where)


def check_metadata_row(key: bytes, value: bytes | None) -> RowCheck:
    """A metadata-table row: key ``namespace:topic:``, and its cell (``value``, None if the row has
    none) JSON properties with a generation and a ttl."""
    try:
        namespace, name, rest = key.decode().split(":")
        if rest:
            raise ValueError("text after the last ':'")
        topic = TopicId(namespace, name)
    except (UnicodeDecodeError, ValueError) as exc:
        return RowCheck("metadata", key, reason=f"the row key is not namespace:topic: ({exc})")
    if value is None:
        return RowCheck("metadata", key, topic, reason="no properties cell")
    try:
        meta = TopicMetadata.decode(topic, value)
    except CorruptData as exc:
        return RowCheck("metadata", key, topic, reason=str(exc))
    return RowCheck("metadata", key, topic, meta.generation, metadata=meta)
