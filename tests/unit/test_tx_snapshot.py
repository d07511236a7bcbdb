"""Tephra snapshot format v4: version prefix, zig-zag varints, Avro-style blocks; strict decoding."""

from __future__ import annotations

import contextlib
import random

import pytest

from tms_hbase.errors import CorruptData, InvalidArgument
from tms_hbase.tx import (
    InProgressTx,
    InProgressType,
    TransactionSnapshot,
    TransactionType,
    decode_snapshot,
    encode_snapshot,
)

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
SHORT, LONG, CHECKPOINT = InProgressType


# --- Tephra's BinaryEncoder written out independently -------------------------------------------------------------
def zigzag(n: int) -> int:
    """Avro zig-zag: 0, -1, 1, -2, 2 ... map to 0, 1, 2, 3, 4 ..."""
    return 2 * n if n >= 0 else -2 * n - 1


def varint(n: int) -> bytes:
    """Zig-zag, then 7 bits per byte, least significant group first, high bit set on all but the last byte."""
    u = zigzag(n)
    groups = []
    while True:
        groups.append(u & 0x7F)
        u >>= 7
        if not u:
            break
    return bytes([g | 0x80 for g in groups[:-1]] + [groups[-1]])


def block(items: list[bytes]) -> bytes:
    """A Tephra list/map: count and items when not empty, then the 0 terminator."""
    return (varint(len(items)) + b"".join(items) if items else b"") + varint(0)


def test_varint_helper_matches_known_values() -> None:
    assert [varint(n).hex() for n in (0, -1, 1, -2, 2, 63, -64, 64, 4)] == [
        "00",
        "01",
        "02",
        "03",
        "04",
        "7e",
        "7f",
        "8001",
        "08",
    ]
    assert varint(LONG_MAX) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert varint(LONG_MIN) == b"\xff" * 9 + b"\x01"


def test_empty_snapshot_literal_bytes() -> None:
    snapshot = TransactionSnapshot(1, 0, 0)
    # version 4, timestamp 1, read 0, write 0, then four empty blocks (invalid, in progress, committing, committed)
    assert encode_snapshot(snapshot) == bytes.fromhex("08 02 00 00 00 00 00 00")
    assert decode_snapshot(bytes.fromhex("08 02 00 00 00 00 00 00")) == snapshot
    extremes = TransactionSnapshot(LONG_MAX, LONG_MIN, -1)
    assert encode_snapshot(extremes) == varint(4) + varint(LONG_MAX) + varint(LONG_MIN) + varint(-1) + bytes(4)


SMALL = TransactionSnapshot(
    timestamp=1_000,
    read_pointer=5,
    write_pointer=9,
    invalid=(3, -2),
    in_progress={
        8: InProgressTx(2_000, 4, CHECKPOINT),
        6: InProgressTx(90_000, 4, LONG, (8,)),
        7: InProgressTx(1_500, 5, SHORT),
    },
    committing_change_sets={7: frozenset({b"ab"})},
    committed_change_sets={5: frozenset({b"yz", b"x"}), 4: frozenset()},
)


def test_small_snapshot_matches_hand_built_bytes() -> None:
    expected = b"".join(
        (
            varint(4),  # version, written by SnapshotCodecProvider before the body
            varint(1_000),  # timestamp
            varint(5),  # read pointer
            varint(9),  # write pointer
            block([varint(-2), varint(3)]),  # invalid, sorted
            block(  # in progress, by tx id: id, expiration, visibility upper bound, type ordinal, checkpoints
                [
                    varint(6) + varint(90_000) + varint(4) + varint(1) + block([varint(8)]),
                    varint(7) + varint(1_500) + varint(5) + varint(0) + block([]),
                    varint(8) + varint(2_000) + varint(4) + varint(2) + block([]),
                ]
            ),
            block([varint(7) + block([varint(2) + b"ab"])]),  # committing: pointer, then length-prefixed keys
            block(
                [
                    varint(4) + block([]),
                    varint(5) + block([varint(1) + b"x", varint(2) + b"yz"]),
                ]
            ),
        )
    )
    assert encode_snapshot(SMALL) == expected
    assert expected.startswith(bytes.fromhex("08 d0 0f 0a 12 04 03 06 00"))
    assert decode_snapshot(expected) == SMALL


ROUND_TRIPS = {
    "empty": TransactionSnapshot(0, 0, 0),
    "small": SMALL,
    "extremes": TransactionSnapshot(
        LONG_MAX,
        LONG_MIN,
        LONG_MAX,
        (LONG_MIN, -1, 0, LONG_MAX),
        {LONG_MIN: InProgressTx(LONG_MAX, LONG_MIN, LONG, (LONG_MIN, LONG_MAX))},
        {LONG_MAX: frozenset({b"", bytes(range(256))})},
        {LONG_MIN: frozenset({b"\x00" * 1000})},
    ),
    "large": TransactionSnapshot(
        1_700_000_000_000,
        1_700_000_000_000_000_000,
        1_700_000_000_000_999_999,
        range(1_600_000_000_000_000_000, 1_600_000_000_000_000_300),
        {
            1_700_000_000_000_000_000 + i: InProgressTx(
                1_700_000_030_000 + i, 1_699_999_999_999_999_999, InProgressType(i % 3), tuple(range(i % 4))
            )
            for i in range(200)
        },
        {i: frozenset({i.to_bytes(8, "big"), b"row%d" % i}) for i in range(150)},
        {1_700_000_000_000_000_000 + i: frozenset({b"k%d" % j for j in range(i)}) for i in range(140)},
    ),
}


@pytest.mark.parametrize("snapshot", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_round_trip(snapshot: TransactionSnapshot) -> None:
    decoded = decode_snapshot(encode_snapshot(snapshot))
    assert decoded == snapshot
    assert decoded.timestamp == snapshot.timestamp
    assert list(decoded.in_progress) == sorted(snapshot.in_progress)


def test_in_progress_types_and_checkpoints_survive() -> None:
    decoded = decode_snapshot(encode_snapshot(SMALL))
    assert decoded.in_progress[6] == InProgressTx(90_000, 4, LONG, (8,))
    assert decoded.in_progress[6].is_long_running
    assert decoded.in_progress[8].type is CHECKPOINT
    assert decoded.in_progress[7].checkpoint_write_pointers == ()


def test_encoding_does_not_depend_on_insertion_order() -> None:
    reordered = TransactionSnapshot(
        1_000,
        5,
        9,
        [-2, 3],
        dict(reversed(list(SMALL.in_progress.items()))),
        SMALL.committing_change_sets,
        {4: [], 5: [b"x", b"yz"]},  # type: ignore[dict-item]
    )
    assert reordered == SMALL
    assert encode_snapshot(reordered) == encode_snapshot(SMALL)


def test_version_2_and_3_decode_without_checkpoint_lists() -> None:
    body = (
        varint(1_000)
        + varint(5)
        + varint(9)
        + block([varint(3)])
        + block([varint(7) + varint(1_500) + varint(5) + varint(0), varint(6) + varint(90_000) + varint(4) + varint(1)])
        + block([])
        + block([varint(5) + block([varint(1) + b"x"])])
    )
    expected = TransactionSnapshot(
        1_000,
        5,
        9,
        (3,),
        {6: InProgressTx(90_000, 4, LONG), 7: InProgressTx(1_500, 5, SHORT)},
        {},
        {5: frozenset({b"x"})},
    )
    assert decode_snapshot(varint(2) + body) == expected
    assert decode_snapshot(varint(3) + body) == expected


def test_blocks_split_in_several_pieces_decode() -> None:
    """Avro allows a list in several blocks; Tephra's decoder loops until a zero count, so do we."""
    data = varint(4) + varint(1) + varint(2) + varint(3)
    data += varint(1) + varint(10) + varint(2) + varint(11) + varint(12) + varint(0)  # invalid: [10] + [11, 12]
    data += varint(0) + varint(0) + varint(0)
    assert decode_snapshot(data).invalid == (10, 11, 12)


def test_visibility_upper_bound_and_types() -> None:
    assert SMALL.visibility_upper_bound == 4  # the first in-progress entry's (tx 6)
    assert TransactionSnapshot(1, 5, 9).visibility_upper_bound == 5  # none in progress: the read pointer
    assert [t.value for t in InProgressType] == [0, 1, 2]
    assert InProgressType.of(TransactionType.SHORT) is SHORT and InProgressType.of(TransactionType.LONG) is LONG
    assert (SHORT.transaction_type, LONG.transaction_type, CHECKPOINT.transaction_type) == (
        TransactionType.SHORT,
        TransactionType.LONG,
        None,
    )


VALID = encode_snapshot(SMALL)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "truncated"),
        (varint(1) + VALID[1:], "unsupported snapshot version 1"),
        (varint(5) + VALID[1:], "unsupported snapshot version 5"),
        (VALID + b"\x00", "1 unexpected bytes"),
        (varint(4) + b"\xff" * 11, "longer than 10 bytes"),
        (b"\xff\xff\xff\xff\x7f", "overflows a 32-bit number"),
        (varint(4) + varint(1) * 3 + varint(-1), "impossible invalid block size -1"),
        (varint(4) + varint(1) * 3 + varint(1_000), "impossible invalid block size 1000"),
        (varint(4) + varint(1) * 3 + block([]) + block([varint(1) * 3 + varint(3)]), "type ordinal 3 of tx 1"),
        (varint(4) + varint(1) * 3 + block([]) * 2 + block([varint(1) + block([varint(-1)])]), "negative byte-string"),
        (varint(4) + varint(1) * 3 + block([]) * 2 + block([varint(1) + block([varint(5) + b"ab"])]), "truncated"),
        (b"\x0a\x00\x01" + bytes(8), "unsupported snapshot version 5"),  # a Thrift TTransaction is not a snapshot
    ],
)
def test_corrupt_snapshots_raise_corrupt_data(data: bytes, message: str) -> None:
    with pytest.raises(CorruptData, match=message):
        decode_snapshot(data)


def test_every_truncation_is_rejected() -> None:
    for end in range(len(VALID)):
        with pytest.raises(CorruptData):
            decode_snapshot(VALID[:end])


def test_garbage_never_escapes_as_a_raw_exception() -> None:
    rng = random.Random(99)
    for _ in range(2000):
        data = varint(4) + rng.randbytes(rng.randrange(0, 80))
        with contextlib.suppress(CorruptData):  # a few random strings are valid snapshots; others must be CorruptData
            decode_snapshot(data)
    for position in range(len(VALID)):
        for value in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            with contextlib.suppress(CorruptData):
                decode_snapshot(VALID[:position] + bytes([value]) + VALID[position + 1 :])


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: TransactionSnapshot(2**63, 0, 0), "timestamp must fit"),
        (lambda: TransactionSnapshot(0, 0, 0, ["1"]), r"invalid\[0\] must be an int"),
        (lambda: TransactionSnapshot(0, 0, 0, (), {1: (1, 2)}), r"in_progress\[1\] must be an InProgressTx"),
        (lambda: TransactionSnapshot(0, 0, 0, (), {"1": InProgressTx(1, 1, SHORT)}), "in_progress key must be"),
        (lambda: TransactionSnapshot(0, 0, 0, (), {}, {1: {"a"}}), "holds a str, expected bytes"),
        (lambda: TransactionSnapshot(0, 0, 0, (), {}, {}, {1: b"ab"}), "must be a set of bytes"),
        (lambda: TransactionSnapshot(0, 0, 0, (), {}, {}, [1]), "must be a mapping"),
        (lambda: InProgressTx(1, 1, TransactionType.SHORT), "type must be an InProgressType"),
        (lambda: InProgressTx(1, 1, SHORT, (True,)), "must be an int"),
        (lambda: InProgressTx(1.5, 1, SHORT), "expiration must be an int"),
        (lambda: encode_snapshot(b"snapshot"), "expected a TransactionSnapshot"),
        (lambda: decode_snapshot("08"), "expected bytes"),
    ],
)
def test_bad_values_raise_invalid_argument(make: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        make()  # type: ignore[operator]
