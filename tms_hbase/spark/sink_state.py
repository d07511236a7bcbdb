"""What a streaming query has written to a topic: one compare-and-set cell per (topic generation, query).

Row ``b"q" + topic key + generation u32 + query id`` of the ``<prefix>_txstate`` table (shared with the
transaction server's ``e``/``s`` rows and the sweeper's ``l``/``r`` rows), cell ``d:q``, holding JSON::

    {"batch": 7, "phase": "open", "run": "<run id>", "tx": "<base64 Tephra transaction>", "tail": null}

``phase`` is the micro-batch's step: ``open`` (tasks store under the transaction's write pointer),
``publishing`` (the pointer row is being published after position ``tail``, then the transaction
committed), ``committed``, or ``aborted``. docs/spark.md has the argument for why a micro-batch is
published once.
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import asdict, dataclass, replace
from typing import Any

from tms_hbase.client import MessagingClient
from tms_hbase.errors import CorruptData, HBaseUnavailable
from tms_hbase.model.tables import FAMILY
from tms_hbase.model.topic import TopicId
from tms_hbase.tx import Transaction, TransactionCodec

KIND = b"q"
COLUMN = f"{FAMILY}:q".encode()
OPEN, PUBLISHING, COMMITTED, ABORTED = "open", "publishing", "committed", "aborted"


@dataclass(frozen=True)
class SinkState:
    """The last micro-batch a query has started writing to a topic, and how far it got."""

    batch: int
    phase: str
    run: str | None = None
    tx: str | None = None  # base64 of the Tephra-encoded transaction
    tail: int | None = None  # publishing: the topic's tail before the pointer row was published

    @classmethod
    def start(cls, batch: int, run: str, tx: Transaction) -> SinkState:
        return cls(batch, OPEN, run, base64.b64encode(TransactionCodec.encode(tx)).decode())

    def transaction(self) -> Transaction | None:
        return None if self.tx is None else TransactionCodec.decode(base64.b64decode(self.tx))

    def open_transaction(self) -> Transaction:
        """The transaction of a batch being written or published (CorruptData if the state has none)."""
        tx = self.transaction()
        if tx is None:
            raise CorruptData(f"sink state {self} of a batch in phase {self.phase} has no transaction")
        return tx

    def publishing_tail(self) -> int:
        """The topic's tail before the pointer row was published (CorruptData if the state has none)."""
        if self.tail is None:
            raise CorruptData(f"sink state {self} in phase {self.phase} has no tail")
        return self.tail

    def moved(self, phase: str, **changes: Any) -> SinkState:
        return replace(self, phase=phase, **changes)

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> SinkState:
        try:
            return cls(**json.loads(data))
        except (ValueError, TypeError) as exc:
            raise CorruptData(f"corrupt Spark sink state {data[:200]!r}: {exc}") from None


class SinkStates:
    """The state cell of one query writing to one topic generation."""

    def __init__(self, client: MessagingClient, topic: TopicId, generation: int, query: str) -> None:
        self.table = client.installation.txstate
        self.key = KIND + topic.key + struct.pack(">I", generation) + query.encode()

    def get(self) -> tuple[bytes | None, SinkState | None]:
        """The stored bytes (for :meth:`swap`) and their state, or (None, None)."""
        raw = self.table.get_cell(self.key, COLUMN)
        return raw, None if raw is None else SinkState.decode(raw)

    def swap(self, expected: bytes | None, new: SinkState) -> bool:
        """Store ``new`` if the cell still holds ``expected``. A lost answer is resolved by reading back:
        every state this module writes differs from the one before it (a new run, transaction or phase)."""
        value = new.encode()
        try:
            return self.table.compare_and_set(self.key, COLUMN, expected, value)
        except HBaseUnavailable:
            return self.get()[0] == value
