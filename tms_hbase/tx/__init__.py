"""Tephra-compatible transactions: the types, Tephra's codecs and the client.

Importing this package loads only the data types (:class:`Transaction` and its enums, defined in
:mod:`tms_hbase.model.transaction`), which every reader needs. The codecs load on first use, so a plain
``import tms_hbase`` never loads thriftpy2: :class:`TransactionCodec` (Tephra's bytes) and the snapshot codec.
The client, the port to the transaction server, is ``tx.client``, imported by name. Built on them:
:mod:`tms_hbase.txaware` (TransactionContext, TransactionalTable), :mod:`tms_hbase.client_tx` (transactional
messaging), :mod:`tms_hbase.isolation` (what readers judge transactional rows by), :mod:`tms_hbase.txserver`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tms_hbase.model.transaction import (
    ALL_VISIBLE_LATEST,
    NO_TX_IN_PROGRESS,
    Transaction,
    TransactionType,
    VisibilityLevel,
)
from tms_hbase.tx.pointers import MAX_LIFETIME_SECONDS, write_pointer_now

if TYPE_CHECKING:
    from tms_hbase.tx.codec import TransactionCodec
    from tms_hbase.tx.snapshot import (
        InProgressTx,
        InProgressType,
        TransactionSnapshot,
        decode_snapshot,
        encode_snapshot,
    )

# name -> submodule that defines it, imported when the name is first asked for
_LAZY = {
    "TransactionCodec": "codec",
    "InProgressTx": "snapshot",
    "InProgressType": "snapshot",
    "TransactionSnapshot": "snapshot",
    "decode_snapshot": "snapshot",
    "encode_snapshot": "snapshot",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "ALL_VISIBLE_LATEST",
    "MAX_LIFETIME_SECONDS",
    "NO_TX_IN_PROGRESS",
    "InProgressTx",
    "InProgressType",
    "Transaction",
    "TransactionCodec",
    "TransactionSnapshot",
    "TransactionType",
    "VisibilityLevel",
    "decode_snapshot",
    "encode_snapshot",
    "write_pointer_now",
]
