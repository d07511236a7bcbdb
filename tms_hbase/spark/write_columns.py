"""Which columns of a DataFrame a write stores, checked once on the driver, and its rows as messages.

``payload`` (binary or string) is required; ``key`` (binary or string, null: no key) and ``headers``
(``array<struct<name: string, value: binary or string>>``, null or empty: none) are optional, in the
shape the read schema and Kafka's Spark source have. Strings are stored as UTF-8; other columns are ignored.
A row with neither key nor headers is stored as a plain payload, byte for byte as before keys existed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.types import ArrayType, BinaryType, DataType, StringType, StructType

from tms_hbase.errors import InvalidArgument
from tms_hbase.model.record import Record

PAYLOAD, KEY, HEADERS = "payload", "key", "headers"
HEADERS_SHAPE = "array<struct<name: string, value: binary or string>>"
_BYTES = (BinaryType, StringType)


@dataclass(frozen=True)
class WriteColumns:
    """The places of the ``payload``, ``key`` and ``headers`` columns in the written schema (None: absent)."""

    payload: int
    key: int | None = None
    headers: int | None = None

    @classmethod
    def of(cls, schema: StructType) -> WriteColumns:
        """The columns of ``schema`` a write stores; InvalidArgument if one has the wrong type or payload is missing."""
        places = {field.name: i for i, field in enumerate(schema.fields)}
        if PAYLOAD not in places:
            raise InvalidArgument(
                f"format 'tms' writes the column 'payload' (binary or string); the data has {schema.names}"
            )
        for name in (PAYLOAD, KEY):
            if name in places and not isinstance(schema.fields[places[name]].dataType, _BYTES):
                found = schema.fields[places[name]].dataType.simpleString()
                raise InvalidArgument(f"column '{name}' must be binary or string, not {found}")
        if HEADERS in places and not _headers_type(schema.fields[places[HEADERS]].dataType):
            found = schema.fields[places[HEADERS]].dataType.simpleString()
            raise InvalidArgument(f"column 'headers' must be {HEADERS_SHAPE}, not {found}")
        return cls(places[PAYLOAD], places.get(KEY), places.get(HEADERS))


def _headers_type(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = {field.name: field.dataType for field in data_type.elementType.fields}
    return (
        set(fields) == {"name", "value"}
        and isinstance(fields["name"], StringType)
        and isinstance(fields["value"], _BYTES)
    )


def messages(batches: Iterator[pa.RecordBatch], columns: WriteColumns) -> Iterator[bytes | Record]:
    """The rows of ``batches`` as messages to store: a payload, or a Record when the row has a key or headers.
    A null payload, header or header name or value is an InvalidArgument (the client checks the rest)."""
    for batch in batches:
        payloads = batch.column(columns.payload).to_pylist()
        count = len(payloads)
        keys = [None] * count if columns.key is None else batch.column(columns.key).to_pylist()
        headers = [None] * count if columns.headers is None else batch.column(columns.headers).to_pylist()
        for payload, key, pairs in zip(payloads, keys, headers, strict=True):
            if payload is None:
                raise InvalidArgument("a payload is null: every row written to a topic needs a payload")
            payload = _bytes(payload)
            if key is None and not pairs:
                yield payload
            else:
                yield Record(payload, None if key is None else _bytes(key), _pairs(pairs or ()))


def _pairs(headers: list[dict | None] | tuple[()]) -> tuple[tuple[str, bytes], ...]:
    if None in headers:
        raise InvalidArgument("a header is null: each element of 'headers' needs a name and a value")
    pairs = []
    for header in headers:
        name, value = header["name"], header["value"]  # type: ignore[index]
        if name is None or value is None:
            raise InvalidArgument(f"header {name!r} has a null {'name' if name is None else 'value'}")
        pairs.append((name, _bytes(value)))
    return tuple(pairs)


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value
