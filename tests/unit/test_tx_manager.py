"""Unit tests of the pure TransactionManager (Tephra semantics) and its replayable edits."""

from __future__ import annotations

import random

import pytest

from tms_hbase.errors import (
    CorruptData,
    InvalidArgument,
    InvalidTruncateTime,
    TransactionConflict,
    TransactionNotInProgress,
)
from tms_hbase.model.transaction import NO_TX_IN_PROGRESS, Transaction, TransactionType, VisibilityLevel
from tms_hbase.tx.snapshot import InProgressType
from tms_hbase.txserver import edits as e
from tms_hbase.txserver.edits import decode_edit, encode_edit
from tms_hbase.txserver.manager import MAX_TX_PER_MS, TransactionManager

T0 = 1_700_000_000_000  # ms


def _manager() -> TransactionManager:
    """A manager initialised at T0, with the initialisation edit drained."""
    tm = TransactionManager()
    assert tm.initialize(T0)
    tm.drain_edits()
    return tm


def _replayed(edits: list, snapshot=None) -> TransactionManager:
    """A fresh manager (optionally restored from a snapshot) with ``edits`` replayed through encode/decode."""
    tm = TransactionManager()
    if snapshot is not None:
        tm.restore(snapshot)
    for edit in edits:
        tm.apply(decode_edit(encode_edit(edit)))
    return tm


# ------------------------------------------------------------------------------------------------------- lifecycle


def test_initialize_sets_both_pointers_once() -> None:
    tm = TransactionManager()
    assert (tm.read_pointer, tm.last_write_pointer) == (0, 0)
    assert tm.initialize(T0)
    assert tm.read_pointer == tm.last_write_pointer == T0 * MAX_TX_PER_MS
    assert tm.drain_edits() == [e.MoveWatermark(T0 * MAX_TX_PER_MS)]
    assert not tm.initialize(T0 + 5)
    assert tm.drain_edits() == []


def test_write_pointers_follow_time_and_stay_sequential() -> None:
    tm = _manager()
    a = tm.start_short(T0)
    b = tm.start_short(T0)  # same millisecond: last + 1
    c = tm.start_short(T0 + 10)
    assert a.tx_id == T0 * MAX_TX_PER_MS + 1
    assert b.tx_id == a.tx_id + 1
    assert c.tx_id == (T0 + 10) * MAX_TX_PER_MS
    assert tm.last_write_pointer == c.tx_id
    d = tm.start_short(T0 - 1000)  # clock went back: still sequential
    assert d.tx_id == c.tx_id + 1


def test_start_short_builds_tephra_snapshot() -> None:
    tm = _manager()
    long_tx = tm.start_long(T0 + 1)
    short_tx = tm.start_short(T0 + 2, timeout_s=10, client_id="c1")
    tx = tm.start_short(T0 + 3)
    assert tx.in_progress == (long_tx.tx_id, short_tx.tx_id)  # excludes itself
    assert tx.first_short_in_progress == short_tx.tx_id  # LONG ones are skipped
    assert tx.read_pointer == T0 * MAX_TX_PER_MS
    assert tx.type is TransactionType.SHORT and tx.write_pointer == tx.tx_id
    assert long_tx.first_short_in_progress == NO_TX_IN_PROGRESS
    assert long_tx.type is TransactionType.LONG
    entry = tm.in_progress[short_tx.tx_id]
    assert entry.expiration == T0 + 2 + 10_000
    assert entry.type is InProgressType.SHORT
    assert entry.visibility_upper_bound == short_tx.visibility_upper_bound == long_tx.tx_id - 1
    assert tm.in_progress[long_tx.tx_id].expiration == T0 + 1 + 86_400_000
    assert tm.client_id(short_tx.tx_id) == "c1"
    edits = tm.drain_edits()
    assert [type(x) for x in edits] == [e.InProgress] * 3
    assert edits[1] == e.InProgress(short_tx.tx_id, T0 + 10_002, long_tx.tx_id - 1, TransactionType.SHORT, "c1")


def test_start_short_rejects_bad_timeouts() -> None:
    tm = TransactionManager(max_timeout_s=60)
    tm.initialize(T0)
    for bad in (0, -1, 61, 1.5, True):
        with pytest.raises(InvalidArgument):
            tm.start_short(T0, timeout_s=bad)
    tm.drain_edits()
    assert tm.start_short(T0, timeout_s=60)
    assert len(tm.drain_edits()) == 1


def test_commit_moves_read_pointer_and_makes_writes_visible() -> None:
    tm = _manager()
    writer = tm.start_short(T0 + 1)
    concurrent = tm.start_short(T0 + 2)
    assert writer.is_visible(writer.write_pointer)  # own writes
    assert not concurrent.is_visible(writer.write_pointer)  # in progress when concurrent started
    tm.can_commit(writer.tx_id, {b"row1"})
    tm.commit(writer.tx_id, writer.write_pointer)
    assert tm.read_pointer == writer.tx_id
    assert writer.tx_id not in tm.in_progress
    later = tm.start_short(T0 + 3)
    assert later.is_visible(writer.write_pointer)
    assert not later.is_visible(concurrent.write_pointer)  # still in progress
    assert not concurrent.is_visible(writer.write_pointer)  # snapshots never change
    assert not later.is_visible(later.tx_id + 1)  # the future


def test_read_pointer_only_moves_up() -> None:
    tm = _manager()
    first = tm.start_short(T0 + 1)
    second = tm.start_short(T0 + 2)
    tm.commit(second.tx_id, second.write_pointer)
    assert tm.read_pointer == second.tx_id
    tm.commit(first.tx_id, first.write_pointer)
    assert tm.read_pointer == second.tx_id


def test_commit_without_can_commit_records_nothing_committed() -> None:
    tm = _manager()
    tx = tm.start_short(T0 + 1)
    tm.commit(tx.tx_id, tx.write_pointer)
    assert tm.committed_change_sets == {}
    assert tm.drain_edits()[-1] == e.Committed(tx.tx_id, tx.tx_id, tx.tx_id + 1, frozenset(), False)


def test_not_in_progress_errors() -> None:
    tm = _manager()
    tx = tm.start_short(T0 + 1)
    tm.commit(tx.tx_id, tx.write_pointer)
    tm.drain_edits()
    with pytest.raises(TransactionNotInProgress, match=r"not in progress$"):
        tm.can_commit(tx.tx_id, {b"a"})
    with pytest.raises(TransactionNotInProgress):
        tm.commit(tx.tx_id, tx.write_pointer)
    with pytest.raises(TransactionNotInProgress):
        tm.checkpoint(tx, T0 + 2)
    other = tm.start_short(T0 + 3)
    assert tm.invalidate(other.tx_id)
    with pytest.raises(TransactionNotInProgress, match="known to be invalid"):
        tm.commit(other.tx_id, other.write_pointer)
    with pytest.raises(TransactionNotInProgress, match="invalidated"):
        tm.checkpoint(other, T0 + 4)
    assert [type(x) for x in tm.drain_edits()] == [e.InProgress, e.Invalid]  # failures record nothing


# -------------------------------------------------------------------------------------------------- conflicts


def test_overlapping_change_sets_conflict_at_can_commit() -> None:
    tm = _manager()
    a = tm.start_short(T0 + 1)
    b = tm.start_short(T0 + 2)
    tm.can_commit(a.tx_id, {b"k1", b"k2"})
    tm.commit(a.tx_id, a.write_pointer)
    tm.drain_edits()
    with pytest.raises(TransactionConflict) as info:
        tm.can_commit(b.tx_id, {b"k2", b"k3"})
    assert info.value.tx_id == b.tx_id and info.value.conflicting_key == b"k2"
    assert tm.drain_edits() == []
    assert b.tx_id not in tm.committing_change_sets
    # A transaction started after the commit does not conflict.
    c = tm.start_short(T0 + 3)
    tm.can_commit(c.tx_id, {b"k2"})
    tm.commit(c.tx_id, c.write_pointer)


def test_a_conflict_names_the_client_that_committed_the_change_as_tephra_does() -> None:
    tm = _manager()
    edits = tm.drain_edits()
    a = tm.start_short(T0 + 1, client_id="writer-a")
    anonymous = tm.start_short(T0 + 2)
    b = tm.start_short(T0 + 3, client_id="writer-b")
    c = tm.start_short(T0 + 4)
    tm.can_commit(a.tx_id, {b"k1"})
    tm.commit(a.tx_id, a.write_pointer)
    tm.can_commit(anonymous.tx_id, {b"k2"})
    tm.commit(anonymous.tx_id, anonymous.write_pointer)
    edits += tm.drain_edits()
    for manager in (tm, _replayed(edits)):  # the edit log brings the client ids back
        with pytest.raises(TransactionConflict) as named:
            manager.can_commit(b.tx_id, {b"k1"})
        assert named.value.conflicting_client == "writer-a"
        with pytest.raises(TransactionConflict) as unnamed:  # committed at the same commit pointer as k1
            manager.can_commit(c.tx_id, {b"k2"})
        assert unnamed.value.conflicting_client is None  # the server answers "unknown", as Tephra
    restored = _replayed([], tm.snapshot(T0 + 5))
    with pytest.raises(TransactionConflict) as after_restore:
        restored.can_commit(b.tx_id, {b"k1"})
    assert after_restore.value.conflicting_client is None  # snapshots keep no client ids


def test_overlapping_change_sets_conflict_at_commit() -> None:
    tm = _manager()
    a = tm.start_short(T0 + 1)
    b = tm.start_short(T0 + 2)
    tm.can_commit(a.tx_id, {b"k"})
    tm.can_commit(b.tx_id, {b"k"})  # nothing committed yet
    tm.commit(a.tx_id, a.write_pointer)
    tm.drain_edits()
    with pytest.raises(TransactionConflict) as info:
        tm.commit(b.tx_id, b.write_pointer)
    assert info.value.conflicting_key == b"k"
    assert b.tx_id in tm.in_progress  # still in progress: the client must abort
    assert b.tx_id not in tm.committing_change_sets  # Tephra drops it
    assert tm.drain_edits() == [e.CommitConflict(b.tx_id)]
    tm.abort(b)
    assert b.tx_id not in tm.in_progress and tm.read_pointer == b.tx_id


def test_disjoint_change_sets_both_commit() -> None:
    tm = _manager()
    a = tm.start_short(T0 + 1)
    b = tm.start_short(T0 + 2)
    tm.can_commit(a.tx_id, {b"x"})
    tm.can_commit(b.tx_id, {b"y"})
    tm.commit(a.tx_id, a.write_pointer)
    tm.commit(b.tx_id, b.write_pointer)
    assert tm.read_pointer == b.tx_id
    assert tm.in_progress == {}


def test_committed_change_sets_pruned_below_first_short_in_progress() -> None:
    tm = _manager()
    long_tx = tm.start_long(T0)
    a = tm.start_short(T0 + 1)
    b = tm.start_short(T0 + 2)
    tm.can_commit(a.tx_id, {b"x"})
    tm.commit(a.tx_id, a.write_pointer)
    commit_pointer = b.tx_id + 1
    assert tm.committed_change_sets == {commit_pointer: frozenset({b"x"})}  # b could still conflict
    tm.commit(b.tx_id, b.write_pointer)
    assert long_tx.tx_id in tm.in_progress
    assert tm.committed_change_sets == {}  # the LONG one does not keep change sets alive


def test_commits_at_the_same_pointer_merge() -> None:
    tm = _manager()
    keeper = tm.start_short(T0)
    a = tm.start_short(T0 + 1)
    b = tm.start_short(T0 + 2)
    tm.can_commit(a.tx_id, {b"x"})
    tm.can_commit(b.tx_id, {b"y"})
    tm.commit(a.tx_id, a.write_pointer)
    tm.commit(b.tx_id, b.write_pointer)  # no start in between: same commit pointer
    assert tm.committed_change_sets == {b.tx_id + 1: frozenset({b"x", b"y"})}
    with pytest.raises(TransactionConflict):
        tm.can_commit(keeper.tx_id, {b"y"})


# ------------------------------------------------------------------------------------------- abort / invalidate


def test_abort_short_forgets_it() -> None:
    tm = _manager()
    tx = tm.start_short(T0 + 1)
    tm.can_commit(tx.tx_id, {b"a"})
    tm.abort(tx)
    assert tx.tx_id not in tm.in_progress and tm.committing_change_sets == {}
    assert tm.invalid == () and tm.read_pointer == tx.tx_id
    assert not tm.start_short(T0 + 2).is_excluded(tx.tx_id)


def test_abort_long_invalidates_it() -> None:
    tm = _manager()
    rp = tm.read_pointer
    tx = tm.start_long(T0 + 1)
    tm.abort(tx)
    assert tm.invalid == (tx.tx_id,) and tm.invalid_size() == 1
    assert tx.tx_id not in tm.in_progress
    assert tm.read_pointer == rp  # a LONG one does not move the read pointer
    later = tm.start_short(T0 + 2)
    assert later.is_invalid(tx.tx_id) and not later.is_visible(tx.tx_id)


def test_abort_of_timed_out_short_removes_it_from_invalid() -> None:
    tm = _manager()
    tx = tm.start_short(T0, timeout_s=1)
    cp = tm.checkpoint(tx, T0)
    assert tm.timeout_expired(T0 + 1001) == [tx.tx_id, cp.write_pointer]
    assert tm.invalid == (tx.tx_id, cp.write_pointer)
    tm.abort(cp)
    assert tm.invalid == () and tm.in_progress == {}


def test_invalidate() -> None:
    tm = _manager()
    short_tx = tm.start_short(T0 + 1)
    long_tx = tm.start_long(T0 + 2)
    tm.can_commit(short_tx.tx_id, {b"a"})
    assert tm.invalidate(short_tx.tx_id)
    assert tm.read_pointer == short_tx.tx_id  # short: read pointer moves
    assert tm.invalidate(long_tx.tx_id)
    assert tm.read_pointer == short_tx.tx_id  # long: it does not
    assert tm.invalid == (short_tx.tx_id, long_tx.tx_id) and tm.committing_change_sets == {}
    assert not tm.invalidate(short_tx.tx_id)  # not in progress any more
    assert not tm.invalidate(12345)
    assert [type(x) for x in tm.drain_edits()][-4:] == [e.Invalid] * 4  # Tephra logs even the no-ops


def test_committing_a_timed_out_tx_is_refused() -> None:
    tm = _manager()
    tx = tm.start_short(T0, timeout_s=1)
    tm.timeout_expired(T0 + 2000)
    with pytest.raises(TransactionNotInProgress, match="invalid"):
        tm.can_commit(tx.tx_id, {b"a"})


# ---------------------------------------------------------------------------------------------------- timeouts


def test_short_timeout_invalidates() -> None:
    tm = _manager()
    tx = tm.start_short(T0)  # default 30 s
    tm.can_commit(tx.tx_id, {b"a"})
    rp = tm.read_pointer
    assert tm.timeout_expired(T0 + 30_000) == []  # not past the expiration yet
    assert tm.timeout_expired(T0 + 30_001) == [tx.tx_id]
    assert tm.invalid == (tx.tx_id,) and tm.in_progress == {} and tm.committing_change_sets == {}
    assert tm.read_pointer == rp  # Tephra's cleanup does not move it
    assert tm.drain_edits()[-1] == e.TimedOut(frozenset({tx.tx_id}))
    assert tm.timeout_expired(T0 + 40_000) == []


def test_long_timeout_invalidates_after_a_day() -> None:
    tm = TransactionManager(timeout_s=5, long_timeout_s=3600)
    tm.initialize(T0)
    long_tx = tm.start_long(T0)
    short_tx = tm.start_short(T0)
    assert tm.timeout_expired(T0 + 5_001) == [short_tx.tx_id]
    assert tm.timeout_expired(T0 + 3_600_000) == []
    assert tm.timeout_expired(T0 + 3_600_001) == [long_tx.tx_id]
    assert tm.invalid == (long_tx.tx_id, short_tx.tx_id)
    default = _manager()
    tx = default.start_long(T0)
    assert default.timeout_expired(T0 + 86_400_000) == []
    assert default.timeout_expired(T0 + 86_400_001) == [tx.tx_id]


def test_negative_expiration_times_out_at_once() -> None:
    from tms_hbase.tx.snapshot import InProgressTx, TransactionSnapshot

    tm = TransactionManager()
    wp = T0 * MAX_TX_PER_MS
    tm.restore(TransactionSnapshot(T0, wp - 1, wp, (), {wp: InProgressTx(-1, wp - 1, InProgressType.LONG)}))
    assert tm.timeout_expired(T0) == [wp]
    assert tm.invalid == (wp,)


# -------------------------------------------------------------------------------------------------- checkpoints


def test_checkpoint_adds_pointers_seen_by_later_transactions() -> None:
    tm = _manager()
    tx = tm.start_short(T0 + 1, client_id="cp")
    tx = tx.with_visibility(VisibilityLevel.SNAPSHOT_EXCLUDE_CURRENT)
    cp1 = tm.checkpoint(tx, T0 + 2)
    cp2 = tm.checkpoint(cp1, T0 + 3)
    assert cp1.tx_id == cp2.tx_id == tx.tx_id
    assert cp1.write_pointer == (T0 + 2) * MAX_TX_PER_MS
    assert cp2.checkpoint_write_pointers == (cp1.write_pointer, cp2.write_pointer)
    assert cp2.write_pointer == cp2.checkpoint_write_pointers[-1]
    assert cp2.read_pointer == tx.read_pointer and cp2.in_progress == tx.in_progress  # same read snapshot
    assert cp2.visibility_level is VisibilityLevel.SNAPSHOT_EXCLUDE_CURRENT
    assert cp2.is_visible(cp1.write_pointer) and not cp2.is_visible(cp2.write_pointer)
    parent = tm.in_progress[tx.tx_id]
    assert parent.checkpoint_write_pointers == cp2.checkpoint_write_pointers
    child = tm.in_progress[cp1.write_pointer]
    assert child.type is InProgressType.CHECKPOINT
    assert (child.expiration, child.visibility_upper_bound) == (parent.expiration, parent.visibility_upper_bound)
    assert tm.client_id(cp2.write_pointer) == "cp"
    later = tm.start_short(T0 + 4)
    assert later.in_progress == (tx.tx_id, cp1.write_pointer, cp2.write_pointer)
    assert not later.is_visible(cp1.write_pointer)
    assert [type(x) for x in tm.drain_edits()][-3:] == [e.Checkpoint, e.Checkpoint, e.InProgress]
    # Commit moves the read pointer to the last checkpoint and forgets every checkpoint pointer.
    tm.commit(cp2.tx_id, cp2.write_pointer)
    assert tm.read_pointer == cp2.write_pointer
    assert list(tm.in_progress) == [later.tx_id]
    after = tm.start_short(T0 + 5)
    assert all(after.is_visible(p) for p in (tx.tx_id, cp1.write_pointer, cp2.write_pointer))


def test_checkpoint_of_long_tx_counts_as_short_for_first_short() -> None:
    tm = _manager()
    long_tx = tm.start_long(T0 + 1)
    cp = tm.checkpoint(long_tx, T0 + 2)
    later = tm.start_short(T0 + 3)
    assert later.first_short_in_progress == cp.write_pointer  # Tephra: only LONG entries are skipped


def test_invalidate_and_abort_with_checkpoints() -> None:
    tm = _manager()
    tx = tm.start_short(T0 + 1)
    cp = tm.checkpoint(tx, T0 + 2)
    assert tm.invalidate(tx.tx_id)
    assert tm.invalid == (tx.tx_id, cp.write_pointer) and tm.in_progress == {}
    other = tm.checkpoint(tm.start_short(T0 + 3), T0 + 4)
    tm.abort(other)
    assert tm.in_progress == {} and tm.read_pointer == other.tx_id


# ---------------------------------------------------------------------------------------------------- truncate


def test_truncate_invalid() -> None:
    tm = _manager()
    ids = [tm.start_long(T0 + i).tx_id for i in range(3)]
    for tx_id in ids:
        tm.invalidate(tx_id)
    assert tm.truncate_invalid({ids[0], ids[2], 42})
    assert tm.invalid == (ids[1],)
    assert not tm.truncate_invalid({42})
    assert tm.drain_edits()[-1] == e.TruncateInvalid(frozenset({42}))


def test_truncate_invalid_before() -> None:
    tm = _manager()
    old = tm.start_long(T0 + 10)
    tm.invalidate(old.tx_id)
    newer = tm.start_long(T0 + 20)
    tm.invalidate(newer.tx_id)
    running = tm.start_short(T0 + 30)
    tm.drain_edits()
    assert tm.truncate_invalid_before(T0 + 20)  # strictly before the time
    assert tm.invalid == (newer.tx_id,)
    assert not tm.truncate_invalid_before(T0 + 20)
    with pytest.raises(InvalidTruncateTime):
        tm.truncate_invalid_before(T0 + 31)  # `running` started earlier and is in progress
    assert tm.invalid == (newer.tx_id,)
    assert tm.drain_edits() == [e.TruncateInvalidBefore(T0 + 20)] * 2
    tm.commit(running.tx_id, running.write_pointer)
    assert tm.truncate_invalid_before(T0 + 31)
    assert tm.invalid == ()


# ---------------------------------------------------------------------------------------------- snapshot/reset


def _busy_manager() -> TransactionManager:
    tm = _manager()
    a = tm.start_short(T0 + 1, client_id="a")
    b = tm.start_long(T0 + 2)
    c = tm.start_short(T0 + 3)
    tm.checkpoint(a, T0 + 4)
    tm.can_commit(c.tx_id, {b"c1", b"c2"})
    d = tm.start_short(T0 + 5)
    tm.can_commit(d.tx_id, {b"d"})
    tm.commit(d.tx_id, d.write_pointer)
    tm.abort(tm.start_long(T0 + 6))
    assert b.tx_id in tm.in_progress
    return tm


def test_snapshot_restore_round_trip() -> None:
    tm = _busy_manager()
    snap = tm.snapshot(T0 + 100)
    assert snap.timestamp == T0 + 100
    assert snap.read_pointer == tm.read_pointer and snap.write_pointer == tm.last_write_pointer
    assert snap.invalid == tm.invalid and snap.in_progress == dict(tm.in_progress)
    assert snap.committing_change_sets and snap.committed_change_sets
    other = TransactionManager()
    other.restore(snap)
    assert other.snapshot(T0 + 100) == snap
    assert other.drain_edits() == []
    # Both continue identically.
    assert other.start_short(T0 + 200) == tm.start_short(T0 + 200)
    assert other.snapshot(T0 + 300) == tm.snapshot(T0 + 300)


def test_reset_clears_everything() -> None:
    tm = _busy_manager()
    tm.drain_edits()
    tm.reset()
    assert tm.drain_edits() == [e.Reset()]
    assert tm.snapshot(T0) == TransactionManager().snapshot(T0)
    assert tm.initialize(T0 + 1000)
    assert tm.read_pointer == (T0 + 1000) * MAX_TX_PER_MS


def test_status() -> None:
    assert TransactionManager().status() == "OK"


# ------------------------------------------------------------------------------------------------------ replay


def _random_run(seed: int, steps: int = 600) -> tuple[TransactionManager, list, list]:
    """Run a seeded random workload; return the manager, every edit, and (index, snapshot) checkpoints."""
    rng = random.Random(seed)
    tm = TransactionManager(timeout_s=5, long_timeout_s=40)
    now = T0
    tm.initialize(now)
    edits = tm.drain_edits()
    snapshots = []
    live: list[Transaction] = []
    keys = [bytes([k]) for k in range(12)]
    for _ in range(steps):
        now += rng.choice((0, 0, 1, 7, 250, 1500))
        op = rng.random()
        try:
            if op < 0.22 or not live:
                timeout = rng.choice((None, 1, 3, 10))
                live.append(tm.start_short(now, timeout, client_id=rng.choice((None, "w1", "w2"))))
            elif op < 0.27:
                live.append(tm.start_long(now, client_id="job"))
            elif op < 0.45:
                tx = rng.choice(live)
                tm.can_commit(tx.tx_id, set(rng.sample(keys, rng.randint(0, 3))))
            elif op < 0.60:
                tx = rng.choice(live)
                tm.commit(tx.tx_id, tx.write_pointer)
                live.remove(tx)
            elif op < 0.68:
                tx = rng.choice(live)
                tm.abort(tx)
                live.remove(tx)
            elif op < 0.72:
                tm.invalidate(rng.choice(live).tx_id if rng.random() < 0.8 else rng.randrange(10**18, 2 * 10**18))
            elif op < 0.80:
                i = rng.randrange(len(live))
                live[i] = tm.checkpoint(live[i], now)
            elif op < 0.88:
                tm.timeout_expired(now)
            elif op < 0.91:
                tm.truncate_invalid(rng.sample(tm.invalid, min(len(tm.invalid), 2)))
            elif op < 0.94:
                tm.truncate_invalid_before(now - rng.randrange(0, 60_000))
            elif op < 0.95:
                tm.reset()
                tm.initialize(now)
                live.clear()
            else:
                snapshots.append((len(edits), tm.snapshot(now)))
        except (TransactionConflict, TransactionNotInProgress, InvalidTruncateTime):
            pass
        edits += tm.drain_edits()  # drained after every call, failed or not
    return tm, edits, snapshots


@pytest.mark.parametrize("seed", range(8))
def test_replaying_all_edits_rebuilds_identical_state(seed: int) -> None:
    tm, edits, snapshots = _random_run(seed)
    kinds = {type(x) for x in edits}
    assert {e.InProgress, e.Committing, e.Committed, e.Aborted, e.Checkpoint, e.TimedOut} <= kinds
    replayed = _replayed(edits)
    assert replayed.snapshot(0) == tm.snapshot(0)
    assert all(replayed.client_id(wp) == tm.client_id(wp) for wp in tm.in_progress)
    # Recovery as the server does it: a snapshot taken mid-way, then the edits recorded after it.
    for index, snapshot in snapshots:
        assert _replayed(edits[index:], snapshot).snapshot(0) == tm.snapshot(0)


def test_replay_edit_by_edit_tracks_live_state() -> None:
    rng = random.Random(99)
    live = _manager()
    mirror = TransactionManager()
    mirror.restore(live.snapshot(0))
    txs = []
    for step in range(300):
        now = T0 + step * 400
        choice = rng.random()
        try:
            if choice < 0.4 or not txs:
                txs.append(live.start_short(now, rng.choice((1, 2, 30))))
            elif choice < 0.6:
                live.can_commit(rng.choice(txs).tx_id, {bytes([rng.randrange(4)])})
            elif choice < 0.8:
                tx = txs.pop(rng.randrange(len(txs)))
                live.commit(tx.tx_id, tx.write_pointer)
            else:
                live.timeout_expired(now)
        except (TransactionConflict, TransactionNotInProgress):
            pass
        for edit in live.drain_edits():
            mirror.apply(edit)
        assert mirror.snapshot(0) == live.snapshot(0)


# ------------------------------------------------------------------------------------------------------- codec

ALL_EDITS = [
    e.InProgress(T0 * MAX_TX_PER_MS, T0 + 30_000, T0 * MAX_TX_PER_MS - 1, TransactionType.SHORT),
    e.InProgress(-5, -1, -(2**63), TransactionType.LONG, "client é"),
    e.InProgress(2**63 - 1, 0, 0, TransactionType.SHORT, ""),
    e.Committing(7, frozenset({b"", b"a", bytes(range(256)) * 3})),
    e.Committing(7, frozenset()),
    e.Committed(7, 9, 10, frozenset({b"k"}), True),
    e.Committed(7, 7, 8, frozenset(), False),
    e.Invalid(123),
    e.Aborted(5, TransactionType.SHORT, (6, 8, 7)),
    e.Aborted(5, TransactionType.LONG),
    e.MoveWatermark(T0 * MAX_TX_PER_MS),
    e.TruncateInvalid(frozenset({1, 2, -3})),
    e.TruncateInvalid(frozenset()),
    e.Checkpoint(11, 10),
    e.TruncateInvalidBefore(T0),
    e.TimedOut(frozenset({4, 5})),
    e.CommitConflict(77),
    e.Reset(),
]


@pytest.mark.parametrize("edit", ALL_EDITS, ids=lambda x: type(x).__name__)
def test_every_edit_round_trips(edit) -> None:
    data = encode_edit(edit)
    assert data[0] == 1
    assert decode_edit(data) == edit
    assert decode_edit(bytearray(data)) == edit


def test_every_edit_kind_is_covered() -> None:
    assert {type(x) for x in ALL_EDITS} == set(e._KINDS.values())


def test_encoding_is_canonical_for_sets() -> None:
    a = e.Committing(1, frozenset({b"b", b"a", b"c"}))
    b = e.Committing(1, {b"c", b"a", b"b"})  # type: ignore[arg-type]  # normalised to a frozenset
    assert a == b and encode_edit(a) == encode_edit(b)


@pytest.mark.parametrize("edit", ALL_EDITS, ids=lambda x: type(x).__name__)
def test_truncated_or_extended_edits_are_corrupt(edit) -> None:
    data = encode_edit(edit)
    for cut in range(len(data)):
        with pytest.raises(CorruptData):
            decode_edit(data[:cut])
    with pytest.raises(CorruptData):
        decode_edit(data + b"\x00")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x02\x04" + bytes(8),  # unknown format version
        b"\x01\x00",  # unknown kind
        b"\x01\x63",
        b"\x01\x05" + bytes(8) + b"\x03\x00",  # transaction type 3
        b"\x01\x03" + bytes(24) + b"\x00\x02",  # boolean 2
        b"\x01\x07\x02" + bytes(16),  # duplicate ids
        b"\x01\x02" + bytes(8) + b"\x02\x01a\x01a",  # duplicate change keys
        b"\x01\x02" + bytes(8) + b"\xff\xff\xff\xff\x0f",  # huge count
        b"\x01\x02" + bytes(8) + b"\x80\x00",  # overlong varint
        b"\x01\x02" + bytes(8) + b"\x80\x80\x80\x80\x80\x01",  # varint too long
        b"\x01\x01" + bytes(24) + b"\x01\x03\xff\xfe",  # client id not UTF-8
    ],
)
def test_garbage_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptData):
        decode_edit(data)


def test_bad_edit_values_are_rejected() -> None:
    with pytest.raises(InvalidArgument):
        e.Invalid(2**63)
    with pytest.raises(InvalidArgument):
        e.Committing(1, frozenset({"text"}))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        e.Aborted(1, 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        encode_edit(object())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        TransactionManager().apply(object())  # type: ignore[arg-type]
