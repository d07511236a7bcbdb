"""Transaction visibility, Tephra's rules (org.apache.tephra.Transaction): pure code, no HBase."""

from __future__ import annotations

import dataclasses

import pytest

from tms_hbase.errors import InvalidArgument
from tms_hbase.tx import ALL_VISIBLE_LATEST, NO_TX_IN_PROGRESS, Transaction, TransactionType, VisibilityLevel

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
SNAPSHOT, EXCLUDE_CURRENT, ALL = VisibilityLevel  # the three levels, in Thrift order


def base_tx(**kwargs: object) -> Transaction:
    """Read pointer 10, id 20; 4 and 7 invalid; 5 (below the read pointer) and 15 (above) in progress."""
    fields: dict[str, object] = {
        "read_pointer": 10,
        "tx_id": 20,
        "invalids": [7, 4],
        "in_progress": [15, 5],
        "first_short_in_progress": 5,
    }
    fields.update(kwargs)
    return Transaction(**fields)  # type: ignore[arg-type]


def checkpointed_tx(level: VisibilityLevel = SNAPSHOT) -> Transaction:
    """``base_tx`` checkpointed twice: earlier checkpoint 22, current write pointer 25."""
    return base_tx().checkpoint(22).checkpoint(25).with_visibility(level)


# version -> (SNAPSHOT, SNAPSHOT_EXCLUDE_CURRENT, SNAPSHOT_ALL) visibility for checkpointed_tx()
VISIBILITY_TABLE = {
    3: (True, True, True),  # committed before the snapshot
    4: (False, False, False),  # invalid, below the read pointer
    5: (False, False, False),  # in progress, below the read pointer
    7: (False, False, False),  # invalid
    10: (True, True, True),  # exactly the read pointer
    11: (False, False, False),  # read pointer + 1, not ours
    15: (False, False, False),  # in progress above the read pointer
    20: (True, True, True),  # our transaction id: still ours after checkpoints, even excluding current
    22: (True, True, True),  # an earlier checkpoint of ours
    25: (True, False, True),  # the current write pointer: hidden only by SNAPSHOT_EXCLUDE_CURRENT
    26: (False, False, False),  # a later transaction
    LONG_MAX: (False, False, False),
}


@pytest.mark.parametrize("level_index, level", list(enumerate(VisibilityLevel)))
@pytest.mark.parametrize("version, expected", VISIBILITY_TABLE.items())
def test_visibility_table(level_index: int, level: VisibilityLevel, version: int, expected: tuple[bool, ...]) -> None:
    assert checkpointed_tx(level).is_visible(version) is expected[level_index]


def test_enum_values_are_tephra_thrift_values() -> None:
    assert [(t.name, t.value) for t in TransactionType] == [("SHORT", 1), ("LONG", 2)]
    assert [(v.name, v.value) for v in VisibilityLevel] == [
        ("SNAPSHOT", 1),
        ("SNAPSHOT_EXCLUDE_CURRENT", 2),
        ("SNAPSHOT_ALL", 3),
    ]
    assert NO_TX_IN_PROGRESS == LONG_MAX


def test_defaults_and_contract_constructor() -> None:
    tx = Transaction(read_pointer=3, tx_id=3, invalids=[], in_progress=[2], first_short_in_progress=2)
    assert (tx.type, tx.visibility_level, tx.checkpoint_write_pointers) == (TransactionType.SHORT, SNAPSHOT, ())
    assert tx.write_pointer == 3
    assert tx.in_progress == (2,) and tx.invalids == ()


def test_lists_are_sorted_tuples_so_binary_search_finds_every_entry() -> None:
    tx = base_tx(invalids=[90, 4, 61, 7], in_progress={15, 5, 40}, checkpoint_write_pointers=[30, 21])
    assert tx.invalids == (4, 7, 61, 90)
    assert tx.in_progress == (5, 15, 40)
    assert tx.checkpoint_write_pointers == (21, 30)
    assert all(tx.is_invalid(v) for v in (4, 7, 61, 90))
    assert all(tx.is_in_progress(v) for v in (5, 15, 40))
    assert all(tx.is_checkpoint(v) for v in (21, 30))


def test_in_progress_invalid_and_excluded_are_distinct() -> None:
    tx = base_tx()
    assert tx.is_invalid(4) and not tx.is_in_progress(4) and tx.is_excluded(4)
    assert tx.is_in_progress(5) and not tx.is_invalid(5) and tx.is_excluded(5)
    assert tx.is_in_progress(15) and tx.is_excluded(15)
    assert not tx.is_excluded(3) and not tx.is_excluded(10) and not tx.is_excluded(6)


def test_write_pointer_is_tx_id_until_a_checkpoint_then_the_latest_checkpoint() -> None:
    assert base_tx().write_pointer == 20
    assert base_tx(checkpoint_write_pointers=[25, 22]).write_pointer == 25
    assert checkpointed_tx().write_pointer == 25
    assert checkpointed_tx().checkpoint_write_pointers == (22, 25)
    assert checkpointed_tx().tx_id == 20


def test_explicit_write_pointer_is_kept_as_given() -> None:
    # Tephra's wire form carries the write pointer separately; a decoded value must survive unchanged.
    assert base_tx(checkpoint_write_pointers=[22, 25], write_pointer=22).write_pointer == 22


def test_current_write_covers_tx_id_write_pointer_and_every_checkpoint() -> None:
    tx = checkpointed_tx()
    assert [v for v in (10, 19, 20, 21, 22, 23, 25, 26) if tx.is_current_write(v)] == [20, 22, 25]
    plain = base_tx()
    assert [v for v in (10, 19, 20, 21, 22) if plain.is_current_write(v)] == [20]


def test_own_writes_are_visible_even_when_excluded_or_above_read_pointer() -> None:
    # Tephra lists checkpoint pointers as in progress; our own checkpoint must still be visible to us.
    tx = base_tx(in_progress=[5, 15, 22], checkpoint_write_pointers=[22, 25])
    assert tx.is_excluded(22) and tx.read_pointer < 22
    assert tx.is_visible(22)


def test_exclude_current_without_checkpoint_hides_the_transaction_id() -> None:
    tx = base_tx().with_visibility(EXCLUDE_CURRENT)
    assert tx.write_pointer == tx.tx_id == 20
    assert not tx.is_visible(20)
    assert base_tx().is_visible(20)


def test_exclude_current_hides_only_the_latest_checkpoint() -> None:
    tx = checkpointed_tx(EXCLUDE_CURRENT).checkpoint(30)
    assert [v for v in (20, 22, 25, 30) if tx.is_visible(v)] == [20, 22, 25]


def test_snapshot_all_sees_exactly_what_snapshot_sees() -> None:
    snapshot, everything = checkpointed_tx(SNAPSHOT), checkpointed_tx(ALL)
    versions = [*range(-3, 40), LONG_MAX, LONG_MIN]
    assert [everything.is_visible(v) for v in versions] == [snapshot.is_visible(v) for v in versions]


def test_read_pointer_edges() -> None:
    tx = base_tx(invalids=[], in_progress=[9], first_short_in_progress=9)
    assert tx.is_visible(10)
    assert not tx.is_visible(11)
    assert not tx.is_visible(9)  # below the read pointer but in progress
    assert base_tx(invalids=[8], in_progress=[]).is_visible(8) is False  # below the read pointer but invalid


def test_visibility_upper_bound_without_in_progress() -> None:
    assert base_tx(in_progress=[], first_short_in_progress=NO_TX_IN_PROGRESS).visibility_upper_bound == 10
    # read pointer at or above the id: capped at id - 1
    assert base_tx(read_pointer=20, in_progress=[]).visibility_upper_bound == 19
    assert ALL_VISIBLE_LATEST.visibility_upper_bound == LONG_MAX - 1


def test_visibility_upper_bound_uses_oldest_in_progress_of_any_type() -> None:
    # 5 is LONG, 15 the first SHORT: Tephra's bound follows the in-progress list, not first_short_in_progress.
    tx = base_tx(in_progress=[15, 5], first_short_in_progress=15)
    assert tx.visibility_upper_bound == 4
    only_long = base_tx(in_progress=[5], first_short_in_progress=NO_TX_IN_PROGRESS)
    assert only_long.visibility_upper_bound == 4
    assert only_long.first_short_in_progress == NO_TX_IN_PROGRESS


def test_first_in_progress_and_excludes() -> None:
    empty = base_tx(invalids=[], in_progress=[])
    assert empty.first_in_progress == NO_TX_IN_PROGRESS
    assert not empty.has_excludes and empty.excludes_size == 0
    tx = base_tx()
    assert tx.first_in_progress == 5
    assert tx.has_excludes and tx.excludes_size == 4


def test_all_visible_latest_sees_every_committed_version() -> None:
    assert all(ALL_VISIBLE_LATEST.is_visible(v) for v in (0, 1, 10**18, LONG_MAX))


def test_immutable_and_helpers_return_new_transactions() -> None:
    tx = base_tx()
    with pytest.raises(dataclasses.FrozenInstanceError):
        tx.read_pointer = 11  # type: ignore[misc]
    excluded = tx.with_visibility(EXCLUDE_CURRENT)
    assert excluded.visibility_level is EXCLUDE_CURRENT and tx.visibility_level is SNAPSHOT
    moved = tx.checkpoint(22)
    assert (moved.write_pointer, moved.checkpoint_write_pointers) == (22, (22,))
    assert (tx.write_pointer, tx.checkpoint_write_pointers) == (20, ())
    assert moved.with_visibility(ALL).write_pointer == 22  # changing the level keeps the checkpoint state
    assert dataclasses.replace(moved, visibility_level=SNAPSHOT) == moved
    assert tx == base_tx() and hash(tx) == hash(base_tx())


def test_extreme_longs_are_accepted() -> None:
    tx = base_tx(read_pointer=LONG_MIN, tx_id=LONG_MAX, invalids=[LONG_MIN], in_progress=[LONG_MAX])
    assert tx.is_invalid(LONG_MIN) and tx.is_in_progress(LONG_MAX)


BAD_SCALARS = [True, False, 1.0, "3", None, 2**63, LONG_MIN - 1]


@pytest.mark.parametrize(
    "field, bad",
    [
        (field, bad)
        for field in ("read_pointer", "tx_id", "first_short_in_progress", "write_pointer")
        for bad in BAD_SCALARS
        if not (field == "write_pointer" and bad is None)  # None write_pointer means "derive it"
    ],
)
def test_bad_scalar_pointers_are_rejected(field: str, bad: object) -> None:
    with pytest.raises(InvalidArgument, match=field):
        base_tx(**{field: bad})


@pytest.mark.parametrize("field", ["invalids", "in_progress", "checkpoint_write_pointers"])
@pytest.mark.parametrize("bad", [[1, True], [1, 2.0], [1, "2"], [1, 2**63], [1, None]])
def test_bad_list_entries_are_rejected_naming_the_entry(field: str, bad: list[object]) -> None:
    with pytest.raises(InvalidArgument, match=rf"{field}\[1\]"):
        base_tx(**{field: bad})


@pytest.mark.parametrize("field", ["invalids", "in_progress", "checkpoint_write_pointers"])
@pytest.mark.parametrize("bad", [5, None, "12", b"\x01"])
def test_non_sequences_are_rejected(field: str, bad: object) -> None:
    with pytest.raises(InvalidArgument, match=field):
        base_tx(**{field: bad})


def test_enum_fields_must_be_enums() -> None:
    with pytest.raises(InvalidArgument, match="type"):
        base_tx(type=1)
    with pytest.raises(InvalidArgument, match="visibility_level"):
        base_tx(visibility_level="SNAPSHOT")
    with pytest.raises(InvalidArgument, match="visibility_level"):
        base_tx().with_visibility(2)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="new_write_pointer"):
        base_tx().checkpoint(True)


def test_invalid_argument_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        base_tx(tx_id="x")


def test_repr_is_concise() -> None:
    tx = base_tx(invalids=range(1000)).checkpoint(22).with_visibility(EXCLUDE_CURRENT)
    text = repr(tx)
    assert len(text) < 200
    assert text.startswith("Transaction(tx_id=20, read_pointer=10, write_pointer=22")
    assert "+996" in text and "SNAPSHOT_EXCLUDE_CURRENT" in text and "SHORT" in text
    assert repr(Transaction(1, 2, [], [], NO_TX_IN_PROGRESS)) == (
        "Transaction(tx_id=2, read_pointer=1, invalids=[], in_progress=[], first_short=none, SHORT)"
    )
