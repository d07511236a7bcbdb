"""Keys and headers in the stored format: a batch row and a stored payload's extra section round-trip, a plain
batch is stored as before, a corrupt section is CorruptData, and the checks refuse what the limits refuse."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tms_hbase import CorruptData, InvalidArgument, Record
from tms_hbase.model import record
from tms_hbase.model.checks import _message, _plain_records, validate_payloads
from tms_hbase.model.rows import F_EXTRA, BatchRow, batch_size, check_cell

HEADERS = (("a", b"1"), ("a", b""), ("ü", b"\x00"))


def test_a_row_with_keys_and_headers_round_trips() -> None:
    payloads, extras = record.split([b"p", Record(b"q", key=b"k", headers=HEADERS), Record(b"", key=b"")])
    assert extras == (record.NONE, (b"k", HEADERS), (b"", ()))
    row = BatchRow(1, bytes(16), 2, payloads, extras=extras)
    cell = row.encode()
    assert cell[1] & F_EXTRA
    assert BatchRow.decode(cell) == row
    check_cell(cell)
    viewed = BatchRow.decode(cell, views=True)
    assert [bytes(p) for p in viewed.payloads] == [b"p", b"q", b""] and viewed.extras == extras


def test_mixed_batches_round_trip_column_by_column() -> None:
    mixed = [
        b"a",
        Record(b"b", key=b"k"),
        Record(b"c", headers=[("\u00e9t\u00e9", b"1"), ("x", b"")]),
        Record(b"", key=b"", headers=[("a", b"2")]),
    ]
    payloads, extras = record.split(validate_payloads(mixed, 10**6, allow_empty=False))
    cell = BatchRow(1, bytes(16), 2, payloads, extras=extras).encode()
    assert BatchRow.decode(cell).extras == extras
    assert BatchRow.decode(cell, views=True).extras == extras
    assert extras[2] == (None, (("\u00e9t\u00e9", b"1"), ("x", b"")))


def test_a_plain_batch_is_stored_as_before() -> None:
    plain = BatchRow(1, bytes(16), 2, (b"a", b"bc"))
    assert record.split(validate_payloads([b"a", Record(b"bc")], 100, allow_empty=False)) == ((b"a", b"bc"), None)
    assert BatchRow(1, bytes(16), 2, (b"a", b"bc"), extras=None).encode() == plain.encode()
    assert not plain.encode()[1] & F_EXTRA
    assert batch_size([b"a", b"bc"]) == 11


def test_a_truncated_extra_section_is_corrupt() -> None:
    cell = BatchRow(1, bytes(16), 2, (b"q",), extras=((b"key", HEADERS),)).encode()
    for cut in (1, 5, len(cell) - 30):
        with pytest.raises(CorruptData):
            BatchRow.decode(cell[:-cut])


def test_keys_and_headers_count_in_the_batch_limit() -> None:
    big = Record(b"x", key=b"k" * 100, headers=[("h", b"v" * 100)])
    assert batch_size([big]) == 1 + 4 + record.extra_size((big.key, tuple(big.headers)))
    with pytest.raises(InvalidArgument, match="over the limit"):
        validate_payloads([big], 200, allow_empty=False)


@pytest.mark.parametrize(
    "bad",
    [
        Record(b"x", key="s"),  # type: ignore[arg-type]
        Record(b"x", key=b"k" * (record.MAX_KEY_BYTES + 1)),
        Record(b"x", headers=[(1, b"v")]),  # type: ignore[list-item]
        Record(b"x", headers=[("\ud800", b"v")]),
        Record(b"x", headers=[("n", b"v")] * (record.MAX_HEADERS + 1)),
        Record(b"x", headers="n=v"),  # type: ignore[arg-type]
    ],
)
def test_bad_records_are_invalid(bad: Record) -> None:
    with pytest.raises(InvalidArgument):
        validate_payloads([bad], 10**9, allow_empty=False)


_names = st.one_of(st.text(min_size=0, max_size=300), st.binary(max_size=3), st.none())
_values = st.one_of(st.binary(max_size=40), st.text(max_size=3), st.none(), st.just(b"x" * 40_000))
_headers = st.one_of(
    st.lists(st.one_of(st.tuples(_names, _values), st.lists(_values, max_size=3)), max_size=70).map(tuple),
    st.lists(st.tuples(st.one_of(st.text(max_size=8), st.just("n" * 257)), st.binary(max_size=8)), max_size=4).map(
        tuple
    ),
    st.lists(st.tuples(st.text(min_size=1, max_size=8), st.binary(max_size=8)), max_size=4),
    st.just("a=b"),
)
_keys = st.one_of(
    st.none(), st.binary(max_size=20), st.just(b"k" * 4097), st.text(max_size=3), st.just(bytearray(b"k"))
)
_messages = st.one_of(
    st.binary(max_size=8),
    st.builds(Record, st.one_of(st.binary(max_size=8), st.text(max_size=2)), _keys, _headers),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_messages, min_size=1, max_size=6))
def test_the_batch_checks_and_the_per_message_checks_agree(batch: list[bytes | Record]) -> None:
    """The column-by-column check of a batch of records accepts only what the per-message checks accept, and
    makes the same messages of it."""

    def one_by_one() -> tuple[bytes | Record, ...] | type[InvalidArgument]:
        try:
            return tuple(_message(i, m) for i, m in enumerate(batch))
        except InvalidArgument:
            return InvalidArgument

    fast = _plain_records(tuple(batch))
    if fast is not None:
        assert fast == one_by_one()
    try:
        checked: tuple[bytes | Record, ...] | type[InvalidArgument] = validate_payloads(batch, 2**40, allow_empty=False)
    except InvalidArgument:
        checked = InvalidArgument
    assert checked == one_by_one()


@settings(max_examples=300, deadline=None)
@given(_headers, st.lists(st.one_of(st.binary(max_size=8), _keys), min_size=2, max_size=5))
def test_records_sharing_one_headers_object_are_checked_as_if_each_had_its_own(
    headers: object, keys: list[object]
) -> None:
    """A batch whose records share one headers object (checked and measured once) is accepted, converted and
    encoded as the same batch with a copy of the headers each, and refused as that one is."""

    def checked(batch: list[Record]) -> tuple[bytes | Record, ...] | bytes | type[InvalidArgument]:
        try:
            result = validate_payloads(batch, 2**40, allow_empty=False)
        except InvalidArgument:
            return InvalidArgument
        extras = record.split(result)[1]
        return result if extras is None else (result, record.encode_all(extras))  # type: ignore[return-value]

    def copy() -> object:  # (tuple() of a tuple is the same object)
        return [*headers] if isinstance(headers, list) else tuple([*headers]) if isinstance(headers, tuple) else headers

    shared = [Record(b"p%d" % i, key, headers) for i, key in enumerate(keys)]  # type: ignore[arg-type]
    own = [Record(b"p%d" % i, key, copy()) for i, key in enumerate(keys)]  # type: ignore[arg-type]
    assert checked(shared) == checked(own)


def test_shared_scheduling_headers_are_checked() -> None:
    bad = (("tms-deliver-at", b"+5"),)
    with pytest.raises(InvalidArgument, match="message 0"):
        validate_payloads([Record(b"a", headers=bad), Record(b"b", headers=bad)], 1 << 20, allow_empty=False)


def _reference_decode(data: bytes, offset: int, count: int) -> tuple[tuple[record.Extra, ...], int]:
    """The extra sections as docs/tables.md lays them out, read one field at a time (what the column-by-column
    decoder must agree with)."""

    def take(fmt: str) -> tuple:
        nonlocal offset
        values = struct.unpack_from(fmt, data, offset)
        offset += struct.calcsize(fmt)
        return values

    def cut(size: int) -> bytes:
        nonlocal offset
        if offset + size > len(data):
            raise struct.error("truncated")
        offset += size
        return data[offset - size : offset]

    try:
        key_sizes = take(f">{count}i")
        keys = [None if size < 0 else cut(size) for size in key_sizes]
        counts = take(f">{count}H")
        total = sum(counts)
        name_sizes, value_sizes = take(f">{total}H"), take(f">{total}I")
        names = [cut(size).decode() for size in name_sizes]
        values = [cut(size) for size in value_sizes]
    except (struct.error, UnicodeDecodeError):
        raise CorruptData("reference") from None
    pairs = iter(zip(names, values, strict=True))
    return tuple((key, tuple(itertools.islice(pairs, n))) for key, n in zip(keys, counts, strict=True)), offset


def _decoded(data: bytes, count: int) -> object:
    try:
        return record.decode_all(data, 0, count)
    except CorruptData:
        return CorruptData


def _reference(data: bytes, count: int) -> object:
    try:
        return _reference_decode(data, 0, count)
    except CorruptData:
        return CorruptData


_key = st.one_of(st.none(), st.binary(max_size=5))
_pairs = st.lists(
    st.tuples(st.sampled_from(["a", "ab", "b", "bb", "é", "traceparent"]), st.binary(max_size=4)), max_size=3
)
_extra = st.tuples(_key, _pairs.map(tuple))
_shaped = st.builds(  # every message of the same shape: the keys, names and values repeat one pattern of sizes
    lambda n, key, headers: ((key, headers),) * n, st.integers(1, 5), _key, _pairs.map(tuple)
)


@pytest.mark.parametrize(
    "extras",
    [
        ((b"k1", HEADERS),) * 3,  # one shape: each column one repeated pattern
        ((None, HEADERS),) * 3 + ((b"", (("a", b"1"), ("a", b""), ("ü", b"\x01"))),),  # the same but the last value
        ((b"k", (("a", b"1"),)), (b"k", (("a", b"2"),)), (b"k", (("a", b"1"),))),  # the second differs, not the last
        ((None, (("a", b"1"), ("bb", b"2"))), (None, (("ab", b"3"), ("b", b"4")))),  # same names' bytes, cut apart
        ((b"k", (("a", b"1"), ("b", b"2"))), (b"l", (("b", b"1"), ("a", b"2")))),  # same sizes, other names
        ((b"k", (("a", b"1"),)), (None, ()), (b"", (("a", b""), ("a", b"")))),  # no pattern
    ],
)
def test_each_way_of_cutting_the_columns_reads_what_was_written(extras: tuple[record.Extra, ...]) -> None:
    section = record.encode_all(extras)
    assert record.decode_all(section, 0, len(extras)) == (extras, len(section))
    assert record.decode_all(memoryview(section), 0, len(extras)) == (extras, len(section))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(_extra, max_size=6).map(tuple), _shaped), st.data())
def test_the_column_decoder_reads_what_the_reference_reads(
    extras: tuple[record.Extra, ...], data: st.DataObject
) -> None:
    """Round trip, and on any cut, flipped or extended section the fast decoder and a field-by-field reader give
    the same extras (and offset), or both CorruptData."""
    section = record.encode_all(extras)
    assert record.decode_all(section, 0, len(extras)) == (extras, len(section))
    assert record.decode_all(memoryview(b"xx" + section), 2, len(extras)) == (extras, len(section) + 2)
    spoiled = data.draw(
        st.one_of(
            st.integers(0, len(section)).map(lambda cut: section[:cut]),
            st.tuples(st.integers(0, max(len(section) - 1, 0)), st.integers(0, 255)).map(
                lambda at: section[: at[0]] + bytes([at[1]]) + section[at[0] + 1 :]
            ),
            st.binary(max_size=4).map(lambda tail: section + tail),
        )
    )
    assert _decoded(spoiled, len(extras)) == _reference(spoiled, len(extras))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=4), st.builds(Record, st.binary(max_size=4), _key, _pairs)), max_size=6))
def test_a_checked_batch_is_split_encoded_and_counted_as_any_batch(batch: list[bytes | Record]) -> None:
    """What the checks work out once (split, stored section, message bytes) is what the generic split and
    encoder give for the same messages."""
    checked = validate_payloads(batch, 2**40, allow_empty=True)
    plain, extras = record.split(tuple(checked))  # a plain tuple: split and encoded again
    assert record.split(checked) == (plain, extras)
    if extras is not None:
        assert checked.extras is not None and checked.extras.section == record.encode_all(tuple(extras))
    sizes = record.counted_sizes(plain, extras)
    assert record.message_bytes(checked) == record.message_bytes(list(checked)) == sum(sizes)
    assert batch_size(checked) == batch_size(list(checked)) == sum(sizes) + 4 * len(checked)
    assert validate_payloads(checked, 2**40, allow_empty=True) is checked
