"""Log configuration of the gateway and uvicorn: that of every daemon (:mod:`tms_hbase.ops.log_options`).

Loggers are named after their modules, as everywhere in the project (``tms_hbase_gateway.app``, ...). Access
lines come from ``tms_hbase_gateway.access`` (one per request, written by :mod:`.access`), their fields as
``extra`` (so JSON lines carry them as keys); uvicorn's own access log is off, because it does not know the
principal, the route or the time taken.
"""

from __future__ import annotations

from typing import Any

from tms_hbase.ops.log_options import logging_config

from .config import Settings


def log_config(settings: Settings) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for uvicorn's ``log_config`` (applied in every worker); ``--json``
    is ``--log-format json``."""
    return logging_config("json" if settings.json_logs else settings.log_format, settings.log_level)
