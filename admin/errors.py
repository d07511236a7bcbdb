"""Exit codes and one-line error messages of tms-admin."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from tms_hbase.errors import TmsError
from tms_hbase.exit_codes import EXIT_HELP, exit_code

__all__ = ["EXIT_HELP", "exit_code", "handle_errors"]


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
