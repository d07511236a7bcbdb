"""Where the installation is, for every tms-admin command that talks to HBase (the library's shared
connection options: --thrift, --prefix, --timeout)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from tms_hbase.cli_options import config_from_options, connection_options

if TYPE_CHECKING:  # the client (and with it happybase and thriftpy2) is imported only when a command runs
    from tms_hbase import MessagingClient

__all__ = ["Settings", "connection_options", "pass_settings"]


@dataclass
class Settings:
    """What the top-level options say about where HBase is."""

    thrift: str | None
    prefix: str | None
    timeout: float

    def client(self, *, existing: bool = True) -> MessagingClient:
        """A client of the installation. With ``existing`` (every command but ``init``), one that must
        exist already: InstallationNotFound (exit code 7) otherwise, with nothing created, so a mistyped
        --prefix never makes a new installation."""
        from tms_hbase import MessagingClient

        client = MessagingClient(config=config_from_options(self.thrift, self.prefix, self.timeout))
        if existing:
            try:
                client.require_installation()
            except BaseException:
                client.close()
                raise
        return client


pass_settings = click.make_pass_decorator(Settings)
