"""Tephra-compatible transactions: the :class:`Transaction` snapshot and its enums."""

from .transaction import ALL_VISIBLE_LATEST, NO_TX_IN_PROGRESS, Transaction, TransactionType, VisibilityLevel

__all__ = ["ALL_VISIBLE_LATEST", "NO_TX_IN_PROGRESS", "Transaction", "TransactionType", "VisibilityLevel"]
