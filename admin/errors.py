"""Exit codes and one-line error messages of tms-admin: the library's, shared with tms-sweeper."""

from __future__ import annotations

from tms_hbase.cli_options import handle_errors
from tms_hbase.exit_codes import EXIT_HELP, exit_code

__all__ = ["EXIT_HELP", "exit_code", "handle_errors"]
