"""A message to publish with a key and headers, and how a key and headers are stored.

A batch to publish is a list of plain ``bytes`` payloads and :class:`Record` objects; a record carries an
optional key (bytes) and headers (an ordered list of (name, value bytes), names may repeat, as Kafka's).
The keys and headers of a batch's n messages (m headers in all) are stored column by column, so that a read
slices them out in a few C calls instead of a loop per message (docs/tables.md)::

    n key lengths i32 (-1: no key) | the keys | n header counts u16 | m name lengths u16
    | m value lengths u32 | the names (UTF-8) | the values

A message's share of them (what it counts for in the batch limit and the byte totals, :func:`extra_size`) is
6 bytes plus its key, plus 6 bytes, its name and its value per header.

Limits (checked by :func:`tms_hbase.model.checks.validate_payloads`): a key is an identity to route or order
by, not data, so it is bounded at 4 KiB; at most 64 headers, each name 1-256 UTF-8 bytes, and all names and
values of one message at most 64 KiB (JetStream's and HTTP servers' header budgets are of this order). Their
bytes count in the batch size limit as they are stored.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter

from tms_hbase.errors import CorruptData

Headers = tuple[tuple[str, bytes], ...]
Extra = tuple[bytes | None, Headers]
"""A message's key and headers as stored and read: (key or None, headers)."""
NONE: Extra = (None, ())

MAX_KEY_BYTES = 4096
MAX_HEADERS = 64
MAX_HEADER_NAME_BYTES = 256
MAX_HEADERS_BYTES = 64 * 1024


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


_PAYLOAD, _KEY, _HEADERS = attrgetter("payload"), attrgetter("key"), attrgetter("headers")


def split(batch: Sequence[bytes | Record]) -> tuple[tuple[bytes, ...], tuple[Extra, ...] | None]:
    """The payloads of a checked batch, and each message's key and headers (None: the batch has none, so it
    is stored as before, byte for byte)."""
    types = set(map(type, batch))
    if Record not in types:
        return tuple(batch), None  # type: ignore[arg-type]
    if len(types) == 1:  # records only: column by column, in C calls
        return tuple(map(_PAYLOAD, batch)), tuple(zip(map(_KEY, batch), map(tuple, map(_HEADERS, batch)), strict=True))
    payloads = tuple(m.payload if type(m) is Record else m for m in batch)
    extras = tuple(m.extra if type(m) is Record else NONE for m in batch)
    return payloads, extras  # type: ignore[return-value]


def extra_size(extra: Extra) -> int:
    """Bytes ``extra`` takes in :func:`encode_all`'s columns."""
    key, headers = extra
    size = 6 + (0 if key is None else len(key))
    if not headers:
        return size
    names, values = zip(*headers, strict=True)
    return size + 6 * len(headers) + sum(map(len, map(str.encode, names))) + sum(map(len, values))


def extras_bytes(extras: Sequence[Extra]) -> int:
    """The sum of :func:`counted_size` over ``extras``, column by column in C calls (a batch's total, as the
    batch limit and the byte totals count it)."""
    if not extras:
        return 0
    keys, headers = zip(*extras, strict=True)
    pairs = list(itertools.chain.from_iterable(headers))
    size = 6 * (len(extras) - extras.count(NONE)) + sum(map(len, filter(None, keys))) + 6 * len(pairs)
    if not pairs:
        return size
    names, values = zip(*pairs, strict=True)
    return size + sum(map(len, map(str.encode, names))) + sum(map(len, values))


def counted_size(extra: Extra) -> int:
    """Bytes a message's key and headers add to its size in the totals and stats: their stored section,
    0 for a message with neither (so plain messages count their payload only, as always)."""
    return 0 if extra == NONE else extra_size(extra)


def counted_sizes(payloads: Sequence[bytes | memoryview], extras: Sequence[Extra] | None) -> list[int]:
    """Each message's size as the totals and stats count it: payload bytes plus :func:`counted_size`."""
    sizes = list(map(len, payloads))
    return sizes if extras is None else [size + counted_size(extra) for size, extra in zip(sizes, extras, strict=True)]


def message_bytes(batch: Sequence[bytes | Record]) -> int:
    """The bytes of a batch's messages as the totals count them (the sum of :func:`counted_sizes`)."""
    plain, extras = split(batch)
    return sum(map(len, plain)) + (0 if extras is None else extras_bytes(extras))


def encode_all(extras: Sequence[Extra]) -> bytes:
    """The extra sections of ``extras``, column by column (see the module's layout)."""
    n = len(extras)
    keys = [key for key, _ in extras]
    headers = [pair for _, pairs in extras for pair in pairs]
    names = [name.encode() for name, _ in headers]
    values = [value for _, value in headers]
    return b"".join(
        (
            struct.pack(f">{n}i", *(-1 if key is None else len(key) for key in keys)),
            b"".join(key for key in keys if key is not None),
            struct.pack(f">{n}H", *(len(pairs) for _, pairs in extras)),
            struct.pack(f">{len(names)}H", *map(len, names)),
            struct.pack(f">{len(values)}I", *map(len, values)),
            *names,
            *values,
        )
    )


def decode_all(data: bytes | memoryview, offset: int, count: int) -> tuple[tuple[Extra, ...], int]:
    """``count`` extra sections from ``offset`` (as :func:`encode_all` writes them) and the offset after them;
    CorruptData if they do not decode. Column by column, in C calls (map, slice, zip) rather than Python steps
    per message: a read of keyed messages costs little more than a read of plain ones."""
    try:
        key_sizes = struct.unpack_from(f">{count}i", data, offset)
        offset += 4 * count
        keys, offset = _slices(data, offset, key_sizes)
        counts = struct.unpack_from(f">{count}H", data, offset)
        offset += 2 * count
        total = sum(counts)
        if not total:
            return tuple(zip(keys, repeat((), count), strict=True)), offset
        name_sizes = struct.unpack_from(f">{total}H", data, offset)
        offset += 2 * total
        value_sizes = struct.unpack_from(f">{total}I", data, offset)
        offset += 4 * total
        names, offset = _slices(data, offset, name_sizes, text=True)
        values, offset = _slices(data, offset, value_sizes)
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptData(f"corrupt key and headers: {exc}") from None
    pairs = list(zip(names, values, strict=True))
    if min(counts) == max(counts):  # the usual case: every message has as many headers
        headers: list = list(zip(*[iter(pairs)] * counts[0], strict=True))
    else:
        headers = [tuple(pairs[a:b]) for a, b in itertools.pairwise(itertools.accumulate(counts, initial=0))]
    return tuple(zip(keys, headers, strict=True)), offset


def _slices(data: bytes | memoryview, offset: int, sizes: Sequence[int], *, text: bool = False) -> tuple[list, int]:
    """The values of ``sizes`` (-1: None) laid end to end from ``offset``, as bytes (``text``: as str, UTF-8),
    and the offset after them."""
    present = not sizes or min(sizes) >= 0
    bounds = list(itertools.accumulate(sizes if present else [max(size, 0) for size in sizes], initial=0))
    end = offset + bounds[-1]
    if end > len(data):
        raise CorruptData("truncated key and headers")
    raw = bytes(data[offset:end])
    blob: bytes | str = raw
    if text:
        decoded = raw.decode()
        blob = decoded if len(decoded) == len(raw) else raw  # ASCII: byte offsets are character offsets
    values: list = list(map(blob.__getitem__, map(slice, bounds, bounds[1:])))
    if text and blob is raw:
        values = [value.decode() for value in values]
    if not present:
        values = [None if size < 0 else value for size, value in zip(sizes, values, strict=True)]
    return values, end
