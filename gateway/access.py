"""An ASGI middleware that writes one access log line and records the request metrics per HTTP request."""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .metrics import Metrics

log = logging.getLogger(__name__)  # tms_hbase_gateway.access: the access lines


class Observe:
    """Wraps the app: counts body bytes both ways, takes the status, the route template (not the path, so
    label values stay few), and what the endpoint noted in ``request.state`` (principal, error class)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        seen: dict[str, Any] = {"in": 0, "out": 0, "status": 500}

        async def counting_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                seen["in"] += len(message.get("body", b""))
            return message

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
            elif message["type"] == "http.response.body":
                seen["out"] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, counting_receive, counting_send)
        finally:
            # after the response went out: none of this holds up the caller
            seconds = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", "unmatched")
            state = scope.get("state") or {}
            error = state.get("error", "")
            self.metrics.request(scope["method"], route, seen["status"], seconds, seen["in"], seen["out"], error)
            if log.isEnabledFor(logging.INFO):
                _access_line(scope, seen, seconds, state.get("principal", "-"), error)


def _access_line(scope: Scope, seen: dict[str, Any], seconds: float, principal: str, error: str) -> None:
    """Log one request's line, with its fields as ``extra``. The record is made and handled directly:
    ``log.info`` would also walk the stack for the caller's file and line, which the line does not show."""
    query = scope.get("query_string", b"").decode("latin-1")
    path = scope["path"] + (f"?{query}" if query else "")
    client = scope.get("client")
    fields = {
        "client": f"{client[0]}:{client[1]}" if client else "-",
        "method": scope["method"],
        "path": path,
        "status": seen["status"],
        "bytes_in": seen["in"],
        "bytes_out": seen["out"],
        "ms": round(seconds * 1000, 1),
        "principal": principal,
        "error": error,
    }
    args = (
        fields["client"],
        fields["method"],
        path,
        fields["status"],
        fields["bytes_in"],
        fields["bytes_out"],
        fields["ms"],
        principal,
        f" error={error}" if error else "",
    )
    log.handle(log.makeRecord(log.name, logging.INFO, __file__, 0, _LINE, args, None, extra=fields))


_LINE = '%s "%s %s" %d in=%d out=%d %.1fms principal=%s%s'
