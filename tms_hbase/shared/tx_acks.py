"""Acknowledgements of a shared subscription in a Tephra transaction (docs/shared.md, "Transactional
acknowledgements"): exactly-once for a handler that writes or publishes transactionally.

An ack in a transaction is written at persist time as **pending**: the claim cell as this consumer holds
it, with the transaction's write pointer in its ``tx`` field (a compare-and-set, refused with NotHeld if
the consumer does not hold the message then). A pending claim is neither deliverable nor settleable; it
is resolved by the transaction's fate (:mod:`~tms_hbase.isolation.fate`), as exclusive consumers' pending marks
are:

* the consumer folds it into ``acked`` after the commit (``post_tx_commit``);
* before an abort the consumer puts the claim back as it was (``rollback_tx``); if it cannot, the
  transaction context invalidates the transaction instead;
* a consumer that died on the way leaves it pending; every reaper resolves pending claims whose
  delivery deadline has passed: committed → acknowledged, invalid (Tephra times every transaction out)
  → held as before, so past its deadline it is delivered again; in progress → left alone.

So a message is acknowledged exactly when the transaction that did its work commits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import replace

from tms_hbase.errors import TmsError
from tms_hbase.isolation.fate import TxFate, fate
from tms_hbase.model.message import DeliveryRef
from tms_hbase.model.transaction import Transaction
from tms_hbase.shared.state import Claim, ClaimState, Keys
from tms_hbase.shared.store import SharedStore, StoredClaim

log = logging.getLogger(__name__)
CHANGE_PREFIX = b"tms-shared-claim:"  # a transaction's change set names the claims it acknowledges


class TransactionalAcks:
    """The TransactionAware side of :class:`~tms_hbase.shared.consumer.SharedConsumer` (a mixin: it uses
    the consumer's store, keys, held claims and ``_settle``)."""

    _store: SharedStore
    _held: dict[bytes, StoredClaim]
    _tx_state: Callable[[], Transaction] | None
    _tx: Transaction | None
    _tx_acks: dict[bytes, DeliveryRef]  # acks of the running transaction (by message id), persisted at commit
    _tx_pending: list[StoredClaim]  # claims written as pending for it
    _in_context: bool  # the transaction is a TransactionContext's (not one given to ack())

    @property
    def _keys(self) -> Keys:
        raise NotImplementedError

    def _settle(self, ref: DeliveryRef, step: Callable[[Claim, int], Claim]) -> StoredClaim:
        raise NotImplementedError

    def _next_of_key(self, settled: StoredClaim) -> None:
        raise NotImplementedError

    def _init_tx(self, tx_state: Callable[[], Transaction] | None) -> None:
        self._tx_state, self._tx, self._tx_acks, self._tx_pending, self._in_context = tx_state, None, {}, [], False

    # -- TransactionAware -----------------------------------------------------------------------

    @property
    def transaction_aware_name(self) -> str:
        return f"shared consumer {self!r}"

    def start_tx(self, tx: Transaction) -> None:
        """From now on ``ack()`` is part of ``tx``, written when it persists."""
        self._tx, self._tx_acks, self._tx_pending, self._in_context = tx, {}, [], True

    def update_tx(self, tx: Transaction) -> None:
        self._tx = tx

    def get_tx_changes(self) -> Collection[bytes]:
        """The claims it acknowledges: two transactions acknowledging one message conflict."""
        return [CHANGE_PREFIX + self._keys.claim(message_id) for message_id in self._tx_acks]

    def commit_tx(self) -> bool:
        """Persist: write each acknowledgement as pending with the transaction's write pointer (NotHeld
        for a message this consumer does not hold any more: the transaction then fails)."""
        if self._tx is not None and self._tx_acks:
            self._persist(self._tx, list(self._tx_acks.values()))
        return True

    def post_tx_commit(self) -> None:
        """The transaction committed: its acknowledgements count. Fold them (if that fails, a reaper
        resolves them the same way after their deadline); in key order, each key's next message goes out
        from here next."""
        pending, self._tx, self._tx_acks, self._tx_pending = self._tx_pending, None, {}, []
        self._in_context = False
        for stored in pending:
            acked = replace(stored.claim, state=ClaimState.ACKED, tx=None)
            try:
                won = self._store.swap_claim(self._keys, stored.message_id, stored.data, acked)
            except TmsError as exc:
                log.info("%r: acknowledgement left pending (%s); it is resolved later", self, exc)
                continue
            if won is not None:
                self._next_of_key(won)

    def rollback_tx(self) -> bool:
        """Put the pending claims back as they were (before the transaction aborts), still held by this
        consumer until their deadline; False if one could not be (the transaction is then invalidated)."""
        tx, touched = self._tx, list(self._tx_acks)
        self._tx, self._tx_acks, self._tx_pending, self._in_context = None, {}, [], False
        if tx is None:
            return True
        clean = True
        for message_id in touched:
            try:
                current = self._store.read_claim(self._keys, message_id)
                if current is None or current.claim.tx != tx.write_pointer:
                    continue  # never written as pending (or its answer was lost before it was)
                back = self._store.swap_claim(self._keys, message_id, current.data, replace(current.claim, tx=None))
                if back is None:
                    clean = False
                else:
                    self._held[message_id] = back
            except TmsError as exc:
                log.warning("%r: could not take back a pending acknowledgement (%s)", self, exc)
                clean = False
        return clean

    # -- the work -------------------------------------------------------------------------------

    def _ack_in(self, tx: Transaction | None, refs: list[DeliveryRef]) -> None:
        """``ack(..., transaction=tx)`` writes them pending now; inside a context they wait for its commit."""
        if tx is not None and (self._tx is None or self._tx.tx_id != tx.tx_id):
            self.start_tx(tx)
            self._in_context = False
        for ref in refs:
            self._tx_acks.setdefault(ref.id, ref)
        if tx is not None:
            self._persist(tx, refs)

    def _persist(self, tx: Transaction, refs: list[DeliveryRef]) -> None:
        """Write each as pending in ``tx`` if this delivery of it is still held here (NotHeld if not)."""
        done = {stored.message_id for stored in self._tx_pending}
        for ref in {r.id: r for r in refs}.values():
            if ref.id not in done:
                self._tx_pending.append(self._settle(ref, lambda c, now: replace(c, tx=tx.write_pointer)))

    def _resolve(self, claims: list[StoredClaim], now: int) -> list[StoredClaim]:
        """Settle the pending acknowledgements past their delivery deadline by their transactions' fate
        (one read of the transaction state, only when there are some); returns the claims as they are now."""
        stuck = [c for c in claims if c.claim.tx is not None and c.claim.deadline <= now]
        if not stuck or self._tx_state is None:
            return claims
        snapshot = self._tx_state()
        changed: dict[bytes, StoredClaim] = {}
        for stored in stuck:
            assert stored.claim.tx is not None
            outcome = fate(snapshot, stored.claim.tx)
            if outcome is TxFate.IN_PROGRESS:
                continue
            state = ClaimState.ACKED if outcome is TxFate.COMMITTED else stored.claim.state
            won = self._store.swap_claim(
                self._keys, stored.message_id, stored.data, replace(stored.claim, state=state, tx=None)
            )
            if won is not None:
                changed[stored.message_id] = won
                log.info("%r: pending acknowledgement of %s resolved: %s", self, stored.message_id.hex(), outcome.value)
        return [changed.get(c.message_id, c) for c in claims]
