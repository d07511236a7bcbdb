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


def thrift_address(explicit: str | None = None) -> tuple[str, int]:
    """``host:port`` of the HBase Thrift gateway: the argument, ``$TMS_HBASE_THRIFT``, or the default."""
    text = explicit or os.environ.get(THRIFT_ENV) or DEFAULT_THRIFT
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgument(f"bad HBase Thrift address {text!r}: expected host:port, e.g. 127.0.0.1:9090")
    return host.strip("[]"), int(port)


def table_prefix(explicit: str | None = None) -> str:
    """The table-name prefix: the argument, ``$TMS_TABLE_PREFIX``, or ``tms``."""
    prefix = explicit or os.environ.get(PREFIX_ENV) or DEFAULT_PREFIX
    if not _PREFIX.fullmatch(prefix):
        raise InvalidArgument(
            f"bad table prefix {prefix!r}: use 1-64 of the characters A-Z a-z 0-9 _ . -, "
            "starting with a letter, digit or _"
        )
    return prefix
