"""Tephra-compatible transactions: the :class:`Transaction` snapshot and its enums."""

from .codec import TransactionCodec
from .edits import decode_edit, encode_edit
from .manager import TransactionManager
from .pointers import MAX_LIFETIME_SECONDS, write_pointer_now
from .snapshot import InProgressTx, InProgressType, TransactionSnapshot, decode_snapshot, encode_snapshot
from .transaction import ALL_VISIBLE_LATEST, NO_TX_IN_PROGRESS, Transaction, TransactionType, VisibilityLevel

__all__ = [
    "ALL_VISIBLE_LATEST",
    "MAX_LIFETIME_SECONDS",
    "NO_TX_IN_PROGRESS",
    "InProgressTx",
    "InProgressType",
    "Transaction",
    "TransactionCodec",
    "TransactionManager",
    "TransactionSnapshot",
    "TransactionType",
    "VisibilityLevel",
    "decode_edit",
    "decode_snapshot",
    "encode_edit",
    "encode_snapshot",
    "write_pointer_now",
]
