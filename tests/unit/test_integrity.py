"""Classifying raw rows: sound, or corrupt with where they sit and what is wrong."""

from __future__ import annotations

import pytest

from tms_hbase import TopicId
from tms_hbase.model.integrity import check_message_row, check_metadata_row, check_payload_row
from tms_hbase.model.rows import COUNTER_COLUMN, MESSAGE_COLUMN, PAYLOAD_COLUMN, BatchRow, message_key, payload_key
from tms_hbase.model.rows import pointer_prefix as counter_key

T = TopicId("ns", "t")
KEY = message_key(T, 3, 7)
ROW = BatchRow(1_700_000_000_000, b"w" * 16, 1, (b"one", b"two"), tx_pointer=42).encode()


def test_a_sound_message_row_carries_its_header() -> None:
    check = check_message_row(KEY, {MESSAGE_COLUMN: ROW})
    assert check.ok and (check.topic, check.generation, check.position) == (T, 3, 7)
    assert check.header is not None and check.header.tx_pointer == 42 and check.header.has_payloads
    assert check.where() == "topic ns:t generation 3 position 7"


@pytest.mark.parametrize(
    "cell, reason",
    [
        (b"", "truncated message row"),
        (ROW[:20], "truncated message row"),  # inside the header
        (ROW[:-2], "trailing or missing bytes"),  # inside the last payload
        (ROW + b"\x00", "trailing or missing bytes"),
        (b"\x09" + ROW[1:], "unknown format version 9"),
    ],
)
def test_message_cells_that_do_not_decode_are_corrupt(cell: bytes, reason: str) -> None:
    check = check_message_row(KEY, {MESSAGE_COLUMN: cell})
    assert not check.ok and check.header is None and reason in (check.reason or "")
    assert (check.topic, check.generation, check.position) == (T, 3, 7)
    assert check.as_dict() == {
        "table": "messages",
        "key": KEY.hex(),
        "topic": "ns:t",
        "generation": 3,
        "position": 7,
        "reason": check.reason,
    }


def test_a_message_row_without_its_cell_or_with_a_foreign_key_is_corrupt() -> None:
    missing = check_message_row(KEY, {b"d:x": b"?"})
    assert not missing.ok and missing.reason == "no d:m column (has ['d:x'])" and missing.position == 7
    for key in (b"junk", KEY + b"\x00", KEY[:-1], b"bad name!:t:" + KEY[len(T.key) :]):
        foreign = check_message_row(key, {MESSAGE_COLUMN: ROW})
        assert not foreign.ok and foreign.topic is None and foreign.where() == f"row 0x{key.hex()}"


def test_payload_rows_are_checked_by_shape() -> None:
    assert check_payload_row(payload_key(T, 2, 42, 1), {PAYLOAD_COLUMN: b""}).ok  # an empty payload is one
    counter = check_payload_row(counter_key(T, 2, 42), {COUNTER_COLUMN: b"\0" * 8})
    assert counter.ok and (counter.topic, counter.generation) == (T, 2)
    assert check_payload_row(counter_key(T, 2, 42), {PAYLOAD_COLUMN: b"x"}).reason == "no d:c column"
    assert not check_payload_row(b"junk", {PAYLOAD_COLUMN: b"x"}).ok
    assert not check_payload_row(payload_key(T, 2, 42, 1) + b"\0", {PAYLOAD_COLUMN: b"x"}).ok


def test_metadata_rows() -> None:
    good = check_metadata_row(T.key, b'{"generation":"2","ttl":"60"}')
    assert good.ok and good.metadata is not None and good.metadata.ttl == 60 and good.generation == 2
    for value, reason in [
        (b"{not json", "corrupt metadata row for topic ns:t"),
        (b'{"ttl":"60"}', "corrupt metadata row for topic ns:t"),
        (b'{"generation":"x","ttl":"60"}', "corrupt metadata row for topic ns:t"),
        (None, "no properties cell"),
    ]:
        check = check_metadata_row(T.key, value)
        assert not check.ok and check.topic == T and reason in (check.reason or "")
    for key in (b"ns:t", b"ns:t:x", b"\xff:t:", b"a:b:c:"):
        assert check_metadata_row(key, b"{}").topic is None
