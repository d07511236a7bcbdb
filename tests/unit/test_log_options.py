"""The daemons' shared log formats (tms_hbase/ops/log_options.py); real processes log through them in
tests/integration/test_daemon_logs.py."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from tms_hbase.ops.log_options import JsonFormatter, logging_config

LOG = logging.getLogger("tms_test.json")


def test_a_json_line_carries_level_logger_message_and_extras() -> None:
    record = LOG.makeRecord(LOG.name, logging.WARNING, __file__, 1, "lost %d of %s", (3, "t"), None, extra={"ms": 1.5})
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "warning" and line["logger"] == "tms_test.json" and line["message"] == "lost 3 of t"
    assert line["ms"] == 1.5 and line["time"].endswith("Z") and isinstance(line["pid"], int)
    assert not {"args", "msg", "exc_info", "levelno"} & line.keys()  # only what a caller added joins the fields


def test_a_json_line_carries_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = LOG.makeRecord(LOG.name, logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "failed" and "ValueError: boom" in line["exception"]


def test_the_config_sets_the_level_and_the_format() -> None:
    config = logging_config("json", "WARNING")
    assert config["root"]["level"] == "WARNING" and config["formatters"]["default"]["()"].endswith("JsonFormatter")
    assert "format" in logging_config("text", "debug")["formatters"]["default"]
    for bad in (("xml", "info"), ("json", "loud")):
        with pytest.raises(ValueError):
            logging_config(*bad)
