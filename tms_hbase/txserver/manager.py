"""A pure, in-memory port of Apache Tephra's TransactionManager, built around replayable edits.

No I/O, threads or clock reads: methods that need the time take ``now_ms``, and the caller (the transaction
server) provides locking and durability. Every state change goes through one edit
(:mod:`tms_hbase.txserver.edits`): a mutating method validates, builds the edit, applies it with the very code
``apply()`` uses for recovery, and queues it. **Convention:** after every call, successful or not, the caller
takes the queued edits with :meth:`TransactionManager.drain_edits`, writes them durably, then answers. Replaying
them in order with :meth:`TransactionManager.apply` on the state they were made from (a fresh manager, or one
``restore()``-d from a snapshot taken at that point) rebuilds the same state.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType

from tms_hbase.errors import (
    CorruptData,
    InvalidArgument,
    InvalidTruncateTime,
    TransactionConflict,
    TransactionNotInProgress,
)
from tms_hbase.model.transaction import NO_TX_IN_PROGRESS, Transaction, TransactionType, check_long
from tms_hbase.tx.pointers import MAX_TX_PER_MS
from tms_hbase.tx.snapshot import InProgressTx, InProgressType, TransactionSnapshot
from tms_hbase.txserver import edits as e

DEFAULT_TIMEOUT_S = 30
DEFAULT_LONG_TIMEOUT_S = 24 * 3600
DEFAULT_MAX_TIMEOUT_S = 2**31 - 1  # Tephra's default limit: Integer.MAX_VALUE seconds
STATUS_OK = "OK"


def _changes(changes: Iterable[bytes]) -> frozenset[bytes]:
    """Freeze a change set given as any iterable of byte strings."""
    if isinstance(changes, str | bytes | bytearray) or not isinstance(changes, Iterable):
        raise InvalidArgument(f"changes must be a collection of bytes, got {type(changes).__name__}")
    out = []
    for change in changes:
        if not isinstance(change, bytes | bytearray | memoryview):
            raise InvalidArgument(f"changes hold a {type(change).__name__}, expected bytes")
        out.append(bytes(change))
    return frozenset(out)


class TransactionManager:
    """Tephra's transaction bookkeeping: pointers, in-progress, invalid, committing and committed change sets."""

    def __init__(
        self,
        *,
        timeout_s: int = DEFAULT_TIMEOUT_S,
        long_timeout_s: int = DEFAULT_LONG_TIMEOUT_S,
        max_timeout_s: int = DEFAULT_MAX_TIMEOUT_S,
    ) -> None:
        """Empty state (pointers 0, as Tephra before start-up); call :meth:`initialize` once the time is known."""
        self.timeout_s = timeout_s
        self.long_timeout_s = long_timeout_s
        self.max_timeout_s = max_timeout_s
        self._pending: list[e.Edit] = []
        self._clear()

    def _clear(self) -> None:
        """Tephra's clear(): everything empty, both pointers zero."""
        self._read_pointer = 0
        self._last_write_pointer = 0
        self._invalid: list[int] = []  # sorted, no duplicates
        self._in_progress: dict[int, InProgressTx] = {}  # pointer -> entry; iterate with _sorted_in_progress()
        self._client_ids: dict[int, str | None] = {}  # in-progress pointer -> client id (Tephra's ACTIVE retention)
        self._committing: dict[int, frozenset[bytes]] = {}  # tx id -> changes that passed canCommit
        self._committed: dict[int, frozenset[bytes]] = {}  # commit pointer -> changes committed there
        # commit pointer -> (client id, changes) of each transaction committed there: conflicts name the client
        self._committed_by: dict[int, list[tuple[str | None, frozenset[bytes]]]] = {}

    # ----------------------------------------------------------------------------------------------- state views

    @property
    def read_pointer(self) -> int:
        """Highest pointer committed (or aborted / invalidated short) so far."""
        return self._read_pointer

    @property
    def last_write_pointer(self) -> int:
        """Last write pointer handed out (a transaction id or a checkpoint pointer)."""
        return self._last_write_pointer

    @property
    def invalid(self) -> tuple[int, ...]:
        """The invalid list, sorted."""
        return tuple(self._invalid)

    @property
    def in_progress(self) -> Mapping[int, InProgressTx]:
        """In-progress pointers (transactions and their checkpoints) in pointer order, read-only."""
        return MappingProxyType(dict(self._sorted_in_progress()))

    @property
    def committing_change_sets(self) -> Mapping[int, frozenset[bytes]]:
        """Transaction id -> change set that passed canCommit and awaits commit, read-only."""
        return MappingProxyType(self._committing)

    @property
    def committed_change_sets(self) -> Mapping[int, frozenset[bytes]]:
        """Commit pointer -> changes committed there, kept while a short transaction could still conflict."""
        return MappingProxyType(self._committed)

    def client_id(self, tx_id: int) -> str | None:
        """Client id given when the in-progress transaction ``tx_id`` started (None if none or not in progress)."""
        return self._client_ids.get(tx_id)

    def invalid_size(self) -> int:
        """Size of the invalid list (Tephra's invalidTxSize)."""
        return len(self._invalid)

    def status(self) -> str:
        """Tephra's status(): "OK" while the manager serves; this in-memory one always does."""
        return STATUS_OK

    def statistics(self) -> str:
        """One line with the sizes of each structure, like Tephra's logStatistics."""
        return (
            f"write pointer = {self._last_write_pointer}, read pointer = {self._read_pointer}, "
            f"invalid = {len(self._invalid)}, in progress = {len(self._in_progress)}, "
            f"committing = {len(self._committing)}, committed = {len(self._committed)}"
        )

    def __repr__(self) -> str:
        """Short summary for logs and debugging."""
        return f"TransactionManager({self.statistics()})"

    # ---------------------------------------------------------------------------------------------------- edits

    def drain_edits(self) -> list[e.Edit]:
        """Return the edits recorded since the last drain, oldest first, and forget them."""
        drained, self._pending = self._pending, []
        return drained

    def _record(self, edit: e.Edit) -> object:
        """Apply ``edit`` exactly as recovery would, queue it for the durable log and return apply's result."""
        result = self.apply(edit)
        self._pending.append(edit)
        return result

    def apply(self, edit: e.Edit) -> object:
        """Replay one edit onto the state (recovery); records nothing. Returns what the live call returned."""
        match edit:
            case e.InProgress():
                self._add_in_progress(
                    edit.write_pointer,
                    InProgressTx(edit.expiration, edit.visibility_upper_bound, InProgressType.of(edit.type)),
                    edit.client_id,
                )
            case e.Committing():
                self._committing[edit.write_pointer] = edit.changes
            case e.Committed():
                self._do_commit(edit)
            case e.Invalid():
                return self._do_invalidate(edit.write_pointer)
            case e.Aborted():
                self._do_abort(edit.write_pointer, edit.checkpoint_write_pointers, edit.type)
            case e.MoveWatermark():
                self._last_write_pointer = max(self._last_write_pointer, edit.write_pointer)
                self._move_read_pointer(edit.write_pointer)
            case e.TruncateInvalid():
                return self._remove_invalid(edit.ids)
            case e.TruncateInvalidBefore():
                bound = edit.time_ms * MAX_TX_PER_MS
                return self._remove_invalid([wp for wp in self._invalid if wp < bound])
            case e.Checkpoint():
                self._do_checkpoint(edit.write_pointer, edit.parent_write_pointer)
            case e.TimedOut():
                self._do_time_out(edit.write_pointers)
            case e.CommitConflict():
                self._committing.pop(edit.write_pointer, None)
            case e.Reset():
                self._clear()
            case _:
                raise InvalidArgument(f"not a transaction edit: {edit!r}")
        return None

    # ------------------------------------------------------------------------------------------------ lifecycle

    def initialize(self, now_ms: int) -> bool:
        """Tephra's start-up step: with no write pointer yet, set both pointers to the next one. True if it did."""
        if self._last_write_pointer != 0:
            return False
        self._record(e.MoveWatermark(self._next_write_pointer(now_ms)))
        return True

    def start_short(self, now_ms: int, timeout_s: int | None = None, client_id: str | None = None) -> Transaction:
        """Start a SHORT transaction expiring ``timeout_s`` (default 30) seconds from ``now_ms``."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int) or timeout_s <= 0:
            raise InvalidArgument(f"timeout must be positive but is {timeout_s!r} seconds")
        if timeout_s > self.max_timeout_s:
            raise InvalidArgument(f"timeout must not exceed {self.max_timeout_s} seconds but is {timeout_s} seconds")
        return self._start(now_ms, now_ms + timeout_s * 1000, TransactionType.SHORT, client_id)

    def start_long(self, now_ms: int, client_id: str | None = None) -> Transaction:
        """Start a LONG transaction: no conflict detection, invalidated on abort, expires after the long timeout."""
        return self._start(now_ms, now_ms + self.long_timeout_s * 1000, TransactionType.LONG, client_id)

    def _start(self, now_ms: int, expiration: int, tx_type: TransactionType, client_id: str | None) -> Transaction:
        """Tephra's startTx: new pointer, snapshot of the state before it, then the InProgress edit."""
        if client_id is not None and not isinstance(client_id, str):
            raise InvalidArgument(f"client id must be a str, got {type(client_id).__name__}")
        tx_id = self._next_write_pointer(now_ms)
        tx = self._create_transaction(tx_id, tx_type)
        self._record(e.InProgress(tx_id, expiration, tx.visibility_upper_bound, tx_type, client_id))
        return tx

    def can_commit(self, tx_id: int, changes: Iterable[bytes]) -> None:
        """Check ``changes`` against change sets committed since ``tx_id`` started, then record them as committing."""
        tx_id = check_long("tx_id", tx_id)
        change_set = _changes(changes)
        self._require_in_progress(tx_id, "canCommit() is called for transaction")
        self._check_conflicts(tx_id, change_set)
        self._record(e.Committing(tx_id, change_set))

    def commit(self, tx_id: int, write_pointer: int) -> None:
        """Tephra's commitOrThrow: re-check conflicts of the committing change set, then commit ``tx_id``."""
        tx_id = check_long("tx_id", tx_id)
        write_pointer = check_long("write_pointer", write_pointer)
        commit_pointer = self._last_write_pointer + 1
        self._require_in_progress(tx_id, "canCommit() is called for transaction")
        changes = self._committing.get(tx_id)
        if changes is not None:
            try:
                self._check_conflicts(tx_id, changes)
            except TransactionConflict:
                # Tephra removes the committing change set even when the commit fails.
                self._record(e.CommitConflict(tx_id))
                raise
        self._record(e.Committed(tx_id, write_pointer, commit_pointer, changes or frozenset(), changes is not None))

    def abort(self, tx: Transaction) -> None:
        """Abort ``tx``: a SHORT one is forgotten (even after timing out), a LONG one becomes invalid."""
        if not isinstance(tx, Transaction):
            raise InvalidArgument(f"expected a Transaction, got {type(tx).__name__}")
        self._record(e.Aborted(tx.tx_id, tx.type, tx.checkpoint_write_pointers))

    def invalidate(self, tx_id: int) -> bool:
        """Move an in-progress or committing transaction (and its checkpoints) to the invalid list."""
        return bool(self._record(e.Invalid(check_long("tx_id", tx_id))))

    def checkpoint(self, tx: Transaction, now_ms: int) -> Transaction:
        """Give in-progress ``tx`` a new write pointer; the copy returned keeps its read snapshot."""
        if not isinstance(tx, Transaction):
            raise InvalidArgument(f"expected a Transaction, got {type(tx).__name__}")
        parent = self._in_progress.get(tx.tx_id)
        if parent is None:
            reason = " because it was invalidated" if self._is_invalid(tx.tx_id) else ""
            raise TransactionNotInProgress(f"Transaction {tx.tx_id} is not in progress{reason}")
        new_pointer = self._next_write_pointer(now_ms)
        self._record(e.Checkpoint(new_pointer, tx.tx_id))
        checkpoints = self._in_progress[tx.tx_id].checkpoint_write_pointers
        return Transaction(
            tx.read_pointer,
            tx.tx_id,
            tx.invalids,
            tx.in_progress,
            tx.first_short_in_progress,
            type=tx.type,
            checkpoint_write_pointers=checkpoints,
            visibility_level=tx.visibility_level,
            write_pointer=new_pointer,
        )

    def timeout_expired(self, now_ms: int) -> list[int]:
        """Tephra's periodic cleanup: invalidate every in-progress pointer past its expiration; returns them sorted.

        An entry times out when ``expiration >= 0 and now_ms > expiration``; a negative expiration (a legacy
        LONG transaction) times out at once. LONG transactions expire after the long timeout like any other.
        """
        now_ms = check_long("now_ms", now_ms)
        expired = sorted(
            wp for wp, entry in self._in_progress.items() if entry.expiration < 0 or now_ms > entry.expiration
        )
        if expired:
            self._record(e.TimedOut(frozenset(expired)))
        return expired

    def truncate_invalid(self, ids: Iterable[int]) -> bool:
        """Remove ``ids`` from the invalid list; True if it changed."""
        return bool(self._record(e.TruncateInvalid(ids)))  # type: ignore[arg-type]  # the edit freezes it

    def truncate_invalid_before(self, time_ms: int) -> bool:
        """Remove invalid ids older than ``time_ms``; InvalidTruncateTime if an older transaction is in progress."""
        time_ms = check_long("time_ms", time_ms)
        bound = time_ms * MAX_TX_PER_MS
        if any(wp < bound for wp in self._in_progress):
            raise InvalidTruncateTime(f"Transactions started earlier than {time_ms} are in-progress")
        return bool(self._record(e.TruncateInvalidBefore(time_ms)))

    def reset(self) -> None:
        """Tephra's resetState(): clear everything, pointers back to zero (call :meth:`initialize` to set them)."""
        self._record(e.Reset())

    # ------------------------------------------------------------------------------------------------ snapshots

    def snapshot(self, now_ms: int) -> TransactionSnapshot:
        """The whole state as Tephra's TransactionSnapshot, stamped ``now_ms`` (client ids are not part of it)."""
        return TransactionSnapshot(
            now_ms,
            self._read_pointer,
            self._last_write_pointer,
            tuple(self._invalid),
            dict(self._sorted_in_progress()),
            dict(self._committing),
            dict(self._committed),
        )

    def restore(self, snapshot: TransactionSnapshot) -> None:
        """Replace the whole state by ``snapshot`` (recovery); pending edits are left alone, client ids are lost."""
        if not isinstance(snapshot, TransactionSnapshot):
            raise InvalidArgument(f"expected a TransactionSnapshot, got {type(snapshot).__name__}")
        self._clear()
        self._read_pointer = snapshot.read_pointer
        self._last_write_pointer = snapshot.write_pointer
        self._invalid = sorted(set(snapshot.invalid))
        self._in_progress = dict(sorted(snapshot.in_progress.items()))
        self._client_ids = dict.fromkeys(self._in_progress)
        self._committing = dict(snapshot.committing_change_sets)
        self._committed = dict(sorted(snapshot.committed_change_sets.items()))

    # -------------------------------------------------------------------------------------------------- helpers

    def _next_write_pointer(self, now_ms: int) -> int:
        """Tephra's getNextWritePointer: sequential, but never below the current time times MAX_TX_PER_MS."""
        now_ms = check_long("now_ms", now_ms)
        return check_long("write pointer", max(self._last_write_pointer + 1, now_ms * MAX_TX_PER_MS))

    def _sorted_in_progress(self) -> list[tuple[int, InProgressTx]]:
        """In-progress entries by pointer (already in order in practice, so the sort is linear)."""
        return sorted(self._in_progress.items())

    def _first_short_in_progress(self) -> int:
        """TxUtils.getFirstShortInProgress: smallest pointer not of a LONG transaction (checkpoints count)."""
        shorts = (wp for wp, entry in self._in_progress.items() if not entry.is_long_running)
        return min(shorts, default=NO_TX_IN_PROGRESS)

    def _create_transaction(self, tx_id: int, tx_type: TransactionType) -> Transaction:
        """Tephra's createTransaction: the read snapshot of a new transaction (itself not yet in progress)."""
        return Transaction(
            self._read_pointer,
            tx_id,
            self._invalid,
            sorted(self._in_progress),
            self._first_short_in_progress(),
            type=tx_type,
        )

    def _is_invalid(self, wp: int) -> bool:
        """Binary search of the invalid list."""
        i = bisect_left(self._invalid, wp)
        return i < len(self._invalid) and self._invalid[i] == wp

    def _add_invalid(self, wp: int) -> None:
        """Add ``wp`` to the sorted invalid list unless it is there already."""
        if not self._is_invalid(wp):
            insort(self._invalid, wp)

    def _remove_invalid(self, ids: Iterable[int]) -> bool:
        """Remove every id given from the invalid list; True if any was there."""
        drop = set(ids) & set(self._invalid)
        if drop:
            self._invalid = [wp for wp in self._invalid if wp not in drop]
        return bool(drop)

    def _require_in_progress(self, tx_id: int, what: str) -> None:
        """Raise TransactionNotInProgress, with Tephra's wording, unless ``tx_id`` is in progress."""
        if tx_id not in self._in_progress:
            reason = " (it is known to be invalid)" if self._is_invalid(tx_id) else ""
            raise TransactionNotInProgress(f"{what} {tx_id} that is not in progress{reason}")

    def _check_conflicts(self, tx_id: int, changes: frozenset[bytes]) -> None:
        """Raise TransactionConflict if a change set committed after ``tx_id`` started overlaps ``changes``."""
        if not changes:
            return
        for commit_pointer in sorted(self._committed):
            if commit_pointer > tx_id:
                overlap = self._committed[commit_pointer] & changes
                if overlap:
                    key = min(overlap)
                    by = self._committed_by.get(commit_pointer, [])  # empty after a restore: snapshots keep no ids
                    client = next((client for client, committed in by if key in committed), None)
                    raise TransactionConflict(tx_id, key, client)

    def _move_read_pointer(self, wp: int) -> None:
        """Tephra's moveReadPointerIfNeeded: the read pointer only goes up."""
        if wp > self._read_pointer:
            self._read_pointer = wp

    def _add_in_progress(self, wp: int, entry: InProgressTx, client_id: str | None) -> None:
        """Tephra's addInProgressAndAdvance."""
        self._in_progress[wp] = entry
        self._client_ids[wp] = client_id
        if wp > self._last_write_pointer:
            self._last_write_pointer = wp

    def _pop_in_progress(self, wp: int) -> InProgressTx | None:
        """Remove an in-progress entry (and its client id); None if it was not there."""
        self._client_ids.pop(wp, None)
        return self._in_progress.pop(wp, None)

    def _do_commit(self, edit: e.Committed) -> None:
        """Tephra's doCommit: record the change set, leave in-progress, move the read pointer, prune old sets."""
        tx_id, write_pointer = edit.write_pointer, edit.current_write_pointer
        self._committing.pop(tx_id, None)
        if edit.can_commit and edit.changes:
            self._committed[edit.commit_pointer] = edit.changes | self._committed.get(edit.commit_pointer, frozenset())
            self._committed_by.setdefault(edit.commit_pointer, []).append((self._client_ids.get(tx_id), edit.changes))
        previous = self._pop_in_progress(tx_id)
        if previous is None:
            self._remove_invalid((tx_id,))  # it had timed out: committing anyway makes it valid again
        elif previous.checkpoint_write_pointers:
            write_pointer = previous.checkpoint_write_pointers[-1]
            for checkpoint in previous.checkpoint_write_pointers:
                self._pop_in_progress(checkpoint)
        self._move_read_pointer(write_pointer)
        # Nothing committed before the first short in-progress transaction can conflict any more.
        first_short = self._first_short_in_progress()
        for commit_pointer in [cp for cp in self._committed if cp < first_short]:
            del self._committed[commit_pointer]
            self._committed_by.pop(commit_pointer, None)

    def _do_abort(self, wp: int, checkpoints: tuple[int, ...], tx_type: TransactionType) -> None:
        """Tephra's doAbort."""
        self._committing.pop(wp, None)
        if tx_type is TransactionType.LONG:
            # A long transaction's writes cannot be rolled back: it stays excluded forever.
            self._do_invalidate(wp)
            return
        remove_checkpoints = True
        if self._pop_in_progress(wp) is None and self._remove_invalid((wp,)):
            # It had timed out: it and its checkpoints are invalid, not in progress.
            remove_checkpoints = False
            self._remove_invalid(checkpoints)
        if remove_checkpoints:
            for checkpoint in checkpoints:
                self._pop_in_progress(checkpoint)
        self._move_read_pointer(wp)

    def _do_invalidate(self, wp: int) -> bool:
        """Tephra's doInvalidate: only an in-progress or committing transaction can become invalid."""
        committing = self._committing.pop(wp, None)
        previous = self._pop_in_progress(wp)
        if previous is None and committing is None:
            return False
        self._add_invalid(wp)
        if previous is not None:
            for checkpoint in previous.checkpoint_write_pointers:
                self._add_invalid(checkpoint)
                self._pop_in_progress(checkpoint)
            if not previous.is_long_running:
                self._move_read_pointer(wp)
        return True

    def _do_checkpoint(self, wp: int, parent_wp: int) -> None:
        """Tephra's doCheckpoint: the parent lists the new pointer, which is tracked in progress too."""
        parent = self._in_progress.get(parent_wp)
        if parent is None:
            raise CorruptData(f"checkpoint {wp} of transaction {parent_wp}, which is not in progress")
        self._in_progress[parent_wp] = replace(
            parent, checkpoint_write_pointers=(*parent.checkpoint_write_pointers, wp)
        )
        entry = InProgressTx(parent.expiration, parent.visibility_upper_bound, InProgressType.CHECKPOINT)
        self._add_in_progress(wp, entry, self._client_ids.get(parent_wp))

    def _do_time_out(self, pointers: Iterable[int]) -> None:
        """Tephra's cleanupTimedOutTransactions: invalid, out of progress; the read pointer does not move."""
        for wp in sorted(pointers):
            self._add_invalid(wp)
            entry = self._pop_in_progress(wp)
            # Tephra keeps the committing set of a checkpoint pointer (treating negative expirations as LONG).
            if entry is not None and (entry.type is not InProgressType.CHECKPOINT or entry.expiration < 0):
                self._committing.pop(wp, None)
