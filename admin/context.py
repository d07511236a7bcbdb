"""Connection options shared by every tms-admin command that talks to HBase."""

from __future__ import annotations

from dataclasses import dataclass

import click

from tms_hbase import MessagingClient
from tms_hbase.config import PREFIX_ENV, THRIFT_ENV


@dataclass
class Settings:
    """What the top-level options say about where HBase is."""

    thrift: str | None
    prefix: str | None
    timeout: float

    def client(self) -> MessagingClient:
        return MessagingClient(self.thrift, self.prefix, timeout=self.timeout)


connection_options = [
    click.option(
        "--thrift",
        metavar="HOST:PORT",
        envvar=THRIFT_ENV,
        show_envvar=True,
        help="HBase Thrift gateway [default: 127.0.0.1:9090].",
    ),
    click.option(
        "--prefix",
        envvar=PREFIX_ENV,
        show_envvar=True,
        help="Table-name prefix of this tms-hbase installation [default: tms].",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0.1),
        default=10.0,
        show_default=True,
        help="Seconds any one HBase operation may take, however slowly HBase answers (a deadline, "
        "not a limit per socket read); exit code 5 when it passes.",
    ),
]

pass_settings = click.make_pass_decorator(Settings)
