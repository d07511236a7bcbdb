"""Exit codes and one-line error messages of tms-admin: the library's, shared with tms-sweeper."""

from __future__ import annotations

from tms_hbase.model.exit_codes import EXIT_HELP, exit_code
from tms_hbase.ops.cli_options import handle_errors

__all__ = ["EXIT_HELP", "exit_code", "handle_errors"]
