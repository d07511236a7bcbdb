"""The consumer's pure parts without HBase: running totals in batch rows, the subscription cell, marks,
settling pending marks by a transaction's fate, doorbells on loopback, CLI times."""

from __future__ import annotations

import time

import pytest

from tms_hbase.consume.doorbell import (
    KEY_BYTES,
    RING_ROW_LIMIT,
    Bell,
    Ring,
    parse_address,
    read_ring,
    ring_content,
    ring_key,
    ring_local,
)
from tms_hbase.consume.subscriptions import Record, check_mark, folded, later, mark_before, resolved
from tms_hbase.errors import CorruptData, InvalidArgument
from tms_hbase.isolation.fate import TxFate, fate
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.rows import BatchRow, Totals, peek, with_tx_pointer
from tms_hbase.model.subscription import END, Pending, check_name
from tms_hbase.model.topic import TopicId
from tms_hbase.tx import NO_TX_IN_PROGRESS, Transaction
from tms_hbase_admin.times import iso, parse_time

W = b"w" * 16
T = TopicId("ns", "t")


def test_totals_round_trip_and_survive_a_rollback_flip() -> None:
    row = BatchRow(5, W, 1, (b"ab", b"c"), tx_pointer=9, expires_at=77, totals=Totals(12, 345))
    data = row.encode()
    assert BatchRow.decode(data) == row
    head = peek(data)
    assert (head.totals, head.payload_count, head.tx_pointer, head.expires_at) == (Totals(12, 345), 2, 9, 77)
    assert BatchRow.decode(with_tx_pointer(data, -9)).totals == Totals(12, 345)
    pointer = BatchRow(5, W, 2, (), tx_pointer=4, pointer=True, totals=Totals(3, 0))
    assert peek(pointer.encode()).payload_count == 0 and BatchRow.decode(pointer.encode()) == pointer


def test_rows_without_totals_still_decode() -> None:
    old = BatchRow(5, W, 1, (b"x",)).encode()  # as writers before totals wrote them
    assert peek(old).totals is None and BatchRow.decode(old).totals is None and peek(old).payload_count == 1
    assert Totals(1, 2).plus(3, 4) == Totals(4, 6)


def test_subscription_cell_round_trip_and_corruption() -> None:
    record = Record(b"\x01" * 20, 10, 20, "me", 30, "127.0.0.1:5", Pending(7, 8, b"\x02" * 20))
    assert Record.decode(record.encode()) == record
    assert record.encode() == Record.decode(record.encode()).encode()  # deterministic bytes for CAS
    for junk in (b"", b"[]", b'{"position": 5}', b'{"position":"zz","created_at":1,"updated_at":1}'):
        with pytest.raises(CorruptData, match="corrupt subscription cell"):
            Record.decode(junk)


def test_leases_and_release() -> None:
    record = Record(None, 1, 1, "a", 1_000)
    assert record.held_by_other("b", 999) and not record.held_by_other("a", 999)
    assert not record.held_by_other("b", 1_000)  # expired
    assert record.released() == Record(None, 1, 1)


def test_marks() -> None:
    assert mark_before(3, 5, 2) == bytes(MessageId(3, 5, 1))
    assert mark_before(3, 5, 0) == bytes(MessageId(3, 4, END))
    assert mark_before(3, 1, 0) is None
    a, b = bytes(MessageId(1, 2, 3)), bytes(MessageId(1, 2, END))
    assert later(None, a) == a and later(b, a) == b and later(a, b) == b
    assert check_mark(T, 1, a) == a
    with pytest.raises(InvalidArgument, match="generation 1"):
        check_mark(T, 2, a)
    for bad in ("", "a b", "ns:x", "é", "x" * 256, None):
        with pytest.raises(InvalidArgument):
            check_name(bad)


def test_pending_marks_settle_by_the_transaction_fate() -> None:
    mark, newer = bytes(MessageId(1, 2, 0)), bytes(MessageId(1, 9, 0))
    pending = Pending(100, 100, newer)
    record = Record(mark, 1, 1, pending=pending)
    assert resolved(record, lambda p: TxFate.COMMITTED) == Record(newer, 1, 1)
    assert resolved(record, lambda p: TxFate.INVALID) == Record(mark, 1, 1)
    assert resolved(record, lambda p: TxFate.IN_PROGRESS) == record
    behind = Record(bytes(MessageId(1, 20, 0)), 1, 1, pending=pending)
    assert folded(behind, pending).position == behind.position, "a mark never moves backwards"
    assert folded(record, Pending(1, 1, newer)) == record, "only the pending mark it names"


def test_fate_from_a_snapshot() -> None:
    snapshot = Transaction(50, 60, [30], [40], 40)
    assert fate(snapshot, 20) is TxFate.COMMITTED
    assert fate(snapshot, 30) is TxFate.INVALID
    assert fate(snapshot, 40) is TxFate.IN_PROGRESS
    assert fate(snapshot, 55) is TxFate.IN_PROGRESS  # started after the snapshot's read pointer
    assert fate(Transaction(50, 60, [], [], NO_TX_IN_PROGRESS), 50) is TxFate.COMMITTED


def test_a_bell_rings_from_this_process_and_forgets_old_rings() -> None:
    bell = Bell("prefix", T)
    try:
        assert parse_address(bell.address)[0] == "127.0.0.1"
        assert not bell.wait(0.01)
        assert ring_local("prefix", T) == {bell.address}
        assert bell.wait(5)
        bell.clear()
        assert not bell.wait(0.01)
        assert ring_local("other", T) == set() and ring_local("prefix", TopicId("ns", "u")) == set()
    finally:
        bell.close()
    assert ring_local("prefix", T) == set()


def test_a_ring_carries_a_row_only_under_the_doorbells_key() -> None:
    key, other = b"k" * KEY_BYTES, b"o" * KEY_BYTES
    cell = b"the stored cell"
    carried = ring_content(T, (3, 7), cell, key)
    assert read_ring(carried, T.key, key) == Ring(3, 7, cell)
    assert read_ring(ring_content(T, (3, 7)), T.key, key) == Ring(3, 7, None)  # no key: the place only
    assert ring_content(T, (3, 7), cell) == ring_content(T, (3, 7))
    assert ring_content(T, (3, 7), b"x" * (RING_ROW_LIMIT + 1), key) == ring_content(T, (3, 7))  # too big
    assert read_ring(carried, T.key, other) is None  # another doorbell's key: a plain look, nothing carried
    assert read_ring(carried[:-1], T.key, key) is None  # cut
    changed = bytearray(carried)
    changed[len(T.key) + 3] ^= 1  # another place, the MAC of the old one
    assert read_ring(bytes(changed), T.key, key) is None
    assert read_ring(carried, TopicId("ns", "u").key, key) is None  # another topic's
    assert read_ring(ring_content(T), T.key, key) is None  # a plain ring names no row
    assert ring_key(key.hex()) == key
    assert ring_key(None) is None and ring_key("zz" * KEY_BYTES) is None and ring_key("ab") is None


def test_the_ring_key_is_kept_in_the_cell_until_the_lease_is_released() -> None:
    record = Record(None, 1, 1, owner="o", expires=5, bell="127.0.0.1:9", bell_key="ab" * KEY_BYTES)
    assert Record.decode(record.encode()) == record
    assert record.released().bell_key is None
    assert Record.decode(b'{"position":null,"created_at":1,"updated_at":1}').bell_key is None


def test_doorbell_addresses_and_bad_hosts() -> None:
    assert parse_address("127.0.0.1:80") == ("127.0.0.1", 80)
    assert parse_address("[::1]:80") == ("::1", 80, 0, 0)
    assert parse_address("nonsense") is None and parse_address("h:99999") is None
    with pytest.raises(InvalidArgument, match="cannot open a doorbell"):
        Bell("p", T, "256.1.1.1")


def test_cli_times() -> None:
    assert parse_time("1700000000000") == 1_700_000_000_000
    assert parse_time("2024-05-01T12:00:00Z") == parse_time("2024-05-01T12:00:00") == 1_714_564_800_000
    assert parse_time("2024-05-01T14:00:00+02:00") == 1_714_564_800_000
    assert iso(1_714_564_800_123) == "2024-05-01T12:00:00.123Z" and iso(None) is None
    with pytest.raises(InvalidArgument, match="bad time"):
        parse_time("tomorrow")
    assert abs(parse_time(iso(int(time.time() * 1000))) - time.time() * 1000) < 5_000
