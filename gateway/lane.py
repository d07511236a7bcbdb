"""The message calls' lane: publish, poll, store, rollback, a consumer's messages and commit, served past
Starlette's router and middleware stack.

They are nearly all of a gateway's traffic, and each is one library call: the layers Starlette puts
around every request (its error middleware, the exception middleware, the router trying each route, the
handler wrapper, each wrapping ``send`` again) cost about as much CPU as the endpoint itself. This ASGI
app matches those routes first (``Route.matches``, as the router would) and calls their endpoints
directly with the same scope (``app``, ``route``, ``path_params``), so ``request.app.state`` and the access
log see what they saw before. Everything else goes to the Starlette app unchanged. An exception other
than a TmsError (which the endpoints answer themselves) is answered as the app's error handler answers
it (500, one line) and raised again for uvicorn to log, as Starlette's error middleware does.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Match, Route
from starlette.types import Receive, Scope, Send

from .errors import unexpected_error


class MessageLane:
    """An ASGI app: ``routes`` served directly, everything else by ``app``."""

    def __init__(self, app: Starlette, routes: Sequence[Route]) -> None:
        self.app = app
        self.routes = tuple(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for route in self.routes:
                match, child = route.matches(scope)
                if match is Match.FULL:
                    scope.update(child)
                    scope["app"], scope["route"] = self.app, route
                    await _serve(route, Request(scope, receive, send), send)
                    return
        await self.app(scope, receive, send)


async def _serve(route: Route, request: Request, send: Send) -> None:
    try:
        response = await route.endpoint(request)
    except Exception as exc:  # the endpoint answered nothing yet
        await (await unexpected_error(request, exc))(request.scope, request.receive, send)
        raise
    await response(request.scope, request.receive, send)
