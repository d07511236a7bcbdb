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

import functools
import itertools
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, itemgetter

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
_FIRST, _SECOND = itemgetter(0), itemgetter(1)


class Extras(tuple[Extra, ...]):
    """Each message's key and headers (a tuple of :data:`Extra`, in order) with their stored ``section`` (the
    module's layout), encoded once (or given, by a caller that has the columns: :func:`pack`): the batch limit,
    the totals and the batch row all take it from here."""

    section: bytes

    def __new__(cls, extras: Iterable[Extra], section: bytes | None = None) -> Extras:
        self = super().__new__(cls, extras)
        self.section = _encode(self) if section is None else section
        return self

    @property
    def counted(self) -> int:
        """The sum of :func:`counted_size` over them: their section less 6 bytes per message with neither."""
        return len(self.section) - 6 * self.count(NONE)


class Batch(tuple[bytes | Record, ...]):
    """A checked batch (:func:`tms_hbase.model.checks.validate_payloads`): its messages as a tuple, split into
    ``plain`` payloads and ``extras`` (None: no message has a key or headers, so the row is stored as before,
    byte for byte) once (or given, by a caller that has them), with the bytes its messages count in the totals
    (``message_bytes``)."""

    plain: tuple[bytes, ...]
    extras: Extras | None
    message_bytes: int

    def __new__(
        cls, messages: Iterable[bytes | Record], split: tuple[tuple[bytes, ...], Extras | None] | None = None
    ) -> Batch:
        self = super().__new__(cls, messages)
        self.plain, self.extras = _split(self) if split is None else split
        self.message_bytes = sum(map(len, self.plain)) + (0 if self.extras is None else self.extras.counted)
        return self


def split(batch: Sequence[bytes | Record]) -> tuple[tuple[bytes, ...], Extras | None]:
    """The payloads of a checked batch, and each message's key and headers (None: the batch has none, so it
    is stored as before, byte for byte)."""
    if type(batch) is Batch:
        return batch.plain, batch.extras
    return _split(batch)


def _split(batch: Sequence[bytes | Record]) -> tuple[tuple[bytes, ...], Extras | None]:
    types = set(map(type, batch))
    if Record not in types:
        return tuple(batch), None  # type: ignore[arg-type]
    if len(types) == 1:  # records only: column by column, in C calls
        return tuple(map(_PAYLOAD, batch)), Extras(zip(map(_KEY, batch), map(tuple, map(_HEADERS, batch)), strict=True))
    payloads = tuple(m.payload if type(m) is Record else m for m in batch)
    return payloads, Extras(m.extra if type(m) is Record else NONE for m in batch)  # type: ignore[return-value]


def extra_size(extra: Extra) -> int:
    """Bytes ``extra`` takes in :func:`encode_all`'s columns."""
    key, headers = extra
    size = 6 + (0 if key is None else len(key))
    if not headers:
        return size
    names, values = zip(*headers, strict=True)
    return size + 6 * len(headers) + sum(map(len, map(str.encode, names))) + sum(map(len, values))


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
    if type(batch) is Batch:
        return batch.message_bytes
    plain, extras = _split(batch)
    return sum(map(len, plain)) + (0 if extras is None else extras.counted)


def encode_all(extras: Sequence[Extra]) -> bytes:
    """The extra sections of ``extras``, column by column (see the module's layout)."""
    return extras.section if type(extras) is Extras else _encode(extras)


def _encode(extras: Sequence[Extra]) -> bytes:
    """:func:`encode_all`, in C calls (map, join, one pack per column) rather than Python steps per message."""
    headers = list(map(_SECOND, extras))
    pairs = list(itertools.chain.from_iterable(headers))
    names = list(map(_FIRST, pairs))
    text = "".join(names)
    if text.isascii():  # the usual case: one encode, and a name's length in characters is its length in bytes
        name_blob, name_sizes = text.encode(), list(map(len, names))
    else:
        encoded = list(map(str.encode, names))
        name_blob, name_sizes = b"".join(encoded), list(map(len, encoded))
    return pack(list(map(_FIRST, extras)), list(map(len, headers)), name_sizes, name_blob, list(map(_SECOND, pairs)))


def pack(
    keys: list[bytes | None], counts: list[int], name_sizes: list[int], names: bytes, values: Sequence[bytes]
) -> bytes:
    """The extra sections of messages with ``keys`` (None: no key) and ``counts`` headers each, whose header
    names (UTF-8, end to end, each ``name_sizes`` long) and ``values`` are all the messages' in order."""
    n, m = len(keys), len(values)
    if None in keys:
        key_sizes = [-1 if key is None else len(key) for key in keys]
        keys = [key for key in keys if key is not None]
    else:
        key_sizes = list(map(len, keys))  # type: ignore[arg-type]
    return b"".join(
        (
            struct.pack(f">{n}i", *key_sizes),
            b"".join(keys),  # type: ignore[arg-type]
            struct.pack(f">{n}H{m}H{m}I", *counts, *name_sizes, *map(len, values)),
            names,
            b"".join(values),
        )
    )


def decode_all(data: bytes | memoryview, offset: int, count: int) -> tuple[tuple[Extra, ...], int]:
    """``count`` extra sections from ``offset`` (as :func:`encode_all` writes them) and the offset after them;
    CorruptData if they do not decode. Column by column, each column's strings cut out by one struct made for
    its shape (cached: in a batch whose messages have the same shape the keys, the names and the values each
    repeat one small pattern of sizes), so a read of keyed messages costs little more than a read of plain ones."""
    try:
        key_sizes = struct.unpack_from(f">{count}i", data, offset)
        keys: tuple[bytes | None, ...]
        keys, offset = _strings(data, offset + 4 * count, key_sizes, 1)
        counts = struct.unpack_from(f">{count}H", data, offset)
        offset += 2 * count
        if min(key_sizes, default=0) < 0:  # -1: no key (any negative size is read as none)
            if max(key_sizes) < 0:
                keys = (None,) * count
            else:
                keys = tuple(None if size < 0 else key for size, key in zip(key_sizes, keys, strict=True))
        total = sum(counts)
        if not total:
            return tuple(zip(keys, repeat((), count), strict=False)), offset
        sizes = struct.unpack_from(f">{total}H{total}I", data, offset)
        offset += 6 * total
        period = counts[0] if counts.count(counts[0]) == count else 0  # the usual case: as many headers each
        names, offset = _names(data, offset, sizes[:total], period)
        same = _repeated(data, offset, sizes[total:], period) if period else None
        if same is not None and names == names[:period] * count:  # each message has the same headers: one tuple
            first = tuple(zip(names[:period], same, strict=True))
            return tuple(zip(keys, repeat(first, count), strict=False)), offset + sum(sizes[total:])
        values, offset = _strings(data, offset, sizes[total:], period)
        pairs = list(zip(names, values, strict=True))
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptData(f"corrupt key and headers: {exc}") from None
    if period:
        headers: list = list(zip(*[iter(pairs)] * period, strict=True))
    else:
        headers = [tuple(pairs[a:b]) for a, b in itertools.pairwise(itertools.accumulate(counts, initial=0))]
    return tuple(zip(keys, headers, strict=True)), offset


def _strings(
    data: bytes | memoryview, offset: int, sizes: tuple[int, ...], period: int
) -> tuple[tuple[bytes, ...], int]:
    """The byte strings of ``sizes`` (a negative one: empty) laid end to end from ``offset``, and the offset
    after them; struct.error if ``data`` ends first. ``period``: the sizes may repeat every so many (0: they
    do not), when the struct that reads them is one cached for that pattern and count."""
    repeats = len(sizes) // period if period else 0
    if repeats and len(sizes) <= _LAYOUT_KEPT and sizes == sizes[:period] * repeats:
        layout = _layout(sizes[:period], repeats)
    else:  # no pattern (or a large one): a struct of its own, not kept
        layout = _make_layout(sizes, 1)
    return layout.unpack_from(data, offset), offset + layout.size


def _names(data: bytes | memoryview, offset: int, sizes: tuple[int, ...], period: int) -> tuple[tuple[str, ...], int]:
    """The header names of ``sizes`` from ``offset`` (as :func:`_strings` reads them), decoded, and the offset
    after them. When each message has the same names in the same order (``period`` names each), the first
    message's are decoded and repeated."""
    first = _repeated(data, offset, sizes, period) if period else None
    if first is not None:
        return tuple(map(_NAMES.__getitem__, first)) * (len(sizes) // period), offset + sum(sizes)
    raw, offset = _strings(data, offset, sizes, period)
    return tuple(map(_NAMES.__getitem__, raw)), offset


def _repeated(data: bytes | memoryview, offset: int, sizes: tuple[int, ...], period: int) -> tuple[bytes, ...] | None:
    """The first ``period`` of the byte strings of ``sizes`` laid end to end from ``offset`` (as :func:`_strings`
    reads them) if the rest repeat them, size for size and byte for byte (messages with the same headers);
    None otherwise. One comparison of the bytes instead of a string each."""
    repeats = len(sizes) // period
    if repeats < 2 or sizes[period : 2 * period] != sizes[:period]:  # (the second message's first: the usual
        return None  # difference is there already, and it is cheap to see)
    unit = sum(sizes[:period])
    first = bytes(data[offset : offset + unit])
    if data[offset + unit : offset + 2 * unit] != first or sizes != sizes[:period] * repeats:
        return None
    if data[offset : offset + unit * repeats] != first * repeats:
        return None
    return _layout(sizes[:period], 1).unpack_from(first)


def _make_layout(unit: tuple[int, ...], repeats: int) -> struct.Struct:
    """A struct reading byte strings of the sizes ``unit`` (a negative one: empty), ``repeats`` times over."""
    if unit and min(unit) < 0:
        unit = tuple(max(size, 0) for size in unit)
    codes = "s".join(map(str, unit)) + "s" if unit else ""
    return struct.Struct(">" + codes * repeats)


_layout = functools.lru_cache(maxsize=64)(_make_layout)
""":func:`_make_layout`, kept for the shapes in use (a few per application: its keys' and headers' sizes)."""
_LAYOUT_KEPT = 4096  # strings in a kept struct at most (a kept one takes about 32 bytes a string)


class _Names(dict[bytes, str]):
    """Header names decoded from UTF-8 once (names repeat from message to message): ``_NAMES[raw]``.
    UnicodeDecodeError for a name that is not UTF-8; forgets everything past :data:`_NAMES_KEPT` names."""

    def __missing__(self, raw: bytes) -> str:
        name = raw.decode()
        if len(self) >= _NAMES_KEPT:
            self.clear()
        self[raw] = name
        return name


_NAMES_KEPT = 4096
_NAMES = _Names()
