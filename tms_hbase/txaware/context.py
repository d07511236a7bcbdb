"""TransactionAware participants and the TransactionContext that drives them (Tephra's protocol).

finish(): check the union of the participants' change sets for conflicts → each participant persists
(participants with ``persist_last`` after the others, so readers wait as little as possible) → commit →
post-commit. abort(): every participant rolls back; if all of them could, the transaction is aborted,
otherwise it is invalidated, so whatever stayed behind is never visible.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

from tms_hbase.errors import TmsError, TransactionFailure
from tms_hbase.model.transaction import Transaction
from tms_hbase.tx.client import TransactionClient

log = logging.getLogger(__name__)


@runtime_checkable
class TransactionAware(Protocol):
    """What a participant in a transaction implements (Tephra's TransactionAware)."""

    def start_tx(self, tx: Transaction) -> None: ...

    def update_tx(self, tx: Transaction) -> None: ...

    def get_tx_changes(self) -> Collection[bytes]: ...

    def commit_tx(self) -> bool: ...

    def post_tx_commit(self) -> None: ...

    def rollback_tx(self) -> bool: ...

    @property
    def transaction_aware_name(self) -> str: ...


class TransactionContext:
    """Runs one transaction at a time over a set of participants."""

    def __init__(self, client: TransactionClient, *participants: TransactionAware) -> None:
        self.client = client
        self.participants = list(participants)
        self.tx: Transaction | None = None

    def add(self, participant: TransactionAware) -> None:
        self.participants.append(participant)

    def start(self, timeout_seconds: int | None = None) -> Transaction:
        """Start a short transaction (``timeout_seconds``: the server's default if None) and hand it to
        every participant."""
        return self._begin(self.client.start_short(timeout_seconds))

    def start_long(self) -> Transaction:
        """Start a long transaction (an abort invalidates it)."""
        return self._begin(self.client.start_long())

    def _begin(self, tx: Transaction) -> Transaction:
        self.tx = tx
        for participant in self.participants:
            participant.start_tx(tx)
        return tx

    def checkpoint(self) -> Transaction:
        """A new write pointer for the running transaction; participants are told."""
        self.tx = self.client.checkpoint(self._running())
        for participant in self.participants:
            participant.update_tx(self.tx)
        return self.tx

    def finish(self) -> None:
        """Conflict check, persist, commit, post-commit; on any failure roll back and raise.

        Whatever fails (a conflict, a participant, the transaction server gone at ``can_commit`` or
        ``commit``), the transaction is aborted and the participants are released from it before the
        error is raised, as Tephra's TransactionContext does: nothing done afterwards outside a
        transaction (a plain ``ack()``, ``commit()``) is taken for part of the dead one.
        """
        tx = self._running()
        changes = {change for p in self.participants for change in p.get_tx_changes()}
        try:
            self.client.can_commit(tx, changes)
            for participant in sorted(self.participants, key=lambda p: bool(getattr(p, "persist_last", False))):
                try:
                    persisted = participant.commit_tx()
                except Exception as exc:
                    raise TransactionFailure(f"{participant.transaction_aware_name} failed to persist: {exc}") from exc
                if not persisted:
                    raise TransactionFailure(f"{participant.transaction_aware_name} could not persist its changes")
            self.client.commit(tx)
        except BaseException as exc:
            self._abort_after(exc)
            raise
        for participant in self.participants:
            participant.post_tx_commit()
        self.tx = None

    def abort(self) -> None:
        """Roll every participant back; abort the transaction, or invalidate it if a rollback failed.

        The context and its participants are released from the transaction even when the server cannot
        be told (it then times the transaction out, which makes it invalid: its writes never count)."""
        tx = self._running()
        self.tx = None
        clean = True
        for participant in self.participants:
            try:
                clean = participant.rollback_tx() and clean
            except Exception:
                log.exception("%s failed to roll back", participant.transaction_aware_name)
                clean = False
        if clean:
            self.client.abort(tx)
        else:
            self.client.invalidate(tx.tx_id)

    def _abort_after(self, failure: BaseException) -> None:
        """Abort after ``failure`` ended a commit; an abort that fails too is logged (``failure`` is raised)."""
        try:
            self.abort()
        except TmsError as exc:
            log.warning("transaction ended by %s could not be aborted (%s); it times out as invalid", failure, exc)

    @contextmanager
    def transaction(self, timeout_seconds: int | None = None) -> Iterator[Transaction]:
        """``with ctx.transaction() as tx:`` commits at the end, or aborts if the block raises."""
        tx = self.start(timeout_seconds)
        try:
            yield tx
        except BaseException:
            if self.tx is not None:
                self.abort()
            raise
        self.finish()

    def _running(self) -> Transaction:
        if self.tx is None:
            raise TmsError("no transaction is running in this context")
        return self.tx
