"""Our Tephra implementation against the real thing: Apache Tephra 0.16.1 (its last release), run from its jars.

- ``TransactionClient`` drives a real Tephra transaction server (``TransactionServiceMain``; ZooKeeper in the same
  JVM, state in memory): start, can-commit / commit, conflicts, abort, invalidate, checkpoint, timeouts, status,
  snapshots (decoded by our snapshot codec) and truncating the invalid list.
- ``TransactionCodec`` bytes are compared with ``org.apache.tephra.TransactionCodec``'s, both ways.

The jars are downloaded with Maven on first use (tests/tephra/pom.xml; cached like the local HBase's jars), and
the small Java helper tests/tephra/TephraCompat.java is compiled here. A missing JDK or Maven fails these tests.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tms_hbase.errors import InvalidTruncateTime, TransactionConflict, TransactionNotInProgress
from tms_hbase.tx import NO_TX_IN_PROGRESS, Transaction, TransactionCodec, TransactionType, VisibilityLevel
from tms_hbase.tx.client import TransactionClient
from tms_hbase.tx.snapshot import InProgressType, decode_snapshot, encode_snapshot

from ..tephra.launcher import Tephra, TephraServer

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
SHORT, LONG = TransactionType.SHORT, TransactionType.LONG


@pytest.fixture
def tx(tephra_server: TephraServer) -> Iterator[TransactionClient]:
    """Our client on the real server, whose state is reset first (resetState) so every test starts empty."""
    with TransactionClient(tephra_server.address) as client:
        client.reset()
        yield client


def now_pointer() -> int:
    return int(time.time() * 1000) * 1_000_000


# -- the transaction server ---------------------------------------------------------------------------------


def test_status_and_short_transactions(tx: TransactionClient) -> None:
    assert tx.status() == "OK"
    before = now_pointer()
    first = tx.start_short()
    assert first.type is SHORT
    assert first.write_pointer == first.tx_id
    assert before <= first.tx_id <= now_pointer() + 10**9  # Tephra's write pointers: ms since the epoch × 10^6
    assert first.in_progress == () and first.first_short_in_progress == NO_TX_IN_PROGRESS
    assert first.checkpoint_write_pointers == () and first.visibility_level is VisibilityLevel.SNAPSHOT

    # every start variant the client has (startShortClientId, ...WithTimeout, ...WithClientIdAndTimeOut)
    second = tx.start_short(client_id="compat-test")
    third = tx.start_short(timeout_seconds=120)
    fourth = tx.start_short(timeout_seconds=120, client_id="compat-test")
    assert first.tx_id < second.tx_id < third.tx_id < fourth.tx_id
    assert all(t.type is SHORT for t in (second, third, fourth))
    assert fourth.in_progress == (first.tx_id, second.tx_id, third.tx_id)
    assert fourth.first_short_in_progress == first.tx_id
    assert fourth.is_in_progress(first.tx_id) and not fourth.is_visible(first.tx_id)


def test_long_transactions_are_not_first_short(tx: TransactionClient) -> None:
    long_tx = tx.start_long()
    named = tx.start_long(client_id="compat-long")
    assert long_tx.type is LONG and named.type is LONG
    short = tx.start_short()
    assert short.in_progress == (long_tx.tx_id, named.tx_id)
    assert short.first_short_in_progress == NO_TX_IN_PROGRESS  # long transactions never count as first short
    assert short.visibility_upper_bound == long_tx.tx_id - 1


def test_commit_makes_writes_visible_to_later_transactions(tx: TransactionClient) -> None:
    writer = tx.start_short()
    concurrent = tx.start_short()
    tx.can_commit(writer, [b"orders:1", b"orders:2"])
    tx.commit(writer)
    later = tx.start_short()
    assert later.read_pointer >= writer.write_pointer
    assert later.is_visible(writer.write_pointer)
    assert not concurrent.is_visible(writer.write_pointer)  # its snapshot was taken before the commit
    assert later.in_progress == (concurrent.tx_id,)
    with pytest.raises(TransactionNotInProgress):
        tx.commit(writer)  # only once


def test_conflicts(tx: TransactionClient) -> None:
    first = tx.start_short(client_id="writer-1")
    second = tx.start_short(client_id="writer-2")
    anonymous = tx.start_short()
    tx.can_commit(first, [b"k1", b"k2"])
    tx.commit(first)

    with pytest.raises(TransactionConflict) as raised:
        tx.can_commit(second, [b"k2", b"k3"])
    assert raised.value.tx_id == second.tx_id
    assert raised.value.conflicting_key == b"k2"
    assert raised.value.conflicting_client == "writer-1"  # the client id of the transaction that committed k2
    tx.can_commit(second, [b"k3"])  # a change set without overlap passes
    tx.commit(second)

    with pytest.raises(TransactionConflict) as raised:
        tx.can_commit(anonymous, [b"k3"])
    assert raised.value.conflicting_client == "writer-2"
    tx.abort(anonymous)

    # commitOrThrow checks again: a change committed between can-commit and commit is a conflict too
    slow, fast = tx.start_short(), tx.start_short()
    tx.can_commit(slow, [b"k4"])
    tx.can_commit(fast, [b"k4"])
    tx.commit(fast)
    with pytest.raises(TransactionConflict) as raised:
        tx.commit(slow)
    assert raised.value.tx_id == slow.tx_id and raised.value.conflicting_client == "unknown"
    tx.abort(slow)

    # long transactions have no conflict detection
    long_tx = tx.start_long()
    other = tx.start_short()
    tx.can_commit(other, [b"k5"])
    tx.commit(other)
    tx.can_commit(long_tx, [b"k5"])
    tx.commit(long_tx)


def test_conflicting_key_comes_back_as_the_keys_bytes(tx: TransactionClient) -> None:
    """Tephra sends ``ChangeId.toString()`` (HBase's toStringBinary: \\xHH for bytes outside a printable set);
    the client turns that text back into the key's bytes."""
    for key in [b"\x00\xff", "é".encode(), b"t:r\\1", b"plain-key_1"]:
        first, second = tx.start_short(), tx.start_short()
        tx.can_commit(first, [key])
        tx.commit(first)
        with pytest.raises(TransactionConflict) as raised:
            tx.can_commit(second, [key])
        assert raised.value.conflicting_key == key
        tx.abort(second)


def test_abort(tx: TransactionClient) -> None:
    short = tx.start_short()
    tx.can_commit(short, [b"a"])
    tx.abort(short)  # short: forgotten, not invalid
    after = tx.start_short()
    assert short.tx_id not in after.in_progress and short.tx_id not in after.invalids
    assert tx.invalid_size() == 0
    with pytest.raises(TransactionNotInProgress, match="not in progress"):
        tx.commit(short)

    long_tx = tx.checkpoint(tx.start_long())
    tx.abort(long_tx)  # long: invalid, with its checkpoint pointers
    assert tx.invalid_size() == 2
    assert tx.start_short().invalids == (long_tx.tx_id, long_tx.write_pointer)


def test_invalidate(tx: TransactionClient) -> None:
    victim = tx.start_short()
    assert tx.invalidate(victim.tx_id) is True
    assert tx.invalidate(victim.tx_id) is False  # already invalid
    assert tx.invalidate(12345) is False  # never existed
    with pytest.raises(TransactionNotInProgress, match="known to be invalid"):
        tx.can_commit(victim, [b"x"])
    with pytest.raises(TransactionNotInProgress, match="known to be invalid"):
        tx.commit(victim)
    with pytest.raises(TransactionNotInProgress, match="invalidated"):
        tx.checkpoint(victim)
    later = tx.start_short()
    assert later.invalids == (victim.tx_id,)
    assert not later.is_visible(victim.tx_id)


def test_checkpoint(tx: TransactionClient) -> None:
    start = tx.start_short()
    first = tx.checkpoint(start)
    second = tx.checkpoint(first)
    assert first.tx_id == second.tx_id == start.tx_id
    assert start.tx_id < first.write_pointer < second.write_pointer
    assert second.checkpoint_write_pointers == (first.write_pointer, second.write_pointer)
    assert second.read_pointer == start.read_pointer and second.type is SHORT
    assert all(second.is_visible(p) for p in (start.tx_id, first.write_pointer, second.write_pointer))

    observer = tx.start_short()
    assert observer.in_progress == (start.tx_id, first.write_pointer, second.write_pointer)
    assert not any(observer.is_visible(p) for p in observer.in_progress)

    tx.can_commit(second, [b"c"])
    tx.commit(second)  # commitOrThrow(id, current write pointer)
    after = tx.start_short()
    assert after.in_progress == (observer.tx_id,)
    assert all(after.is_visible(p) for p in (start.tx_id, first.write_pointer, second.write_pointer))


def test_timed_out_short_transaction_becomes_invalid(tx: TransactionClient) -> None:
    doomed = tx.start_short(timeout_seconds=1)  # the server checks every second (TephraCompat.java)
    deadline = time.monotonic() + 10
    while doomed.tx_id not in tx.snapshot().invalid:
        assert time.monotonic() < deadline, "Tephra did not time the transaction out within 10 s"
        time.sleep(0.2)
    with pytest.raises(TransactionNotInProgress, match="known to be invalid"):
        tx.can_commit(doomed, [b"late"])


def test_snapshot_of_real_tephra_decodes(tx: TransactionClient) -> None:
    """Tephra's getSnapshot is SnapshotCodecProvider output (version 4): our decoder reads all of it."""
    empty = tx.snapshot()
    assert (empty.read_pointer, empty.write_pointer, empty.invalid, empty.in_progress) == (0, 0, (), {})

    committed = tx.start_short()
    holder = tx.start_short()  # keeps committed change sets alive (it could still conflict with them)
    long_tx = tx.checkpoint(tx.start_long())
    tx.can_commit(committed, [b"row-1"])
    tx.commit(committed)
    committing = tx.start_short(timeout_seconds=300)
    tx.can_commit(committing, [b"\x00binary\xff"])
    invalid = tx.start_short()
    tx.invalidate(invalid.tx_id)

    raw = tx.snapshot_bytes()
    snap = decode_snapshot(raw)

    assert before_or_now(snap.timestamp)
    assert snap.read_pointer == invalid.tx_id  # Tephra moves the read pointer past an invalidated transaction
    assert snap.write_pointer == invalid.tx_id
    assert snap.invalid == (invalid.tx_id,)
    assert sorted(snap.in_progress) == [holder.tx_id, long_tx.tx_id, long_tx.write_pointer, committing.tx_id]
    entry = snap.in_progress[holder.tx_id]
    assert entry.type is InProgressType.SHORT and entry.visibility_upper_bound == committed.tx_id - 1
    assert before_or_now(entry.expiration - 30_000)  # Tephra's default short timeout is 30 s
    assert snap.in_progress[long_tx.tx_id].type is InProgressType.LONG
    assert snap.in_progress[long_tx.tx_id].checkpoint_write_pointers == (long_tx.write_pointer,)
    assert snap.in_progress[long_tx.write_pointer].type is InProgressType.CHECKPOINT
    assert snap.in_progress[committing.tx_id].expiration - snap.in_progress[holder.tx_id].expiration > 250_000
    assert snap.committing_change_sets == {committing.tx_id: frozenset({b"\x00binary\xff"})}
    # Tephra keys committed change sets by a commit pointer: the last write pointer + 1 at commit time
    assert snap.committed_change_sets == {long_tx.write_pointer + 1: frozenset({b"row-1"})}

    # with at most one key per change set there is no hash-set order to differ: our encoder gives Tephra's bytes
    assert encode_snapshot(snap) == raw


def test_snapshot_with_bigger_change_sets_round_trips(tx: TransactionClient) -> None:
    """Java writes a change set in its HashSet order and we write keys sorted; both decode to the same state."""
    holder = tx.start_short()
    writer = tx.start_short()
    keys = {b"a", b"bb", b"row2", b"row1", b"\x00\xff", bytes(range(256))}
    tx.can_commit(writer, keys)
    tx.commit(writer)
    raw = tx.snapshot_bytes()
    snap = decode_snapshot(raw)
    assert list(snap.committed_change_sets.values()) == [frozenset(keys)]
    assert holder.tx_id in snap.in_progress
    ours = encode_snapshot(snap)
    assert len(ours) == len(raw) and decode_snapshot(ours) == snap


def test_truncate_invalid(tx: TransactionClient) -> None:
    first, second = tx.start_short(), tx.start_short()
    tx.invalidate(first.tx_id)
    tx.invalidate(second.tx_id)
    assert tx.invalid_size() == 2
    assert tx.truncate_invalid([first.tx_id, 4242]) is True  # ids that are not invalid are ignored
    assert tx.snapshot().invalid == (second.tx_id,)
    assert tx.truncate_invalid([first.tx_id]) is False  # nothing removed
    assert tx.truncate_invalid([]) is False

    time.sleep(0.005)  # so that `running` starts in a later millisecond than `second`
    running = tx.start_short()
    with pytest.raises(InvalidTruncateTime, match="in-progress"):
        tx.truncate_invalid_before(running.tx_id // 1_000_000 + 1)
    assert tx.truncate_invalid_before(running.tx_id // 1_000_000) is True  # second started before that ms
    assert tx.invalid_size() == 0
    tx.commit(running)


def before_or_now(ms: int) -> bool:
    return 0 < ms <= time.time() * 1000 + 1000


# -- TransactionCodec against org.apache.tephra.TransactionCodec --------------------------------------------


def spec(tx: Transaction) -> str:
    """A transaction as TephraCompat.java reads and prints it."""

    def join(values: tuple[int, ...]) -> str:
        return ",".join(map(str, values))

    return ":".join(
        [
            str(tx.tx_id),
            str(tx.read_pointer),
            str(tx.write_pointer),
            join(tx.invalids),
            join(tx.in_progress),
            str(tx.first_short_in_progress),
            tx.type.name,
            join(tx.checkpoint_write_pointers),
            tx.visibility_level.name,
        ]
    )


NOW = 1_795_300_000_000_000_000
CODEC_CASES = [
    Transaction(NOW - 10, NOW, (), (), NO_TX_IN_PROGRESS),
    Transaction(NOW - 10, NOW, (NOW - 500, NOW - 400), (NOW - 9, NOW - 5), NOW - 9),
    Transaction(
        NOW - 10,
        NOW,
        (1, 2, 3),
        (NOW - 9,),
        NO_TX_IN_PROGRESS,
        type=LONG,
        checkpoint_write_pointers=(NOW + 1, NOW + 2),
        visibility_level=VisibilityLevel.SNAPSHOT_EXCLUDE_CURRENT,
    ),
    Transaction(NOW, NOW + 5, (), (), NO_TX_IN_PROGRESS, visibility_level=VisibilityLevel.SNAPSHOT_ALL),
    Transaction(NOW, NOW + 5, (), (), NO_TX_IN_PROGRESS, checkpoint_write_pointers=(NOW + 6,), write_pointer=NOW + 5),
    Transaction(LONG_MAX, LONG_MAX, (), (), NO_TX_IN_PROGRESS),  # Tephra's ALL_VISIBLE_LATEST
    Transaction(0, 1, (LONG_MIN, -1, 0), (LONG_MAX,), LONG_MIN, type=LONG, write_pointer=LONG_MIN),
    Transaction(NOW, NOW + 1, range(NOW - 2000, NOW - 1000), range(NOW - 999, NOW), NOW - 999),
]


@pytest.fixture(scope="module")
def java_codec(tephra: Tephra) -> tuple[list[bytes], list[str]]:
    """Java's encoding of every case, and Java's decoding of our encoding of every case (one JVM each)."""
    return tephra.encode(map(spec, CODEC_CASES)), tephra.decode(map(TransactionCodec.encode, CODEC_CASES))


@pytest.mark.parametrize("case", range(len(CODEC_CASES)))
def test_codec_bytes_equal_tephras(java_codec: tuple[list[bytes], list[str]], case: int) -> None:
    tx = CODEC_CASES[case]
    java_bytes, java_decoded = java_codec[0][case], java_codec[1][case]
    assert TransactionCodec.encode(tx) == java_bytes
    assert TransactionCodec.decode(java_bytes) == tx
    assert java_decoded == spec(tx)


def test_codec_on_transactions_from_the_real_server(tephra: Tephra, tx: TransactionClient) -> None:
    """Transactions as real Tephra hands them out (several in progress, invalid, checkpoints, both types)."""
    victim = tx.start_short()
    tx.invalidate(victim.tx_id)
    long_tx = tx.start_long()
    short = tx.start_short(client_id="codec")
    checkpointed = tx.checkpoint(tx.checkpoint(tx.start_short()))
    latest = tx.start_long()
    txs = [long_tx, short, checkpointed, latest, checkpointed.with_visibility(VisibilityLevel.SNAPSHOT_ALL)]
    java = tephra.encode([spec(t) for t in txs])
    assert [TransactionCodec.encode(t) for t in txs] == java
    assert [TransactionCodec.decode(b) for b in java] == txs
    assert tephra.decode([TransactionCodec.encode(t) for t in txs]) == [spec(t) for t in txs]


def test_codec_sorts_pointer_lists_that_java_keeps_in_order_given(tephra: Tephra) -> None:
    """Tephra never builds unsorted lists (it binary-searches them), but its codec would keep one as given; we
    decode to the sorted tuple: the same transaction, and our bytes then list the pointers sorted."""
    unsorted = f"{NOW}:{NOW - 10}:{NOW}:30,10,20:{NOW - 5},{NOW - 9}:{NOW - 9}:SHORT::SNAPSHOT"
    [java_bytes] = tephra.encode([unsorted])
    decoded = TransactionCodec.decode(java_bytes)
    assert decoded.invalids == (10, 20, 30) and decoded.in_progress == (NOW - 9, NOW - 5)
    assert tephra.decode([TransactionCodec.encode(decoded)]) == [spec(decoded)]
    assert len(TransactionCodec.encode(decoded)) == len(java_bytes)
