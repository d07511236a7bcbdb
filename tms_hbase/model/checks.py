"""The argument checks of the messaging interface (:class:`tms_hbase.api.MessagingService`), written once.

``MessagingClient`` (direct) and ``GatewayClient`` (over HTTP) call these same functions before doing any
work, so bad input gets the same InvalidArgument, with the same message, from both, and changes nothing.
What only the server can judge (a topic's TTL, a message id of another generation) is checked where the
data is, and comes back through the gateway as the same error class.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from operator import attrgetter, is_, itemgetter
from typing import cast

from tms_hbase.errors import BatchTooLarge, InvalidArgument
from tms_hbase.model import record, schedule
from tms_hbase.model.clock import check_time_ms
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.record import Batch, Record
from tms_hbase.model.rows import batch_size
from tms_hbase.model.topic import TopicId
from tms_hbase.model.transaction import Transaction

_PAYLOAD, _KEY, _HEADERS = attrgetter("payload"), attrgetter("key"), attrgetter("headers")
_NAME, _VALUE = itemgetter(0), itemgetter(1)

DEFAULT_MAX_BATCH_BYTES = 16 * 1024 * 1024
"""The most bytes one publish or store batch takes (payload sizes plus 4 bytes each) unless a client says."""


def positive_int(name: str, value: object, *, optional: bool = False) -> int | None:
    """``value`` as an int > 0 (None allowed if ``optional``), else InvalidArgument."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidArgument(f"bad {name} {value!r}: expected a positive integer{' or None' if optional else ''}")
    return value


def ttl_seconds(value: object) -> float | None:
    """A per-message TTL: None, or a finite number of seconds > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise InvalidArgument(f"bad per-message ttl {value!r}: expected a finite number of seconds > 0")
    return value


def fetch_args(
    start_message: object, start_time_ms: object, inclusive: object, limit: object, transaction: object
) -> None:
    """Where a fetch starts, how much it takes and in which view: a message id or a time (not both),
    ``inclusive`` a bool, ``limit`` None or > 0, ``transaction`` None or a Transaction."""
    if start_message is not None and start_time_ms is not None:
        raise InvalidArgument("give start_message or start_time_ms, not both")
    if start_message is not None:
        MessageId.decode(start_message)
    if start_time_ms is not None:
        check_time_ms("start_time_ms", start_time_ms)
    if not isinstance(inclusive, bool):
        raise InvalidArgument(f"inclusive must be True or False, not {inclusive!r}")
    positive_int("limit", limit, optional=True)
    if transaction is not None and not isinstance(transaction, Transaction):
        raise InvalidArgument(
            f"transaction must be a tms_hbase.tx.Transaction, not {type(transaction).__name__} "
            "(decode Tephra bytes with TransactionCodec first)"
        )


def reset_start(start_message: object, start_time_ms: object) -> None:
    """Where a subscription is reset to: exactly one of a message id ("earliest", "latest") or a time."""
    if (start_message is None) == (start_time_ms is None):
        raise InvalidArgument("give exactly one of start_message (an id, 'earliest' or 'latest') or start_time_ms")
    if start_time_ms is not None:
        check_time_ms("start_time_ms", start_time_ms)
    elif not isinstance(start_message, (bytes, str)):
        raise InvalidArgument(f"bad start_message {start_message!r}: expected a message id, 'earliest' or 'latest'")


def windows(value: Sequence[int] | None) -> None:
    """Statistics windows: None (the defaults) or whole seconds > 0."""
    if value is not None and any(isinstance(w, bool) or not isinstance(w, int) or w <= 0 for w in value):
        raise InvalidArgument(f"bad windows {value!r}: expected whole seconds > 0")


def subscription_options(shared: bool, options: dict[str, object]) -> None:
    """The settings of a shared subscription are given only with ``shared=True``."""
    if not isinstance(shared, bool):
        raise InvalidArgument(f"shared must be True or False, not {shared!r}")
    given = sorted(name for name, value in options.items() if value is not None)
    if not shared and given:
        raise InvalidArgument(f"{', '.join(given)} need{'s' if len(given) == 1 else ''} shared=True")


def seconds(name: str, value: object, *, optional: bool = False) -> float | None:
    """A wait or a duration: a number of seconds >= 0 (None allowed if ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise InvalidArgument(f"bad {name} {value!r}: expected seconds >= 0")
    return value


def namespace(value: object) -> None:
    """A namespace name, as a topic's (InvalidArgument before any call)."""
    TopicId(value, "x")  # type: ignore[arg-type]


def validate_payloads(payloads: object, max_batch_bytes: int, *, allow_empty: bool) -> Batch:
    """Payloads as a :class:`~tms_hbase.model.record.Batch` (a tuple) of bytes and checked :class:`Record`
    objects (a record with neither key nor headers becomes its payload), or InvalidArgument (nothing is
    written on bad input). A batch this returned is not checked again, only measured against the limit."""
    return sized_payloads(payloads, max_batch_bytes, allow_empty=allow_empty)[0]


def sized_payloads(payloads: object, max_batch_bytes: int, *, allow_empty: bool) -> tuple[Batch, int]:
    """:func:`validate_payloads` with the batch's :func:`~tms_hbase.model.rows.batch_size` (for a caller that
    groups batches by size, as the background publisher does, without measuring each one twice)."""
    if type(payloads) is Batch:
        batch = payloads
    elif type(payloads) not in (list, tuple) and (  # (the usual types first: the ABC's check is a Python call)
        isinstance(payloads, (bytes, bytearray, memoryview, str)) or not isinstance(payloads, Sequence)
    ):
        raise InvalidArgument("payloads must be a list of bytes or Records (e.g. [b'event'])")
    else:
        result: tuple[bytes | Record, ...] = tuple(cast("Sequence[bytes]", payloads))
        if set(map(type, result)) <= {bytes}:  # the usual case: nothing to convert, nothing to split
            batch = Batch(result, (cast("tuple[bytes, ...]", result), None))
        else:
            fast = _plain_records(result)  # (checks the scheduling headers it has)
            if fast is None:
                fast = Batch(_message(i, message) for i, message in enumerate(result))
                schedule.check(fast)
            batch = fast
    if not batch and not allow_empty:
        raise InvalidArgument("nothing to publish: the list of payloads is empty")
    size = batch_size(batch)
    if size > max_batch_bytes:
        raise BatchTooLarge(f"batch of {size} bytes is over the limit of {max_batch_bytes} bytes; split it")
    return batch, size


def _plain_records(batch: tuple[object, ...]) -> Batch | None:
    """The batch as :func:`_message` makes it, checked column by column in C calls, when it holds bytes and
    Records whose fields have the usual types and sizes (headers, tuples or lists of (str, bytes) pairs); None
    otherwise, for the per-message checks to convert it or say what is wrong. A batch of records only is
    encoded from the columns checked (:func:`~tms_hbase.model.record.pack`), not split again. Records that
    share one headers object (a batch's common headers) have them checked and measured once. Its scheduling
    headers are checked here too (:func:`~tms_hbase.model.schedule.check`, only if a name is one of them)."""
    types = set(map(type, batch))
    if not types <= {bytes, Record}:
        return None
    records = batch if bytes not in types else [m for m in batch if type(m) is Record]
    payloads = list(map(_PAYLOAD, records))
    keys = list(map(_KEY, records))
    headers = list(map(_HEADERS, records))
    counts = list(map(len, headers))
    header_types = set(map(type, headers))
    if (
        not set(map(type, payloads)) <= {bytes}
        or not set(map(type, keys)) <= {bytes, type(None)}
        or max(map(len, filter(None, keys)), default=0) > record.MAX_KEY_BYTES
        or not header_types <= {tuple, list}
        or max(counts, default=0) > record.MAX_HEADERS
    ):
        return None
    shared = len(headers) > 1 and all(map(is_, headers, itertools.repeat(headers[0])))  # (equal: not enough)
    columns = _header_columns(headers[:1] if shared else headers)
    if columns is None:
        return None
    names, values, sizes, blob = columns
    if shared:  # one headers object: its columns, once per record
        repeats = len(headers)
        values, sizes, blob = values * repeats, sizes * repeats, blob * repeats
    if names and not schedule.NAMES.isdisjoint(names):
        schedule.check(batch)  # type: ignore[arg-type]
    if list in header_types or (None in keys and not min(counts)):
        return Batch(map(_as_checked, batch))
    if bytes in types:
        return Batch(batch)  # type: ignore[arg-type]
    extras = record.Extras(zip(keys, headers, strict=True), record.pack(keys, counts, sizes, blob, values))
    return Batch(batch, (tuple(payloads), extras))  # type: ignore[arg-type]


def _header_columns(
    headers: list[Sequence[object]],
) -> tuple[tuple[str, ...], tuple[bytes, ...], list[int], bytes] | None:
    """The pairs of ``headers`` (each a tuple or list of at most :data:`~.record.MAX_HEADERS`) as columns: their
    names, values, names' UTF-8 sizes and the names end to end; None unless every pair is a (str, bytes) tuple
    with a name of 1 to 256 UTF-8 bytes, and all of them together within one message's header budget (a batch
    past it is looked at message by message)."""
    pairs = list(itertools.chain.from_iterable(headers))
    if not pairs:
        return (), (), [], b""
    if set(map(type, pairs)) != {tuple}:
        return None
    try:
        names, values = zip(*pairs, strict=True)  # (ValueError: a pair that is not two items)
    except ValueError:
        return None
    if set(map(type, names)) != {str} or set(map(type, values)) != {bytes}:
        return None
    text = "".join(names)
    if text.isascii():  # the usual case: a name's length in characters is its length in bytes
        sizes, blob = list(map(len, names)), text.encode()
    else:
        try:
            encoded = list(map(str.encode, names))
        except UnicodeEncodeError:
            return None
        sizes, blob = list(map(len, encoded)), b"".join(encoded)
    if min(sizes) == 0 or max(sizes) > record.MAX_HEADER_NAME_BYTES:
        return None
    if len(blob) + sum(map(len, values)) > record.MAX_HEADERS_BYTES:  # all messages' together: look closer
        return None
    return names, values, sizes, blob


def _as_checked(message: object) -> bytes | Record:
    """A message of a batch :func:`_plain_records` accepted as :func:`_message` makes it: a record with neither
    key nor headers is its payload, and its headers are a tuple."""
    if not isinstance(message, Record):
        return message  # type: ignore[return-value]
    if message.key is None and not message.headers:
        return message.payload
    return message if type(message.headers) is tuple else Record(message.payload, message.key, tuple(message.headers))


def _message(i: int, message: object) -> bytes | Record:
    """Message ``i`` of a batch as bytes or a checked Record with bytes fields and a tuple of headers."""
    if isinstance(message, Record):
        payload = _bytes(f"payload {i}", message.payload)
        key = None if message.key is None else _bytes(f"key of message {i}", message.key)
        headers = _headers(i, message.headers)
        if key is not None and len(key) > record.MAX_KEY_BYTES:
            raise InvalidArgument(f"key of message {i} is {len(key)} bytes, over the limit of {record.MAX_KEY_BYTES}")
        return payload if key is None and not headers else Record(payload, key, headers)
    return _bytes(f"payload {i}", message)


def _bytes(what: str, value: object) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"{what} is {type(value).__name__}, not bytes")
    return bytes(value)


def _headers(i: int, headers: object) -> record.Headers:
    """The headers of message ``i`` as a tuple of (str, bytes), within the limits of :mod:`.record`."""
    if isinstance(headers, (str, bytes, dict)) or not isinstance(headers, Sequence):
        raise InvalidArgument(f"headers of message {i} must be a list of (name, value) pairs")
    if len(headers) > record.MAX_HEADERS:
        raise InvalidArgument(f"message {i} has {len(headers)} headers, over the limit of {record.MAX_HEADERS}")
    checked, total = [], 0
    for pair in headers:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InvalidArgument(f"a header of message {i} is {pair!r}, not a (name, value) pair")
        name, value = pair
        if not isinstance(name, str):
            raise InvalidArgument(f"a header name of message {i} is {type(name).__name__}, not str")
        try:
            size = len(name.encode())
        except UnicodeEncodeError:
            raise InvalidArgument(f"header name {name!r} of message {i} is not valid Unicode") from None
        if not 0 < size <= record.MAX_HEADER_NAME_BYTES:
            raise InvalidArgument(
                f"header name {name[:40]!r} of message {i} must be 1 to {record.MAX_HEADER_NAME_BYTES} UTF-8 bytes"
            )
        value = _bytes(f"header {name!r} of message {i}", value)
        total += size + len(value)
        checked.append((name, value))
    if total > record.MAX_HEADERS_BYTES:
        raise InvalidArgument(
            f"headers of message {i} take {total} bytes, over the limit of {record.MAX_HEADERS_BYTES}"
        )
    return tuple(checked)
