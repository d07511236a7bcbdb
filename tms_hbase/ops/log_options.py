"""How every daemon logs: ``--log-format text|json`` and ``--log-level`` (also ``$TMS_LOG_FORMAT`` and
``$TMS_LOG_LEVEL``), one line per record on stderr.

``tms-sweeper run``/``once``, ``tms-admin tx serve``, ``tms-admin metrics serve`` and ``tms-gateway`` take
the same options from here, so their logs look alike and a log shipper parses them all one way. A JSON line
is ``{"time", "level", "logger", "message", "pid", ...}``: the fields a caller passed as ``extra`` (the
gateway's access fields) and ``exception`` (the traceback) when there is one. ``import tms_hbase`` does not
load this module.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import click

LOG_FORMAT_ENV = "TMS_LOG_FORMAT"
LOG_LEVEL_ENV = "TMS_LOG_LEVEL"
FORMATS = ("text", "json")
LEVELS = ("debug", "info", "warning", "error")
DEFAULT_FORMAT, DEFAULT_LEVEL = "text", "info"
TEXT_FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"

# The attributes every LogRecord has; any other one came from a caller's ``extra``. uvicorn's
# color_message repeats the message with terminal colours.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "color_message",
}


def log_options(defaults: bool = True) -> list[Callable[[Any], Any]]:
    """The click options ``--log-format`` and ``--log-level`` (keywords ``log_format``, ``log_level``).

    Without ``defaults`` an option not given is None, for a command that resolves it against a config file
    of its own (the gateway).
    """
    return [
        click.option(
            "--log-format",
            type=click.Choice(FORMATS),
            default=DEFAULT_FORMAT if defaults else None,
            envvar=LOG_FORMAT_ENV,
            show_envvar=True,
            help="Log lines as text, or as one JSON object each (time, level, logger, message, pid, ...) "
            f"[default: {DEFAULT_FORMAT}].",
        ),
        click.option(
            "--log-level",
            type=click.Choice(LEVELS, case_sensitive=False),
            default=DEFAULT_LEVEL if defaults else None,
            envvar=LOG_LEVEL_ENV,
            show_envvar=True,
            help=f"The least severe records logged, by every logger (the library's too) [default: {DEFAULT_LEVEL}].",
        ),
    ]


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON: time (UTC, ms), level (lowercase), logger, message, pid, extras."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        data.update((k, v) for k, v in vars(record).items() if k not in _RECORD_ATTRIBUTES and k not in data)
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def logging_config(log_format: str, log_level: str) -> dict[str, Any]:
    """A :func:`logging.config.dictConfig`: every record at ``log_level`` or above, to stderr, as
    ``log_format`` says (uvicorn takes it as its ``log_config``, applied in each worker process)."""
    if log_format not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {log_format!r}")
    if log_level.lower() not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {log_level!r}")
    formatter = {"()": f"{__name__}.JsonFormatter"} if log_format == "json" else {"format": TEXT_FORMAT}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {
            "default": {"class": "logging.StreamHandler", "formatter": "default", "stream": "ext://sys.stderr"}
        },
        "root": {"handlers": ["default"], "level": log_level.upper()},
    }


def configure_logging(log_format: str, log_level: str) -> None:
    """Log as ``--log-format`` and ``--log-level`` say, in this process."""
    import logging.config  # here: loading it costs a command that logs nothing (--help) several ms

    logging.config.dictConfig(logging_config(log_format, log_level))
