"""TransactionCodec: byte-identical to Tephra's (Thrift binary protocol of TTransaction), strict decoding."""

from __future__ import annotations

import contextlib
import random
import struct

import pytest
from thriftpy2.protocol import TCompactProtocolFactory
from thriftpy2.utils import deserialize, serialize

from tms_hbase.errors import InvalidArgument
from tms_hbase.tx import ALL_VISIBLE_LATEST, Transaction, TransactionCodec, TransactionType, VisibilityLevel
from tms_hbase.tx.codec import IDL_PATH, load_tephra_thrift

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)

# --- the binary protocol written out by hand, independently of thriftpy2 ---------------------------------------
I32, I64, STRING, STRUCT, MAP, LIST = 8, 10, 11, 12, 13, 15
STOP = b"\x00"


def i64(field_id: int, value: int) -> bytes:
    """Field header (type byte, big-endian i16 id) then the big-endian i64."""
    return struct.pack(">bhq", I64, field_id, value)


def i32(field_id: int, value: int) -> bytes:
    """Field header then a big-endian i32 (how enums travel)."""
    return struct.pack(">bhi", I32, field_id, value)


def i64_list(field_id: int, values: list[int]) -> bytes:
    """Field header, list header (element type i64, i32 size), then the elements."""
    return struct.pack(">bhbi", LIST, field_id, I64, len(values)) + b"".join(struct.pack(">q", v) for v in values)


def expected_bytes(tx: Transaction) -> bytes:
    """What Java's TTransaction.write emits for Tephra's wrap(tx): all nine fields in id order, then stop."""
    return b"".join(
        (
            i64(1, tx.tx_id),
            i64(2, tx.read_pointer),
            i64_list(3, list(tx.invalids)),
            i64_list(4, list(tx.in_progress)),
            i64(5, tx.first_short_in_progress),
            i32(6, {TransactionType.SHORT: 1, TransactionType.LONG: 2}[tx.type]),
            i64(7, tx.write_pointer),
            i64_list(8, list(tx.checkpoint_write_pointers)),
            i32(9, {"SNAPSHOT": 1, "SNAPSHOT_EXCLUDE_CURRENT": 2, "SNAPSHOT_ALL": 3}[tx.visibility_level.name]),
            STOP,
        )
    )


def base(**kwargs: object) -> Transaction:
    """A short transaction 20 with read pointer 10, invalid 4 and 7, 5 and 15 in progress."""
    fields: dict[str, object] = {
        "read_pointer": 10,
        "tx_id": 20,
        "invalids": [7, 4],
        "in_progress": [15, 5],
        "first_short_in_progress": 5,
    }
    fields.update(kwargs)
    return Transaction(**fields)  # type: ignore[arg-type]


TRANSACTIONS = {
    "empty lists": Transaction(10, 11, (), (), LONG_MAX),
    "short": base(),
    "long": base(type=TransactionType.LONG, first_short_in_progress=LONG_MAX),
    "checkpointed": base().checkpoint(22).checkpoint(25),
    "exclude current": base().checkpoint(22).with_visibility(VisibilityLevel.SNAPSHOT_EXCLUDE_CURRENT),
    "snapshot all": base().with_visibility(VisibilityLevel.SNAPSHOT_ALL),
    "extremes": Transaction(LONG_MIN, LONG_MAX, [LONG_MIN, -1, 0], [LONG_MAX], LONG_MAX, write_pointer=-5),
    "all visible latest": ALL_VISIBLE_LATEST,
    "many": Transaction(
        1_700_000_000_000_000_000,
        1_700_000_000_000_500_000,
        range(1_600_000_000_000_000_000, 1_600_000_000_000_000_300),
        range(1_700_000_000_000_000_001, 1_700_000_000_000_000_050),
        1_700_000_000_000_000_001,
    ),
}


def test_literal_bytes_of_one_transaction() -> None:
    tx = base(in_progress=[]).checkpoint(22).checkpoint(25).with_visibility(VisibilityLevel.SNAPSHOT_EXCLUDE_CURRENT)
    expected = bytes.fromhex(
        "0a 0001 0000000000000014"  # 1: transactionId = 20
        "0a 0002 000000000000000a"  # 2: readPointer = 10
        "0f 0003 0a 00000002 0000000000000004 0000000000000007"  # 3: invalids = [4, 7]
        "0f 0004 0a 00000000"  # 4: inProgress = []
        "0a 0005 0000000000000005"  # 5: firstShort = 5
        "08 0006 00000001"  # 6: type = SHORT
        "0a 0007 0000000000000019"  # 7: writePointer = 25
        "0f 0008 0a 00000002 0000000000000016 0000000000000019"  # 8: checkpointWritePointers = [22, 25]
        "08 0009 00000002"  # 9: visibilityLevel = SNAPSHOT_EXCLUDE_CURRENT
        "00"  # stop
    )
    assert TransactionCodec.encode(tx) == expected
    assert TransactionCodec.decode(expected) == tx


@pytest.mark.parametrize("tx", TRANSACTIONS.values(), ids=TRANSACTIONS.keys())
def test_encode_matches_hand_built_bytes(tx: Transaction) -> None:
    assert TransactionCodec.encode(tx) == expected_bytes(tx)


@pytest.mark.parametrize("tx", TRANSACTIONS.values(), ids=TRANSACTIONS.keys())
def test_round_trip(tx: Transaction) -> None:
    decoded = TransactionCodec.decode(TransactionCodec.encode(tx))
    assert decoded == tx
    assert decoded.write_pointer == tx.write_pointer


@pytest.mark.parametrize("tx", TRANSACTIONS.values(), ids=TRANSACTIONS.keys())
def test_thriftpy2_reads_what_we_write(tx: Transaction) -> None:
    thrift = load_tephra_thrift()
    ttx = deserialize(thrift.TTransaction(), TransactionCodec.encode(tx))
    assert (ttx.transactionId, ttx.readPointer, ttx.writePointer) == (tx.tx_id, tx.read_pointer, tx.write_pointer)
    assert ttx.checkpointWritePointers == list(tx.checkpoint_write_pointers)


def test_accepts_bytearray_and_memoryview() -> None:
    data = TransactionCodec.encode(base())
    assert TransactionCodec.decode(bytearray(data)) == TransactionCodec.decode(memoryview(data)) == base()


def test_missing_optional_fields_take_tephra_defaults() -> None:
    tx = TransactionCodec.decode(i64(1, 20) + i64(2, 10) + i64(5, LONG_MAX) + STOP)
    assert (tx.tx_id, tx.read_pointer, tx.first_short_in_progress) == (20, 10, LONG_MAX)
    assert tx.invalids == tx.in_progress == tx.checkpoint_write_pointers == ()
    assert tx.visibility_level is VisibilityLevel.SNAPSHOT
    assert tx.type is TransactionType.LONG  # TransactionConverterUtils: anything but SHORT (even null) is LONG
    assert tx.write_pointer == 20


def test_missing_write_pointer_defaults_to_last_checkpoint() -> None:
    tx = TransactionCodec.decode(i64(1, 20) + i64(2, 10) + i64(5, 5) + i32(6, 1) + i64_list(8, [22, 25]) + STOP)
    assert tx.type is TransactionType.SHORT
    assert tx.write_pointer == 25


def test_unknown_fields_are_skipped_and_order_does_not_matter() -> None:
    unknown = (
        struct.pack(">bhi", STRING, 42, 3)
        + b"abc"
        + struct.pack(">bh", STRUCT, 10)  # a nested struct holding a list and a map
        + i64_list(1, [1, 2])
        + struct.pack(">bhbbi", MAP, 2, I32, STRING, 1)
        + struct.pack(">ii", 7, 2)
        + b"hi"
        + STOP
        + struct.pack(">bhb", 2, 99, 1)  # a bool
    )
    data = i32(9, 3) + unknown + i64(5, 5) + i64_list(3, [7, 4]) + i64(2, 10) + i64(1, 20) + i32(6, 1) + STOP
    tx = TransactionCodec.decode(data)
    assert tx == base(in_progress=[], visibility_level=VisibilityLevel.SNAPSHOT_ALL)


def test_idl_has_the_whole_service() -> None:
    thrift = load_tephra_thrift()
    assert IDL_PATH.name == "tephra.thrift"
    assert set(thrift.TTransactionServer.thrift_services) == {
        "startLong",
        "startShort",
        "startLongClientId",
        "startShortTimeout",
        "startShortClientId",
        "startShortWithClientIdAndTimeOut",
        "startShortWithTimeout",
        "canCommitTx",
        "canCommitOrThrow",
        "commitTx",
        "commitOrThrow",
        "abortTx",
        "invalidateTx",
        "getSnapshot",
        "resetState",
        "status",
        "truncateInvalidTx",
        "truncateInvalidTxBefore",
        "invalidTxSize",
        "checkpoint",
        "pruneNow",
    }
    assert thrift.TTransactionType.LONG == 2 and thrift.TVisibilityLevel.SNAPSHOT_ALL == 3
    conflict = thrift.TTransactionConflictException(transactionId=1, conflictingKey="k", conflictingClient="c")
    assert serialize(conflict) == (
        i64(1, 1) + struct.pack(">bhi", STRING, 2, 1) + b"k" + struct.pack(">bhi", STRING, 3, 1) + b"c" + STOP
    )
    assert load_tephra_thrift() is thrift


VALID = expected_bytes(base().checkpoint(22))


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "truncated"),
        (STOP, "missing field(s) transactionId, readPointer, firstShort"),
        (i64(1, 20) + i64(2, 10) + STOP, "missing field(s) firstShort"),
        (VALID + b"\x00", "1 unexpected bytes"),
        (i32(1, 20) + VALID, "field 1 (transactionId) has type i32, expected i64"),
        (i64(3, 1) + VALID, "field 3 (invalids) has type i64, expected list"),
        (struct.pack(">bhbi", LIST, 4, I32, 1) + b"\0\0\0\1" + VALID, "inProgress is a list of i32"),
        (struct.pack(">bhbi", LIST, 4, I64, -1) + VALID, "negative inProgress list size -1"),
        (struct.pack(">bhbi", LIST, 4, I64, 2**31 - 1) + VALID, "truncated"),
        (VALID[:-8] + i32(9, 4) + STOP, "unknown visibilityLevel value 4"),
        (VALID[:-1] + i32(6, 3) + STOP, "unknown type value 3"),  # the last duplicate wins, as in Java
        (struct.pack(">bh", 99, 50) + VALID, "unknown Thrift type code 99"),
        (struct.pack(">bhi", STRING, 50, -2) + VALID, "negative string size"),
        (struct.pack(">bh", STRUCT, 50) + struct.pack(">bh", STRUCT, 1) * 100, "nested too deeply"),
        (b'{"transactionId": 20, "readPointer": 10}', "malformed TTransaction"),
    ],
)
def test_corrupt_input_raises_invalid_argument(data: bytes, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")):
        TransactionCodec.decode(data)


def test_every_truncation_is_rejected() -> None:
    for end in range(len(VALID)):
        with pytest.raises(InvalidArgument):
            TransactionCodec.decode(VALID[:end])


def test_random_garbage_is_rejected() -> None:
    rng = random.Random(1234)
    for _ in range(2000):
        data = rng.randbytes(rng.randrange(0, 120))
        with pytest.raises(InvalidArgument):
            TransactionCodec.decode(data)


def test_single_byte_corruptions_never_escape_as_raw_exceptions() -> None:
    for position in range(len(VALID)):
        for value in (0x00, 0x0B, 0x0F, 0x7F, 0x80, 0xFF):
            data = VALID[:position] + bytes([value]) + VALID[position + 1 :]
            with contextlib.suppress(InvalidArgument):  # anything else escaping fails the test
                TransactionCodec.decode(data)


def test_compact_protocol_bytes_are_not_a_tephra_transaction() -> None:
    ttx = load_tephra_thrift().TTransaction(
        transactionId=20, readPointer=10, invalids=[], inProgress=[], firstShort=5, type=1
    )
    with pytest.raises(InvalidArgument):
        TransactionCodec.decode(serialize(ttx, TCompactProtocolFactory()))


def test_wrong_argument_types() -> None:
    with pytest.raises(InvalidArgument, match="expected a Transaction"):
        TransactionCodec.encode(b"tx")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="expected bytes"):
        TransactionCodec.decode("0a0001")  # type: ignore[arg-type]


def test_change_keys_travel_as_tephras_string_binary() -> None:
    from tms_hbase.tx.codec import to_bytes_binary, to_string_binary

    assert to_string_binary(b"\x00\xff") == "\\x00\\xFF"
    assert to_string_binary(b"t:r\\1") == "t:r\\x5C1"
    assert to_string_binary(b"row-1_{a}") == "row-1_{a}"
    for key in [b"", b"\x00\xff", "é".encode(), b"t:r\\1", bytes(range(256))]:
        assert to_bytes_binary(to_string_binary(key)) == key
