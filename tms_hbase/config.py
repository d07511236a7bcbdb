"""Connection defaults: the Thrift address and table prefix, from arguments or the environment."""

from __future__ import annotations

import os
import re

from .errors import InvalidArgument

THRIFT_ENV = "TMS_HBASE_THRIFT"
PREFIX_ENV = "TMS_TABLE_PREFIX"
DEFAULT_THRIFT = "127.0.0.1:9090"
DEFAULT_PREFIX = "tms"

# HBase table qualifiers: word characters, '.' and '-', not starting with '.' or '-'.
_PREFIX = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_PORT = re.compile(r"[0-9]{1,5}")  # ASCII digits only: str.isdigit() also accepts '²'


def _setting(explicit: str | None, env: str, default: str) -> str:
    """The argument if given (even empty), else the environment variable if set (even empty), else
    the default: an empty value is a mistake to report, never a silent fall-back to the default."""
    if explicit is not None:
        return explicit
    return os.environ.get(env, default)


def thrift_address(explicit: str | None = None) -> tuple[str, int]:
    """``host:port`` of the HBase Thrift gateway: the argument, ``$TMS_HBASE_THRIFT``, or the default."""
    text = _setting(explicit, THRIFT_ENV, DEFAULT_THRIFT)
    host, sep, port = text.rpartition(":") if isinstance(text, str) else ("", "", "")
    if not sep or not host or not _PORT.fullmatch(port) or not 0 < int(port) < 65536:
        raise InvalidArgument(f"bad HBase Thrift address {text!r}: expected host:port, e.g. 127.0.0.1:9090")
    return host.strip("[]"), int(port)


def table_prefix(explicit: str | None = None) -> str:
    """The table-name prefix: the argument, ``$TMS_TABLE_PREFIX``, or ``tms``. An empty prefix is
    InvalidArgument (it would otherwise mean the shared default installation)."""
    prefix = _setting(explicit, PREFIX_ENV, DEFAULT_PREFIX)
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise InvalidArgument(
            f"bad table prefix {prefix!r}: use 1-64 of the characters A-Z a-z 0-9 _ . -, "
            "starting with a letter, digit or _"
        )
    return prefix
