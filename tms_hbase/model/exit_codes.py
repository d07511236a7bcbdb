"""The exit codes of the command-line tools (tms-admin, tms-sweeper): one table for both, by error kind."""

from __future__ import annotations

from tms_hbase.errors import (
    AccessDenied,
    ConcurrentModification,
    InstallationNotFound,
    InvalidArgument,
    LauncherError,
    SubscriptionAlreadyExists,
    SubscriptionBusy,
    SubscriptionNotFound,
    TmsError,
    TopicAlreadyExists,
    TopicNotFound,
    TransactionConflict,
    TransactionNotInProgress,
    Unavailable,
)

# First match wins, so subclasses come before their bases.
EXIT_CODES: list[tuple[type[TmsError], int]] = [
    (InvalidArgument, 2),
    (TopicNotFound, 3),
    (SubscriptionNotFound, 3),
    (TopicAlreadyExists, 4),
    (SubscriptionAlreadyExists, 4),
    (SubscriptionBusy, 4),
    (ConcurrentModification, 4),
    (TransactionConflict, 4),
    (TransactionNotInProgress, 3),
    (Unavailable, 5),
    (AccessDenied, 8),
    (LauncherError, 6),
    (InstallationNotFound, 7),
    (TmsError, 1),
]

EXIT_HELP = (
    "Exit codes: 0 ok, 1 other error, 2 bad input, 3 topic or subscription not found, 4 topic or subscription "
    "exists, subscription busy (another consumer holds its lease) or concurrent change, "
    "5 HBase or the transaction server unreachable (down, hung, too slow for --timeout, or not speaking Thrift), "
    "6 local HBase launcher failed or not installed, 7 no installation with this prefix (run `tms-admin init`), "
    "8 HBase denied this identity a permission (grant its role: tms-admin grants ROLE)."
)


def exit_code(error: TmsError) -> int:
    """The exit code a command ends with after ``error``."""
    return next(code for kind, code in EXIT_CODES if isinstance(error, kind))
