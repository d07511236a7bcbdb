"""Avro wire formats (fastavro): CDAP's PublishRequest, ConsumeRequest and ConsumeResponse (Message
array) schemas, and the rollback handle a transactional publish returns. The schemas are data, kept in
one place."""

from __future__ import annotations

import functools
import io
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tms_hbase.errors import InvalidArgument

# A consumed message with its publish time (ms): CDAP's Message record plus one field.
_MESSAGE: dict[str, Any] = {
    "type": "record",
    "name": "Message",
    "namespace": "tms_hbase",
    "fields": [
        {"name": "id", "type": "bytes"},
        {"name": "payload", "type": "bytes"},
        {"name": "publishTime", "type": "long", "default": 0},
    ],
}
_HEADER = {
    "type": "record",
    "name": "Header",
    "namespace": "tms_hbase",
    "fields": [{"name": "name", "type": "string"}, {"name": "value", "type": "bytes"}],
}
_KEY_AND_HEADERS = [
    {"name": "key", "type": ["null", "bytes"], "default": None},
    {"name": "headers", "type": {"type": "array", "items": _HEADER}, "default": []},
]
_RECORD = {
    "type": "record",
    "name": "Record",
    "namespace": "tms_hbase",
    "fields": [{"name": "payload", "type": "bytes"}, *_KEY_AND_HEADERS],
}
SCHEMAS: dict[str, Any] = {
    "PublishRequest": {
        "type": "record",
        "name": "PublishRequest",
        "namespace": "tms_hbase",
        "fields": [
            {"name": "transactionWritePointer", "type": ["long", "null"]},
            {"name": "messages", "type": {"type": "array", "items": "bytes"}},
        ],
    },
    # CDAP's PublishResponse named rows by (timestamp, sequence id); ours are named by a dense
    # position within a topic generation, and carry the topic so a handle cannot roll back another.
    "PublishResponse": {
        "type": "record",
        "name": "PublishResponse",
        "namespace": "tms_hbase",
        "fields": [
            {"name": "topic", "type": "string"},
            {"name": "transactionWritePointer", "type": "long"},
            {"name": "generation", "type": "int"},
            {"name": "startPosition", "type": "long"},
            {"name": "endPosition", "type": "long"},
        ],
    },
    "ConsumeRequest": {
        "type": "record",
        "name": "ConsumeRequest",
        "namespace": "tms_hbase",
        "fields": [
            {"name": "startFrom", "type": ["bytes", "long", "null"]},
            {"name": "inclusive", "type": "boolean", "default": True},
            {"name": "limit", "type": ["int", "null"]},
            {"name": "transaction", "type": ["bytes", "null"]},
        ],
    },
    "Message": _MESSAGE,
    # CDAP's poll response, to the letter: an array of (id, payload). Avro binary has no room for
    # fields a reader does not expect, so publish times travel only in the array below, on request.
    "ConsumeResponse": {
        "type": "array",
        "items": {
            "type": "record",
            "name": "Message",
            "fields": [{"name": "id", "type": "bytes"}, {"name": "payload", "type": "bytes"}],
        },
    },
    "TimedConsumeResponse": {"type": "array", "items": _MESSAGE},
    # Shared subscriptions (docs/gateway.md): a batch of deliveries, what an ack, nack, release or
    # extend names (``seconds``: a nack's delay, an extension's hold time), and the new deadlines.
    "Deliveries": {
        "type": "array",
        "items": {
            "type": "record",
            "name": "Delivery",
            "namespace": "tms_hbase",
            "fields": [
                {"name": "id", "type": "bytes"},
                {"name": "payload", "type": "bytes"},
                {"name": "publishTime", "type": "long"},
                {"name": "deliveries", "type": "int"},
                {"name": "deadline", "type": "long"},
                {"name": "incarnation", "type": "long", "default": 0},
            ],
        },
    },
    "SettleRequest": {
        "type": "record",
        "name": "SettleRequest",
        "namespace": "tms_hbase",
        "fields": [
            {"name": "ids", "type": {"type": "array", "items": "bytes"}},
            {"name": "seconds", "type": ["null", "double"], "default": None},
            {"name": "incarnations", "type": {"type": "array", "items": "long"}, "default": []},
        ],
    },
    # a SettleRequest as written before deliveries were named (no incarnations): still read
    "UnfencedSettleRequest": {
        "type": "record",
        "name": "SettleRequest",
        "namespace": "tms_hbase",
        "fields": [
            {"name": "ids", "type": {"type": "array", "items": "bytes"}},
            {"name": "seconds", "type": ["null", "double"], "default": None},
        ],
    },
    "Deadlines": {"type": "array", "items": "long"},
    # Keys and headers (docs/gateway.md), under their own media type so the schemas above stay CDAP's bytes:
    # a publish's messages are bare payloads or keyed messages; every message read carries its key and headers.
    "RecordsPublishRequest": {
        "type": "record",
        "name": "RecordsPublishRequest",
        "namespace": "tms_hbase",
        "fields": [
            {"name": "transactionWritePointer", "type": ["long", "null"]},
            {"name": "messages", "type": {"type": "array", "items": ["bytes", _RECORD]}},
        ],
    },
    "RecordsConsumeResponse": {
        "type": "array",
        "items": {
            "type": "record",
            "name": "RecordMessage",
            "namespace": "tms_hbase",
            "fields": [
                {"name": "id", "type": "bytes"},
                {"name": "payload", "type": "bytes"},
                {"name": "publishTime", "type": "long"},
                *_KEY_AND_HEADERS,
            ],
        },
    },
    "RecordsDeliveries": {
        "type": "array",
        "items": {
            "type": "record",
            "name": "RecordDelivery",
            "namespace": "tms_hbase",
            "fields": [
                {"name": "id", "type": "bytes"},
                {"name": "payload", "type": "bytes"},
                {"name": "publishTime", "type": "long"},
                {"name": "deliveries", "type": "int"},
                {"name": "deadline", "type": "long"},
                *_KEY_AND_HEADERS,
                {"name": "incarnation", "type": "long", "default": 0},
            ],
        },
    },
}
HANDLE_MAGIC = b"TMRB"
T = TypeVar("T")


@functools.cache
def _parsed(schema: str) -> Any:
    """One of :data:`SCHEMAS`, parsed by fastavro (imported at the first use: a process that never encodes
    Avro, such as a CLI command, does not load it)."""
    import fastavro

    return fastavro.parse_schema(SCHEMAS[schema])


def encode(schema: str, record: dict[str, Any] | list[Any]) -> bytes:
    """Avro binary (schemaless) of ``record`` under one of :data:`SCHEMAS`."""
    import fastavro

    out = io.BytesIO()
    try:
        fastavro.schemaless_writer(out, _parsed(schema), record)
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidArgument(f"cannot encode {schema}: {exc}") from None
    return out.getvalue()


def decode(schema: str, data: bytes) -> Any:
    """Inverse of :func:`encode`; bytes that do not decode completely are InvalidArgument."""
    import fastavro

    buffer = io.BytesIO(data)
    try:
        record = fastavro.schemaless_reader(buffer, _parsed(schema), None)
    except Exception as exc:  # fastavro raises many kinds on garbage input
        raise InvalidArgument(f"corrupt {schema}: {type(exc).__name__}") from None
    if buffer.tell() != len(data):
        raise InvalidArgument(f"corrupt {schema}: {len(data) - buffer.tell()} trailing bytes")
    return record


_MAX_LONG = 2**63 - 1
_MAX_INT = 2**31 - 1
_MIN_LONG = -(2**63)


def encode_publish_request(pointer: int | None, messages: Sequence[bytes]) -> bytes:
    """The Avro binary of a PublishRequest, the same bytes :func:`encode` gives (``tests/unit/test_codecs.py``
    checks it against fastavro), about 5× faster: this is the encoding of every publish a client sends through
    the gateway, and the schema is fixed and simple (a ``["long", "null"]`` union and an array of ``bytes``,
    written as one block). InvalidArgument for a pointer outside a long or a message that is not bytes."""
    if pointer is None:
        parts = [b"\x02"]  # union branch 1: null
    elif isinstance(pointer, bool) or not isinstance(pointer, int) or not _MIN_LONG <= pointer <= _MAX_LONG:
        raise InvalidArgument(f"cannot encode PublishRequest: transactionWritePointer {pointer!r} is not a long")
    else:
        parts = [b"\x00", _varint((pointer << 1) ^ (pointer >> 63))]  # branch 0: long (zigzag)
    if messages:
        parts.append(_varint(len(messages) << 1))
        headers = _BYTES_HEADERS
        for i, message in enumerate(messages):
            if type(message) is not bytes:
                if not isinstance(message, (bytearray, memoryview)):
                    raise InvalidArgument(f"cannot encode PublishRequest: message {i} is not bytes")
                message = bytes(message)
            size = len(message)
            header = headers.get(size)
            if header is None:
                header = _varint(size << 1)
                if len(headers) < 4096:  # a few distinct sizes in practice; bounded whatever comes
                    headers[size] = header
            parts.append(header)
            parts.append(message)
    parts.append(b"\x00")  # the end of the array
    return b"".join(parts)


_BYTES_HEADERS: dict[int, bytes] = {}  # the varint length header of a ``bytes`` value, by length


Run = tuple[Sequence[bytes], Sequence["bytes | memoryview"], int]
"""Messages that share a publish time, as (their ids, their payloads, the time in ms): what the page encoders
take, so that the messages of one stored row are written without a message object each."""


def encode_consume_response(runs: Sequence[Run], publish_time: bool) -> bytes:
    """The Avro binary of a ConsumeResponse (``publish_time``: a TimedConsumeResponse) of the messages of
    ``runs`` in order, the same bytes :func:`encode` gives (``tests/unit/test_codecs.py`` checks it against
    fastavro), several times faster: the gateway encodes every page a consumer or a poll gets with it, up
    to thousands of messages, where fastavro spends microseconds on each record's dict. Payloads may be
    memoryviews (of the stored rows): they are joined into the one output as they are."""
    count = sum(len(ids) for ids, _, _ in runs)
    parts: list[bytes | memoryview] = [_varint(count << 1)] if count else []
    extend = parts.extend
    id_size = payload_size = -1  # the last length written and its header: the messages of a row share them
    id_head = payload_head = b""
    last_time, time_bytes = None, b""  # the messages of one batch share their publish time
    for ids, payloads, time_ms in runs:
        if publish_time and time_ms != last_time:
            last_time, time_bytes = time_ms, _varint((time_ms << 1) ^ (time_ms >> 63))
        for message_id, payload in zip(ids, payloads, strict=True):
            if len(message_id) != id_size:
                id_size = len(message_id)
                id_head = _bytes_header(id_size)
            if len(payload) != payload_size:
                payload_size = len(payload)
                payload_head = _bytes_header(payload_size)
            extend((id_head, message_id, payload_head, payload, time_bytes))  # time_bytes: b"" without times
    parts.append(b"\x00")  # the end of the array
    return b"".join(parts)


def _bytes_header(size: int) -> bytes:
    """The varint length header of a ``bytes`` value of ``size`` bytes (kept for the few sizes seen)."""
    header = _BYTES_HEADERS.get(size)
    if header is None:
        header = _varint(size << 1)
        if len(_BYTES_HEADERS) < 4096:  # a few distinct sizes in practice; bounded whatever comes
            _BYTES_HEADERS[size] = header
    return header


class _Truncated(Exception):
    """The data ends inside a value (internal to the decoders below)."""


def decode_consume_response(data: bytes, publish_time: bool, make: Callable[[bytes, bytes, int], T]) -> list[T]:
    """Inverse of :func:`encode_consume_response` (``publish_time``: a TimedConsumeResponse): ``make(id, payload,
    publish time)`` of each message (time 0 without ``publish_time``), for any Avro binary of the schema,
    several times faster than :func:`decode` with its dict per record: a gateway client decodes every page it
    gets with it. The messages of a batch share their id length, payload length and publish time, so a
    header whose bytes are those of the one before is not decoded again, and the records after one that
    repeat its headers lie at a fixed stride: they are cut out of the data by position (:func:`_repeats`
    checks their header bytes). Bytes that do not decode completely are InvalidArgument."""
    out: list[T] = []
    append, extend = out.append, out.extend
    id_head, id_size = b"\xff", 0  # the last length header of an id (b"\xff" is no header: no match), its value
    body_head, body_size = b"\xff", 0  # the same for payloads
    time_head, time = b"" if not publish_time else b"\xff", 0  # and the publish time (none: b"", always a match)
    startswith = data.startswith
    pos = 0
    try:
        while True:
            count, pos = _read_long(data, pos)
            if count == 0:
                break
            if count < 0:
                count = -count
                _, pos = _read_long(data, pos)  # the block's size in bytes
            while count:
                if startswith(id_head, pos):
                    pos += len(id_head)
                else:
                    id_head, id_size, pos = _read_size(data, pos)
                end = pos + id_size
                message_id = data[pos:end]
                if startswith(body_head, end):
                    pos = end + len(body_head)
                else:
                    body_head, body_size, pos = _read_size(data, end)
                end = pos + body_size
                payload = data[pos:end]
                if startswith(time_head, end):
                    pos = end + len(time_head)
                else:
                    start = end
                    time, pos = _read_long(data, start)
                    time_head = data[start:pos]
                append(make(message_id, payload, time))
                count -= 1
                heads = (id_head, id_size, body_head, body_size, time_head)
                repeats = _repeats(data, pos, count, heads) if count else 0
                if repeats:
                    stride = len(id_head) + id_size + len(body_head) + body_size + len(time_head)
                    end = pos + repeats * stride
                    at = pos + len(id_head)
                    ids = [data[i : i + id_size] for i in range(at, end, stride)]
                    at += id_size + len(body_head)
                    bodies = [data[i : i + body_size] for i in range(at, end, stride)]
                    extend(map(make, ids, bodies, itertools.repeat(time, repeats)))
                    pos, count = end, count - repeats
    except _Truncated:
        pos = -1
    if pos != len(data):
        schema = "TimedConsumeResponse" if publish_time else "ConsumeResponse"
        what = "the data ends inside a value" if pos < 0 or pos > len(data) else f"{len(data) - pos} trailing bytes"
        raise InvalidArgument(f"corrupt {schema}: {what}")
    return out


def _repeats(data: bytes, pos: int, count: int, heads: tuple[bytes, int, bytes, int, bytes]) -> int:
    """How many of the next ``count`` records from ``pos`` (at most) have exactly the headers ``heads`` (the
    id's length header and length, the payload's, the publish time's bytes): records of one stride,
    each within the data. Each header byte is checked for all of them at once, as a column of the data."""
    id_head, id_size, body_head, body_size, time_head = heads
    stride = len(id_head) + id_size + len(body_head) + body_size + len(time_head)
    n = min(count, (len(data) - pos) // stride)
    body_at = len(id_head) + id_size
    time_at = body_at + len(body_head) + body_size
    for offset, head in ((0, id_head), (body_at, body_head), (time_at, time_head)):
        for i, byte in enumerate(head, pos + offset):
            if not n:
                return 0
            column = data[i : i + n * stride : stride]
            if column.count(byte) != n:  # the records up to the first one without it
                n -= len(column.lstrip(bytes((byte,))))
    return n


def _read_size(data: bytes, pos: int) -> tuple[bytes, int, int]:
    """The length header of a ``bytes`` value at ``pos``: (its bytes, the length, the position after it)."""
    size, end = _read_long(data, pos)
    if size < 0:
        raise InvalidArgument(f"corrupt Avro data: a bytes value of length {size}")
    return data[pos:end], size, end


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    """The Avro long (a zigzag varint) at ``pos`` and the position after it; _Truncated if the data ends
    first, InvalidArgument if it runs past the ten bytes of a 64-bit value."""
    try:
        byte = data[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
        value, shift = byte & 0x7F, 7
        while True:
            pos += 1
            byte = data[pos]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift > 63:
                raise InvalidArgument("corrupt Avro data: a long of more than ten bytes")
    except IndexError:
        raise _Truncated from None
    return (value >> 1) ^ -(value & 1), pos + 1


def _varint(value: int) -> bytes:
    """An unsigned varint (an already zigzag-encoded Avro long): 7 bits a byte, least significant first."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@dataclass(frozen=True)
class RollbackDetail:
    """What a transactional publish wrote; ``bytes(detail)`` is the opaque handle ``rollback`` takes.

    Every publish writes one batch row, so a real handle names one position (start == end). Anything
    else (a forged handle, or one from another system) is refused with InvalidArgument when the detail
    is made, before any HBase call: rollback does bounded work, one row.
    """

    topic: str
    transaction_write_pointer: int
    generation: int
    start_position: int
    end_position: int

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str):
            raise InvalidArgument(f"corrupt rollback handle: topic {self.topic!r} is not a string")
        for name, value, limit in (
            ("transaction write pointer", self.transaction_write_pointer, _MAX_LONG),
            ("generation", self.generation, _MAX_INT),
            ("start position", self.start_position, _MAX_LONG),
            ("end position", self.end_position, _MAX_LONG),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= limit:
                raise InvalidArgument(f"corrupt rollback handle: {name} {value!r} is not between 1 and {limit}")
        if self.end_position != self.start_position:
            raise InvalidArgument(
                f"corrupt rollback handle: positions {self.start_position}..{self.end_position}, but a publish "
                "writes one batch row, so a handle names exactly one position"
            )

    def __bytes__(self) -> bytes:
        return HANDLE_MAGIC + encode(
            "PublishResponse",
            {
                "topic": self.topic,
                "transactionWritePointer": self.transaction_write_pointer,
                "generation": self.generation,
                "startPosition": self.start_position,
                "endPosition": self.end_position,
            },
        )

    @classmethod
    def from_bytes(cls, data: object) -> RollbackDetail:
        """Parse and check a handle; anything that is not one a publish returned is InvalidArgument."""
        if not isinstance(data, (bytes, bytearray, memoryview)) or not bytes(data).startswith(HANDLE_MAGIC):
            raise InvalidArgument("corrupt rollback handle: not bytes returned by a transactional publish")
        try:
            r = decode("PublishResponse", bytes(data)[len(HANDLE_MAGIC) :])
        except InvalidArgument as exc:
            raise InvalidArgument(f"corrupt rollback handle ({exc})") from None
        return cls(r["topic"], r["transactionWritePointer"], r["generation"], r["startPosition"], r["endPosition"])
