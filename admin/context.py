"""Where the installation is, for every tms-admin command that talks to HBase (the library's shared
connection options: --thrift, --prefix, --timeout)."""

from __future__ import annotations

from dataclasses import dataclass

import click

from tms_hbase import MessagingClient
from tms_hbase.cli_options import config_from_options, connection_options

__all__ = ["Settings", "connection_options", "pass_settings"]


@dataclass
class Settings:
    """What the top-level options say about where HBase is."""

    thrift: str | None
    prefix: str | None
    timeout: float

    def client(self) -> MessagingClient:
        return MessagingClient(config=config_from_options(self.thrift, self.prefix, self.timeout))


pass_settings = click.make_pass_decorator(Settings)
