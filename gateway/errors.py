"""Error responses: one line of plain text, the status from the one table in
:mod:`tms_hbase.rest.codec`, and the error's class name in the ``TMS-Error`` header (what
:mod:`tms_hbase.gateway_client.http` maps back to the same class)."""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from tms_hbase.errors import TmsError
from tms_hbase.rest import codec as rest

log = logging.getLogger(__name__)


def error_response(request: Request, error: TmsError) -> Response:
    """The response for a TmsError; the class name is noted for the access log and metrics."""
    status = rest.status_of(error)
    name = type(error).__name__
    request.state.error = name
    if status >= 500:
        log.warning("%s %s: %s: %s", request.method, request.url.path, name, error)
    headers = {rest.ERROR_HEADER: name}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="tms"'
    return PlainTextResponse(one_line(str(error)), status, headers)


def client_gone(request: Request) -> Response:
    """The answer to a request whose client closed the connection first (in the middle of its body, or
    during a long-poll): nothing is sent; the access log and metrics show 499 (as nginx logs it) and
    error ``ClientDisconnected``, not a server error."""
    request.state.error = "ClientDisconnected"
    return Response(status_code=499)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no such path, method not allowed) as one line of text."""
    assert isinstance(exc, HTTPException)
    request.state.error = "HTTPException"
    return PlainTextResponse(one_line(f"{exc.detail}: {request.method} {request.url.path}"), exc.status_code)


async def unexpected_error(request: Request, exc: Exception) -> Response:
    """A bug: answered with one line (uvicorn logs the traceback)."""
    request.state.error = type(exc).__name__
    return PlainTextResponse(f"internal error: {type(exc).__name__}\n", 500)


def one_line(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else "error"
    return first[:1000] + "\n"
