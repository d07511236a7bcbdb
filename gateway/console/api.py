"""The console's HTTP endpoints: its pages and assets, login and logout, and the JSON each screen reads.

Every JSON endpoint authenticates the session cookie (401 without a valid one), checks the topic
against the rules (403), and runs the library calls of :mod:`.views` as the gateway's library calls (``Gateway.run``);
a TmsError becomes the gateway's usual one-line error response. Changes need ``admin`` on the topic
and the CSRF token (:mod:`.session`).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route

from tms_hbase import TopicId
from tms_hbase.errors import InvalidArgument, NotAuthenticated, TmsError
from tms_hbase.rest import codec as rest

from ..auth import ADMIN
from ..bodies import read_body
from ..config import ANY_PRINCIPAL
from ..errors import error_response
from ..service import Gateway
from . import session, views
from .history import History
from .recent import Recent
from .session import Viewer

log = logging.getLogger(__name__)  # tms_hbase_gateway.console.api: the changes made through the console
MAX_FORM_BYTES = 64 * 1024
HEADERS = {
    # the pages load only their own files; payloads shown are text, never markup
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css", ".js": "text/javascript"}
_ASSETS = {
    f.name: f.read_bytes() for f in resources.files(__package__).joinpath("static").iterdir() if f.name[0] != "."
}
Handler = Callable[[Request, Gateway, Viewer], Awaitable[object]]


def api(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A JSON endpoint: the viewer from the session (401/403), the handler's value as JSON."""

    @functools.wraps(handler)
    async def run(request: Request) -> Response:
        gateway: Gateway = request.app.state.gateway
        try:
            viewer = session.viewer(request, gateway.guard)
            data = await handler(request, gateway, viewer)
        except TmsError as error:
            return error_response(request, error)
        return Response(json.dumps(data, separators=(",", ":")), 200, HEADERS, media_type=rest.JSON)

    return run


def _topic(request: Request, viewer: Viewer, check: Callable[[Viewer, str, str], None] = Viewer.check_see) -> TopicId:
    """The path's topic, once the viewer passes ``check`` on it (seeing it, reading its payloads, changing it)."""
    topic = TopicId(request.path_params["namespace"], request.path_params["topic"])
    check(viewer, topic.namespace, topic.topic)
    return topic


def _history(request: Request) -> History:
    state = request.app.state
    if not hasattr(state, "console_history"):
        state.console_history = History()
    history: History = state.console_history
    return history


def _recent(request: Request) -> Recent:
    state = request.app.state
    if not hasattr(state, "console_recent"):
        state.console_recent = Recent()
    recent: Recent = state.console_recent
    return recent


def _as_seen_by(detail: dict, viewer: Viewer) -> dict:
    """A topic's detail with what this viewer may do (the detail itself is shared by all viewers)."""
    return {**detail, "may_change": viewer.may_change(detail["namespace"], detail["topic"])}


async def _json_body(request: Request) -> dict:
    body = await read_body(request, MAX_FORM_BYTES)
    try:
        data = json.loads(body or b"{}")
    except ValueError as exc:
        raise InvalidArgument(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidArgument("the body must be a JSON object")
    return data


# -- pages ---------------------------------------------------------------------------------------


async def page(request: Request) -> Response:
    """The console's one page; without a valid session, the login form instead."""
    gateway: Gateway = request.app.state.gateway
    try:
        session.viewer(request, gateway.guard)
    except NotAuthenticated:
        return RedirectResponse("/console/login", 303, headers=HEADERS)
    return _asset("index.html")


async def login_page(request: Request) -> Response:
    return _asset("login.html")


async def login(request: Request) -> Response:
    """The login form's post: the token becomes the session cookie (see :mod:`.session`)."""
    gateway: Gateway = request.app.state.gateway
    try:
        session.check_origin(request)
        form = parse_qs((await read_body(request, MAX_FORM_BYTES)).decode("utf-8", "replace"))
        token = form.get("token", [""])[0].strip()
        request.state.principal = session.login(gateway.guard, token)
    except NotAuthenticated:
        request.state.error = "NotAuthenticated"
        return RedirectResponse("/console/login?failed=1", 303, headers=HEADERS)
    except TmsError as error:
        return error_response(request, error)
    response = RedirectResponse("/console/", 303, headers=HEADERS)
    options = session.cookie_options(gateway.settings.tls is not None)
    response.set_cookie(session.COOKIE, token, max_age=session.SESSION_SECONDS, **options)
    return response


async def logout(request: Request) -> Response:
    gateway: Gateway = request.app.state.gateway
    try:
        session.viewer(request, gateway.guard)
    except TmsError as error:
        return error_response(request, error)
    response = Response(b"", 200, HEADERS)
    response.delete_cookie(session.COOKIE, **session.cookie_options(gateway.settings.tls is not None))
    return response


async def asset(request: Request) -> Response:
    return _asset(request.path_params["name"])


def _asset(name: str) -> Response:
    data = _ASSETS.get(name)
    suffix = name[name.rfind(".") :]
    if data is None or suffix not in _TYPES:
        return Response(b"no such file\n", 404, HEADERS, media_type="text/plain")
    return Response(data, 200, HEADERS, media_type=_TYPES[suffix])


# -- the screens' data ---------------------------------------------------------------------------


@api
async def whoami(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    rules = gateway.settings.rules
    admin = not rules or any(r.principal in (viewer.principal, ANY_PRINCIPAL) and ADMIN in r.actions for r in rules)
    return {"principal": viewer.principal, "csrf": viewer.csrf, "open": gateway.guard.open, "admin": admin}


@api
async def overview(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    return await gateway.run(views.overview, gateway.client)


@api
async def topics(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    return await gateway.run(views.topic_list, gateway.client, viewer)


@api
async def topic(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer)
    detail = await _recent(request).get(
        str(found), lambda: views.topic_detail(gateway.client, found, _history(request)), gateway.run
    )
    return _as_seen_by(detail, viewer)


@api
async def create_topic(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer, Viewer.check_change)
    properties = _properties(await _json_body(request))

    def work() -> dict:
        gateway.client.admin.require_installation()  # the gateway never creates tables
        gateway.client.create_topic(found, properties)
        return views.topic_detail(gateway.client, found, _history(request))

    detail = await gateway.run(work)
    log.info("console: %s created topic %s with %s", viewer.principal, found, properties)
    return _as_seen_by(_recent(request).put(str(found), detail), viewer)


@api
async def update_topic(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer, Viewer.check_change)
    properties = _properties(await _json_body(request))

    def work() -> dict:
        gateway.client.update_topic(found, properties)
        return views.topic_detail(gateway.client, found, _history(request))

    detail = await gateway.run(work)
    log.info("console: %s set the properties of topic %s to %s", viewer.principal, found, properties)
    return _as_seen_by(_recent(request).put(str(found), detail), viewer)


@api
async def delete_topic(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer, Viewer.check_change)
    await gateway.run(gateway.client.delete_topic, found)
    log.info("console: %s deleted topic %s", viewer.principal, found)
    _recent(request).forget(str(found))
    return {"deleted": str(found)}


def _properties(body: dict) -> dict[str, str]:
    properties = body.get("properties", {})
    if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
        raise InvalidArgument('expected {"properties": {"name": "value", ...}} with string values')
    return properties


@api
async def messages(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer, Viewer.check_read)
    query = request.query_params
    limit = _int(query.get("limit", "100"), "limit")
    from_id = _id(query["id"]) if query.get("id") else None
    from_time = _int(query["time"], "time") if query.get("time") else None
    last = _int(query["last"], "last") if query.get("last") else None
    return await gateway.run(
        lambda: views.messages(gateway.client, found, from_id=from_id, from_time=from_time, last=last, limit=limit)
    )


@api
async def subscription(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer)
    name = request.path_params["name"]
    detail = await gateway.run(views.subscription_detail, gateway.client, viewer, found, name, _history(request))
    return {**detail, "may_change": viewer.may_change(found.namespace, found.topic)}


@api
async def reset_preview(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer, Viewer.check_read)  # it shows the first messages it would move over
    start = _start((await _json_body(request)).get("start"))
    return await gateway.run(views.reset_preview, gateway.client, found, request.path_params["name"], start)


@api
async def reset(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer, Viewer.check_change)
    body = await _json_body(request)
    start, force, name = _start(body.get("start")), body.get("force") is True, request.path_params["name"]

    def work() -> dict:
        if isinstance(start, int):
            gateway.client.reset_subscription(found, name, start_time_ms=start, force=force)
        else:
            gateway.client.reset_subscription(found, name, start, force=force)
        return views.subscription_detail(gateway.client, viewer, found, name, _history(request))

    detail = await gateway.run(work)
    log.info("console: %s reset subscription %s of %s to %r (force=%s)", viewer.principal, name, found, start, force)
    _recent(request).forget(str(found))  # its lag changed
    return {**detail, "may_change": True}


def _dead_letter_topic(gateway: Gateway, topic: TopicId, name: str) -> TopicId:
    """The dead-letter topic of shared subscription ``name`` (InvalidArgument if it has none)."""
    shared = gateway.client.get_subscription(topic, name).shared
    if shared is None or shared.dead_letter is None:
        raise InvalidArgument(f"subscription {name} of {topic} sends no dead letters to a topic")
    return shared.dead_letter


@api
async def replay_preview(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    """What a replay would publish, and to which topics (it shows payloads: reading the dead-letter topic)."""
    found, name = _topic(request, viewer, Viewer.check_change), request.path_params["name"]
    target = await gateway.run(_dead_letter_topic, gateway, found, name)
    viewer.check_read(target.namespace, target.topic)
    letters = await gateway.run(lambda: views.replay_dead_letters(gateway.client, target, dry_run=True))
    return {"dead_letter_topic": str(target), "letters": letters}


@api
async def replay(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    """Publish every dead letter of the subscription's dead-letter topic not replayed yet back to its topic
    (admin on the subscription's topic and on the dead-letter topic, whose subscription marks the replay)."""
    found, name = _topic(request, viewer, Viewer.check_change), request.path_params["name"]
    target = await gateway.run(_dead_letter_topic, gateway, found, name)
    viewer.check_change(target.namespace, target.topic)
    letters = await gateway.run(lambda: views.replay_dead_letters(gateway.client, target, dry_run=False))
    log.info(
        "console: %s replayed %d dead letters of %s to %s",
        viewer.principal,
        len(letters),
        target,
        sorted({letter["topic"] for letter in letters}),
    )
    for topic in {letter["topic"] for letter in letters}:
        _recent(request).forget(topic)  # they have new messages
    return {"dead_letter_topic": str(target), "letters": letters}


@api
async def transactions(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    return await gateway.run(views.transactions, gateway.client, viewer)


@api
async def sweeper(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    return await gateway.run(views.sweeper, gateway.client)


def _start(value: object) -> str | int | bytes:
    """A reset's start: "earliest", "latest", a publish time (ms) or a message id (hex)."""
    if value in ("earliest", "latest"):
        assert isinstance(value, str)
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _id(value)
    raise InvalidArgument(f'bad start {value!r}: expected "earliest", "latest", a time in ms or a message id (hex)')


def _id(text: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise InvalidArgument(f"bad message id {text!r}: expected hex") from None


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidArgument(f"{name}={text!r} is not an integer") from None


TOPIC = "/api/topics/{namespace}/{topic}"
SUBSCRIPTION = TOPIC + "/subscriptions/{name}"
ROUTES = [
    Route("/console", lambda request: RedirectResponse("/console/", 308), methods=["GET"]),
    Mount(
        "/console",
        routes=[
            Route("/", page, methods=["GET"]),
            Route("/login", login_page, methods=["GET"]),
            Route("/login", login, methods=["POST"]),
            Route("/logout", logout, methods=["POST"]),
            Route("/static/{name}", asset, methods=["GET"]),
            Route("/api/session", whoami, methods=["GET"]),
            Route("/api/overview", overview, methods=["GET"]),
            Route("/api/topics", topics, methods=["GET"]),
            Route(TOPIC, topic, methods=["GET"]),
            Route(TOPIC, create_topic, methods=["PUT"]),
            Route(TOPIC, delete_topic, methods=["DELETE"]),
            Route(TOPIC + "/properties", update_topic, methods=["PUT"]),
            Route(TOPIC + "/messages", messages, methods=["GET"]),
            Route(SUBSCRIPTION, subscription, methods=["GET"]),
            Route(SUBSCRIPTION + "/preview", reset_preview, methods=["POST"]),
            Route(SUBSCRIPTION + "/reset", reset, methods=["POST"]),
            Route(SUBSCRIPTION + "/replay/preview", replay_preview, methods=["POST"]),
            Route(SUBSCRIPTION + "/replay", replay, methods=["POST"]),
            Route("/api/transactions", transactions, methods=["GET"]),
            Route("/api/sweeper", sweeper, methods=["GET"]),
        ],
    ),
]
