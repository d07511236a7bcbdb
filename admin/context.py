"""Where the installation is, for every tms-admin command that talks to HBase (the library's shared
connection options: --thrift, --prefix, --timeout and the gateways' transport, taken before the command's
name or after it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tms_hbase.ops.cli_options import (
    TRANSPORT_NAMES,
    config_from_options,
    connection_options,
    connection_params,
    connection_values,
)

if TYPE_CHECKING:  # the client (and with it thriftpy2) is imported only when a command runs
    from tms_hbase import MessagingClient

__all__ = ["Settings", "connection_options", "pass_settings"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Settings:
    """What the connection options say about where HBase is; ``given`` holds those given on the
    command line before the command's name (the group's); ``transport`` the transport options
    (:data:`~tms_hbase.ops.cli_options.TRANSPORT_NAMES`)."""

    thrift: str | None
    prefix: str | None
    timeout: float
    given: dict[str, Any] = field(default_factory=dict)
    transport: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, values: dict[str, Any], given: dict[str, Any]) -> Settings:
        """Settings from the connection options' ``values`` (by name)."""
        transport = {name: values[name] for name in TRANSPORT_NAMES if name in values}
        return cls(values["thrift"], values["prefix"], values["timeout"], given, transport)

    def client(self, *, existing: bool = True) -> MessagingClient:
        """A client of the installation. With ``existing`` (every command but ``init``), one that must
        exist already: InstallationNotFound (exit code 7) otherwise, with nothing created, so a mistyped
        --prefix never makes a new installation."""
        from tms_hbase import MessagingClient

        client = MessagingClient(config=config_from_options(self.thrift, self.prefix, self.timeout, **self.transport))
        if existing:
            try:
                client.admin.require_installation()
            except BaseException:
                client.close()
                raise
        return client


def pass_settings(command: F) -> F:
    """Give ``command`` the connection options too (so they may follow its name, where they win over
    the same options given before it) and pass it the resulting :class:`Settings` first."""

    @connection_options
    @click.pass_context
    @wraps(command)
    def wrapper(ctx: click.Context, *args: Any, **kw: Any) -> Any:
        outer = ctx.find_object(Settings)
        given = {} if outer is None else outer.given
        values = connection_values(ctx, given, **connection_params(kw))
        return command(Settings.of(values, given), *args, **kw)

    return wrapper  # type: ignore[return-value]
