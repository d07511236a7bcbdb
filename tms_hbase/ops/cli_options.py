"""What the command-line tools share: the options that say where an installation is (``--thrift``,
``--prefix``, ``--timeout``, also from ``$TMS_HBASE_THRIFT`` / ``$TMS_TABLE_PREFIX``) and how its Thrift
gateways serve (``--thrift-framed``, ``--thrift-compact``, ``--thrift-http``, ``--thrift-tls`` and its files,
``--thrift-kerberos`` and its identity), the
:class:`~tms_hbase.config.Config` they make, and one-line errors with the exit codes of
:mod:`tms_hbase.model.exit_codes`.

``tms-admin`` and ``tms-sweeper`` both use it (neither imports the other); ``import tms_hbase`` does
not load it.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn, TypeVar

import click

from tms_hbase.config import PREFIX_ENV, QOPS, THRIFT_ENV, TRANSPORT_ENV, Config, ThriftTransport
from tms_hbase.errors import TmsError
from tms_hbase.model.exit_codes import exit_code

F = TypeVar("F", bound=Callable[..., Any])

CONNECTION_OPTIONS = [
    click.option(
        "--thrift",
        metavar="HOST:PORT[,HOST:PORT...]",
        envvar=THRIFT_ENV,
        show_envvar=True,
        help="HBase Thrift gateway; with several, the next is used when one cannot be reached "
        "[default: 127.0.0.1:9090].",
    ),
    click.option(
        "--prefix",
        envvar=PREFIX_ENV,
        show_envvar=True,
        help="Table-name prefix of the tms-hbase installation [default: tms].",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0.1),
        default=10.0,
        show_default=True,
        help="Seconds any one HBase operation may take (a command's call, a sweep chunk's scan or deletes), "
        "however slowly HBase answers: a deadline, not a limit per socket read; exit code 5 when it passes.",
    ),
]
TRANSPORT_OPTIONS = [
    click.option(
        "--thrift-framed/--thrift-buffered",
        "thrift_framed",
        default=None,
        help="The gateways serve the framed transport (HBase's hbase.regionserver.thrift.framed) or the buffered "
        f"one [env {TRANSPORT_ENV['framed']}=1; default: buffered].",
    ),
    click.option(
        "--thrift-compact/--thrift-binary",
        "thrift_compact",
        default=None,
        help="The gateways serve the compact protocol (hbase.regionserver.thrift.compact) or the binary one "
        f"[env {TRANSPORT_ENV['compact']}=1; default: binary].",
    ),
    click.option(
        "--thrift-http/--no-thrift-http",
        "thrift_http",
        default=None,
        help="The gateways serve the HTTP transport (hbase.regionserver.thrift.http; with --thrift-tls: HTTPS) "
        f"[env {TRANSPORT_ENV['http']}=1; default: off].",
    ),
    click.option(
        "--thrift-tls/--no-thrift-tls",
        "thrift_tls",
        default=None,
        help="Speak TLS to the gateways, verifying their certificates and host names "
        f"[env {TRANSPORT_ENV['tls']}=1; default: off].",
    ),
    click.option(
        "--thrift-ca",
        metavar="PEM",
        help=f"CA certificates the gateways' certificates must chain to [env {TRANSPORT_ENV['ca_file']}; "
        "default: the system's].",
    ),
    click.option(
        "--thrift-cert",
        metavar="PEM",
        help=f"Client certificate to present (its key inside, or --thrift-key) [env {TRANSPORT_ENV['cert_file']}].",
    ),
    click.option(
        "--thrift-key", metavar="PEM", help=f"The client certificate's key [env {TRANSPORT_ENV['key_file']}]."
    ),
    click.option(
        "--thrift-kerberos/--no-thrift-kerberos",
        "thrift_kerberos",
        default=None,
        help="Authenticate to the gateways with Kerberos: SASL/GSSAPI on the binary transport, SPNEGO on HTTP "
        f"(the kerberos extra) [env {TRANSPORT_ENV['kerberos']}=1; default: off].",
    ),
    click.option(
        "--thrift-qop",
        type=click.Choice(QOPS),
        help="SASL quality of protection, as the gateways' hbase.thrift.security.qop: authentication, integrity "
        f"or confidentiality [env {TRANSPORT_ENV['kerberos_qop']}; default: auth].",
    ),
    click.option(
        "--thrift-kerberos-service",
        metavar="NAME",
        help="First part of the gateways' principal NAME/HOST, HOST as --thrift names them "
        f"[env {TRANSPORT_ENV['kerberos_service']}; default: hbase, over HTTP: HTTP].",
    ),
    click.option(
        "--thrift-keytab",
        metavar="FILE",
        help=f"Keytab of --thrift-principal, tickets renewed from it [env {TRANSPORT_ENV['keytab']}; "
        "default: the ticket cache, kinit's].",
    ),
    click.option(
        "--thrift-principal",
        metavar="NAME@REALM",
        help=f"The client's Kerberos principal [env {TRANSPORT_ENV['principal']}; default: the ticket cache's].",
    ),
]
"""How the gateways serve: framed, buffered or HTTP transport, compact or binary protocol, TLS and its files,
Kerberos."""
CONNECTION_OPTIONS += TRANSPORT_OPTIONS
"""``--thrift``, ``--prefix``, ``--timeout`` and :data:`TRANSPORT_OPTIONS`, in that order (the command gets
them as keywords)."""


def with_options(options: list[Callable[[F], F]]) -> Callable[[F], F]:
    """A decorator adding click ``options`` to a command, in list order."""

    def decorate(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


connection_options = with_options(CONNECTION_OPTIONS)
"""Adds :data:`CONNECTION_OPTIONS` to a command or group."""


TRANSPORT_NAMES = (
    "thrift_framed",
    "thrift_compact",
    "thrift_http",
    "thrift_tls",
    "thrift_ca",
    "thrift_cert",
    "thrift_key",
    "thrift_kerberos",
    "thrift_qop",
    "thrift_kerberos_service",
    "thrift_keytab",
    "thrift_principal",
)
CONNECTION_NAMES = ("thrift", "prefix", "timeout", *TRANSPORT_NAMES)


def connection_params(params: dict[str, Any]) -> dict[str, Any]:
    """The connection options' values, taken out of a command's ``params``."""
    return {name: params.pop(name) for name in CONNECTION_NAMES if name in params}


def given_on_command_line(ctx: click.Context, names: tuple[str, ...] = CONNECTION_NAMES) -> dict[str, Any]:
    """The values of ``names`` that ``ctx``'s command line gave (not the environment, a config file or
    a default)."""
    return {
        name: ctx.params[name]
        for name in names
        if name in ctx.params and ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
    }


def connection_values(ctx: click.Context, outer: dict[str, Any], **inner: Any) -> dict[str, Any]:
    """The connection options (:data:`CONNECTION_NAMES`) for a subcommand that takes them and whose group
    takes them too (before the subcommand's name): given after the subcommand wins, then given before it
    (``outer``, :func:`given_on_command_line` of the group), then the environment or the default."""
    mine = given_on_command_line(ctx)
    return {n: mine[n] if n in mine else outer.get(n, inner[n]) for n in CONNECTION_NAMES}


def config_from_options(
    thrift: str | None,
    prefix: str | None,
    timeout: float,
    *,
    thrift_framed: bool | None = None,
    thrift_compact: bool | None = None,
    thrift_http: bool | None = None,
    thrift_tls: bool | None = None,
    thrift_ca: str | None = None,
    thrift_cert: str | None = None,
    thrift_key: str | None = None,
    thrift_kerberos: bool | None = None,
    thrift_qop: str | None = None,
    thrift_kerberos_service: str | None = None,
    thrift_keytab: str | None = None,
    thrift_principal: str | None = None,
) -> Config:
    """The Config the connection options describe (InvalidArgument for a bad address, prefix or transport);
    what they leave out comes from the environment or the defaults."""
    transport = ThriftTransport.resolve(
        framed=thrift_framed,
        compact=thrift_compact,
        http=thrift_http,
        tls=thrift_tls,
        ca_file=thrift_ca,
        cert_file=thrift_cert,
        key_file=thrift_key,
        kerberos=thrift_kerberos,
        kerberos_qop=thrift_qop,
        kerberos_service=thrift_kerberos_service,
        keytab=thrift_keytab,
        principal=thrift_principal,
    )
    return Config.resolve(thrift, prefix, timeout_seconds=timeout, transport=transport)


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when one is run or its help is asked for, so that
    ``--help``, ``--version`` and a single command load no more than they use (every import of a command
    module costs start-up time: a storage or metrics library takes tens of milliseconds).

    ``lazy`` maps a subcommand's name to ``("module:attribute", summary)``; the summary is its line in
    the group's help, listed without importing it, and becomes the command's ``short_help`` when it is
    loaded, so the two never differ.
    """

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            where, summary = self.lazy[cmd_name]
            module, attribute = where.split(":")
            command = getattr(importlib.import_module(module), attribute)
            command.short_help = summary
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The subcommands with their summaries, as click lists them, without importing lazy ones."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)
        rows = []
        for name in names:
            if name not in self.commands and name in self.lazy:
                rows.append((name, self.lazy[name][1]))
            elif (command := self.get_command(ctx, name)) is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class ToolGroup(LazyGroup):
    """The top-level group of a command-line tool: every error is one line on stderr, usage errors
    included (``error: Missing argument 'NAMESPACE:TOPIC'. (see 'tms-admin topic create --help')``,
    exit code 2), and output cut short by a closed pipe (``tms-admin topic tail ... | head``) ends the
    command quietly with exit code 0."""

    def main(self, *args: Any, **kwargs: Any) -> NoReturn:
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:  # a group named without a command: its help
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            click.echo(f"error: {exc.format_message()}{where}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("aborted", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # (click itself would end with exit code 1)
            _quiet_stdout()
            ctx.exit(0)


def _quiet_stdout() -> None:
    """The reader of stdout went away: send what is still buffered nowhere, so the interpreter's last
    flush raises nothing either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def fail(error: TmsError) -> NoReturn:
    """End the command with ``error`` as one line on stderr and its exit code (never a traceback)."""
    click.echo(f"error: {error}", err=True)
    sys.exit(exit_code(error))


def handle_errors(command: F) -> F:
    """Run ``command``, turning a TmsError into :func:`fail`."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except TmsError as error:
            fail(error)

    return wrapper  # type: ignore[return-value]
