"""The ASGI application (Starlette, the message calls in a lane past it: :mod:`.lane`), built once per worker
process by :func:`create_app`.

``tms-gateway`` runs it with uvicorn (``gateway.app:create_app``, a factory), so each worker builds
its own app and library client (on the worker's event loop) from the settings the CLI resolved.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp

from . import config, console, consuming, routes, shared
from .access import Observe
from .browsers import BrowserGuard
from .errors import http_error, unexpected_error
from .lane import MessageLane
from .metrics import Metrics
from .service import Gateway

log = logging.getLogger(__name__)


def create_app(settings: config.Settings | None = None) -> ASGIApp:
    """The gateway app for ``settings`` (default: those ``tms-gateway`` handed to its workers, else the
    config file in ``$TMS_GATEWAY_CONFIG`` and the environment)."""
    settings = settings or _settings_from_environment()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        gateway = await Gateway.open(settings, metrics)
        if gateway.guard.open and settings.open_network:
            log.warning(
                "no [[tokens]], open_network: anyone who reaches %s:%d may do anything", settings.host, settings.port
            )
        elif gateway.guard.open:
            log.warning("no [[tokens]]: listening on loopback only, where anyone on this machine may do anything")
        app.state.gateway = gateway
        _stop_long_polls_on_signals(gateway)
        try:
            yield
        finally:
            await gateway.close()
            log.info("worker %d stopped", os.getpid())

    message_routes = routes.MESSAGE_ROUTES + consuming.MESSAGE_ROUTES + shared.MESSAGE_ROUTES
    app = Starlette(
        routes=message_routes + routes.ROUTES + consuming.ROUTES + shared.ROUTES + console.ROUTES,
        exception_handlers={HTTPException: http_error, Exception: unexpected_error},
        lifespan=lifespan,
    )
    # the message calls past Starlette's layers (gateway.lane), what browsers are made to send refused before
    # anything (gateway.browsers), every request through the access log
    return Observe(BrowserGuard(MessageLane(app, message_routes), settings), metrics)


def _stop_long_polls_on_signals(gateway: Gateway) -> None:
    """Chain uvicorn's SIGTERM/SIGINT handlers (installed before the lifespan starts) so that waiting
    long-polls answer at once: a graceful shutdown waits for the requests in flight, and they would
    otherwise keep it waiting for their whole ``wait``."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)

        def handler(signum: int, frame: object, previous: object = previous) -> None:
            gateway.stopping.set()
            if callable(previous):
                previous(signum, frame)

        signal.signal(sig, handler)


def _settings_from_environment() -> config.Settings:
    handed = os.environ.get(config.SETTINGS_ENV)
    if handed:
        return config.Settings.from_json(handed)
    overrides = {"thrift": os.environ.get("TMS_HBASE_THRIFT"), "prefix": os.environ.get("TMS_TABLE_PREFIX")}
    return config.resolve(config.load(os.environ.get(config.CONFIG_ENV)), overrides)
