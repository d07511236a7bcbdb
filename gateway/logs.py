"""Log configuration of the gateway and uvicorn: plain lines, or one JSON object per line (``--json``).

Access lines come from the logger ``gateway.access`` (one per request, written by
:mod:`gateway.access`), with the fields of :data:`ACCESS_FIELDS` as ``extra``; uvicorn's own access log
is off, because it does not know the principal, the route or the time taken.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

ACCESS_FIELDS = ("client", "method", "path", "status", "bytes_in", "bytes_out", "ms", "principal", "error")


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", "pid", ...access fields}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        data.update({name: getattr(record, name) for name in ACCESS_FIELDS if hasattr(record, name)})
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def log_config(json_lines: bool) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for uvicorn's ``log_config`` (applied in every worker)."""
    formatter = (
        {"()": "tms_hbase_gateway.logs.JsonFormatter"}
        if json_lines
        else {"format": "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"}
    )
    handler = {"class": "logging.StreamHandler", "formatter": "default", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {"default": handler},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "gateway": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "tms_hbase": {"handlers": ["default"], "level": "WARNING", "propagate": False},
        },
    }
