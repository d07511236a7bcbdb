"""Keys and headers in the stored format: a batch row and a stored payload's extra section round-trip, a plain
batch is stored as before, a corrupt section is CorruptData, and the checks refuse what the limits refuse."""

from __future__ import annotations

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
