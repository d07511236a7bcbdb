"""tms-gateway: serve CDAP's messaging REST API over HTTP(S) with uvicorn, backed by the tms_hbase library."""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import sys
import tempfile

import click

from tms_hbase import __version__
from tms_hbase.config import PREFIX_ENV, THRIFT_ENV
from tms_hbase.errors import InvalidArgument
from tms_hbase.ops.cli_options import TRANSPORT_OPTIONS, with_options
from tms_hbase.ops.log_options import log_options

from . import config
from .auth import hash_token, new_token
from .console.logins import SESSIONS_ENV
from .logs import log_config
from .metrics import MULTIPROC_ENV

EXIT_HELP = (
    "Exit codes: 0 stopped (SIGTERM or SIGINT: requests in flight finish first), 1 could not serve "
    "(e.g. the port is taken), 2 bad option or config file."
)


WORKER_HEALTHCHECK_SECONDS = 30


def _print_new_token(ctx: click.Context, _param: click.Parameter, name: str | None) -> None:
    if name is None or ctx.resilient_parsing:
        return
    try:
        config.resolve({"tokens": [{"name": name, "sha256": "0" * 64}]}, {})
    except InvalidArgument as exc:
        raise click.BadParameter(str(exc)) from None
    token = new_token()
    click.echo(f"# give this token to {name} (it is not stored anywhere):\n# {token}\n")
    click.echo(f'[[tokens]]\nname = "{name}"\nsha256 = "{hash_token(token)}"')
    ctx.exit(0)


@click.command(epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", envvar="TMS_GATEWAY_HOST", show_envvar=True, help="Address to listen on [default: 127.0.0.1].")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    envvar="TMS_GATEWAY_PORT",
    show_envvar=True,
    help="Port to listen on [default: 8080].",
)
@click.option(
    "--open-network",
    is_flag=True,
    default=None,
    help="Without [[tokens]], listen on --host even if it is not loopback: anyone who reaches it may do anything.",
)
@click.option(
    "--thrift", metavar="HOST:PORT", envvar=THRIFT_ENV, show_envvar=True, help="HBase Thrift [default: 127.0.0.1:9090]."
)
@click.option("--prefix", envvar=PREFIX_ENV, show_envvar=True, help="Table-name prefix [default: tms].")
@with_options(TRANSPORT_OPTIONS)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    envvar=config.CONFIG_ENV,
    show_envvar=True,
    help="TOML file: any option below, [tls], [[tokens]] and [[rules]] (docs/gateway.md). Flags and env win.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    envvar="TMS_GATEWAY_WORKERS",
    show_envvar=True,
    help="Worker processes, each with its own HBase connections [default: 1].",
)
@click.option(
    "--threads", type=click.IntRange(1, 256), help="Library calls at once per worker (HBase connections) [default: 16]."
)
@click.option("--timeout", type=click.FloatRange(min=0.1), help="Seconds for any one HBase call [default: 10].")
@click.option("--json", "json_logs", is_flag=True, default=None, help="The same as --log-format json.")
@with_options(log_options(defaults=False))
@click.option(
    "--new-token",
    metavar="NAME",
    callback=_print_new_token,
    expose_value=False,
    is_eager=True,
    help="Print a new random token for principal NAME and its [[tokens]] entry, then exit.",
)
@click.version_option(__version__, prog_name="tms-gateway")
def main(config_file: str | None, **options: object) -> None:
    """Serve tms-hbase over HTTP: the REST API of the CDAP TMS design (topics, store, publish, rollback,
    poll under /v1/namespaces/NS), plus GET /health and GET /metrics (Prometheus).

    Bodies are avro/binary or application/json (bytes as base64). With [[tokens]] in the config file
    callers need 'Authorization: Bearer TOKEN'; [[rules]] then allow actions (admin, publish,
    consume) per namespace and topic pattern, denying everything else. [tls] serves HTTPS, optionally
    requiring client certificates. Without [[tokens]] it listens on loopback only unless --open-network.
    Requests a web page could have sent (a foreign Host or Origin, a body that is not Avro, JSON or
    octet-stream) are refused. One access log line per request goes to stderr.
    """
    try:
        settings = config.resolve(config.load(config_file), options)
    except InvalidArgument as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
    sys.exit(serve(settings))


def serve(settings: config.Settings) -> int:
    """Run uvicorn until SIGTERM/SIGINT; returns the exit code."""
    import uvicorn  # here, so --help and --new-token stay fast

    from . import supervisor

    os.environ[config.SETTINGS_ENV] = settings.to_json()
    # Several workers keep their metrics in files, summed by any worker's /metrics. It must be set before a
    # worker imports prometheus_client, which reads it once, at import: this process imported it already,
    # so one worker (served in this process) keeps its metrics in memory, which is all of them.
    own_metrics_dir = settings.workers > 1 and not os.environ.get(MULTIPROC_ENV)
    if own_metrics_dir:
        os.environ[MULTIPROC_ENV] = tempfile.mkdtemp(prefix="tms-gateway-metrics-")
    # the console's sessions, shared by the workers (gateway.console.logins): gone when the gateway stops
    os.environ[SESSIONS_ENV] = sessions = tempfile.mkdtemp(prefix="tms-gateway-sessions-")
    tls = settings.tls
    supervisor.install()  # a dead worker is seen at once, not after the 30-s health check
    # uvicorn serves with handlers of its own and, after a graceful shutdown, raises the signal again
    # with these in place: the process then exits 0 instead of dying of the signal (or a KeyboardInterrupt).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stopped)
    try:
        uvicorn.run(
            "tms_hbase_gateway.app:create_app",
            factory=True,
            http="tms_hbase_gateway.connections:BoundedProtocol",  # deadlines on slow requests, a count per client
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            log_config=log_config(settings),
            access_log=False,  # tms_hbase_gateway.access writes one richer line per request
            timeout_keep_alive=int(settings.keep_alive),
            timeout_graceful_shutdown=int(settings.shutdown_grace),
            # a worker that does not answer the supervisor's ping this long is killed and replaced: uvicorn's
            # 5 s kills workers that a long pause or a loaded machine's slow start holds back, with their sessions
            timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS,
            server_header=False,
            ssl_certfile=tls.cert if tls else None,
            ssl_keyfile=tls.key if tls else None,
            ssl_ca_certs=tls.client_ca if tls else None,
            ssl_cert_reqs=ssl.CERT_REQUIRED if tls and tls.client_ca else ssl.CERT_NONE,
        )
    except SystemExit as exit_:
        return 0 if exit_.code in (0, None) else 1
    finally:
        shutil.rmtree(sessions, ignore_errors=True)
        if own_metrics_dir:
            shutil.rmtree(os.environ[MULTIPROC_ENV], ignore_errors=True)
    return 0


def _stopped(_signum: int, _frame: object) -> None:
    raise SystemExit(0)
