"""A message to publish with a key and headers, and how a key and headers are stored.

A batch to publish is a list of plain ``bytes`` payloads and :class:`Record` objects; a record carries an
optional key (bytes) and headers (an ordered list of (name, value bytes), names may repeat, as Kafka's).
A message's key and headers are stored as its *extra* section (docs/tables.md)::

    extra = key length i32 (-1: no key) | key | header count u16
            | (name length u16 | name UTF-8 | value length u32 | value)*

Limits (checked by :func:`tms_hbase.model.checks.validate_payloads`): a key is an identity to route or order
by, not data, so it is bounded at 4 KiB; at most 64 headers, each name 1-256 UTF-8 bytes, and all names and
values of one message at most 64 KiB (JetStream's and HTTP servers' header budgets are of this order). Their
bytes count in the batch size limit as they are stored.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from tms_hbase.errors import CorruptData

Headers = tuple[tuple[str, bytes], ...]
Extra = tuple[bytes | None, Headers]
"""A message's key and headers as stored and read: (key or None, headers)."""
NONE: Extra = (None, ())

MAX_KEY_BYTES = 4096
MAX_HEADERS = 64
MAX_HEADER_NAME_BYTES = 256
MAX_HEADERS_BYTES = 64 * 1024

_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class Record:
    """One message to publish: its ``payload``, an optional ``key`` and ``headers`` ((name, value) pairs, in
    order; a name may repeat). ``client.publish(topic, [b"plain", Record(b"body", key=b"order-7")])``."""

    payload: bytes
    key: bytes | None = None
    headers: Sequence[tuple[str, bytes]] = ()

    @property
    def extra(self) -> Extra:
        return self.key, tuple(self.headers)


def split(batch: Sequence[bytes | Record]) -> tuple[tuple[bytes, ...], tuple[Extra, ...] | None]:
    """The payloads of a checked batch, and each message's key and headers (None: the batch has none, so it
    is stored as before, byte for byte)."""
    if Record not in set(map(type, batch)):
        return tuple(batch), None  # type: ignore[arg-type]
    payloads = tuple(m.payload if type(m) is Record else m for m in batch)
    extras = tuple(m.extra if type(m) is Record else NONE for m in batch)
    return payloads, extras  # type: ignore[return-value]


def extra_size(extra: Extra) -> int:
    """Bytes :func:`encode` takes for ``extra``."""
    key, headers = extra
    return 6 + (0 if key is None else len(key)) + sum(6 + len(n.encode()) + len(v) for n, v in headers)


def counted_size(extra: Extra) -> int:
    """Bytes a message's key and headers add to its size in the totals and stats: their stored section,
    0 for a message with neither (so plain messages count their payload only, as always)."""
    return 0 if extra == NONE else extra_size(extra)


def counted_sizes(payloads: Sequence[bytes | memoryview], extras: Sequence[Extra] | None) -> list[int]:
    """Each message's size as the totals and stats count it: payload bytes plus :func:`counted_size`."""
    sizes = list(map(len, payloads))
    return sizes if extras is None else [size + counted_size(extra) for size, extra in zip(sizes, extras, strict=True)]


def message_bytes(batch: Sequence[bytes | Record]) -> int:
    """The bytes of a batch's messages as the totals count them (:func:`counted_sizes`)."""
    return sum(counted_sizes(*split(batch)))


def encode(extra: Extra) -> bytes:
    key, headers = extra
    parts = [_I32.pack(-1 if key is None else len(key))]
    if key is not None:
        parts.append(key)
    parts.append(_U16.pack(len(headers)))
    for name, value in headers:
        raw = name.encode()
        parts += (_U16.pack(len(raw)), raw, _U32.pack(len(value)), value)
    return b"".join(parts)


def decode(data: bytes | memoryview, offset: int = 0) -> tuple[Extra, int]:
    """The extra section at ``offset`` and the offset after it; CorruptData if it does not decode."""
    try:
        (size,) = _I32.unpack_from(data, offset)
        offset += 4
        key = None
        if size >= 0:
            key = bytes(data[offset : offset + size])
            offset += size
        (count,) = _U16.unpack_from(data, offset)
        offset += 2
        headers = []
        for _ in range(count):
            (size,) = _U16.unpack_from(data, offset)
            name = bytes(data[offset + 2 : offset + 2 + size]).decode()
            offset += 2 + size
            (size,) = _U32.unpack_from(data, offset)
            headers.append((name, bytes(data[offset + 4 : offset + 4 + size])))
            offset += 4 + size
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptData(f"corrupt key and headers: {exc}") from None
    if offset > len(data):
        raise CorruptData("truncated key and headers")
    return (key, tuple(headers)), offset


def decode_all(data: bytes | memoryview, offset: int, count: int) -> tuple[tuple[Extra, ...], int]:
    """``count`` extra sections from ``offset``, and the offset after them."""
    extras = []
    for _ in range(count):
        extra, offset = decode(data, offset)
        extras.append(extra)
    return tuple(extras), offset
