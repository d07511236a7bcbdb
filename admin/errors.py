"""Exit codes and one-line error messages of tms-admin."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from tms_hbase.errors import (
    ConcurrentModification,
    HBaseUnavailable,
    InvalidArgument,
    LauncherError,
    SubscriptionAlreadyExists,
    SubscriptionNotFound,
    TmsError,
    TopicAlreadyExists,
    TopicNotFound,
    TransactionConflict,
    TransactionNotInProgress,
)

# Exit codes, documented in `tms-admin --help`.
EXIT_CODES: list[tuple[type[TmsError], int]] = [
    (InvalidArgument, 2),
    (TopicNotFound, 3),
    (SubscriptionNotFound, 3),
    (TopicAlreadyExists, 4),
    (SubscriptionAlreadyExists, 4),
    (ConcurrentModification, 4),
    (TransactionConflict, 4),
    (TransactionNotInProgress, 3),
    (HBaseUnavailable, 5),
    (LauncherError, 6),
    (TmsError, 1),
]

EXIT_HELP = (
    "Exit codes: 0 ok, 1 other error, 2 bad input, 3 topic or subscription not found, "
    "4 topic or subscription exists, busy (an active consumer) or concurrent change, 5 HBase unreachable, "
    "6 local HBase launcher failed."
)


def exit_code(error: TmsError) -> int:
    return next(code for kind, code in EXIT_CODES if isinstance(error, kind))


def handle_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a TmsError into one line on stderr and the matching exit code (no traceback)."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except TmsError as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(exit_code(error))

    return wrapper
