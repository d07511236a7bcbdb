"""The console's HTTP endpoints: its pages and assets, login and logout, and the JSON each screen reads.

Every JSON endpoint authenticates the session cookie (401 without a valid one), checks the topic
against the rules (403), and runs the library calls of :mod:`.views` as the gateway's library calls (``Gateway.run``);
a TmsError becomes the gateway's usual one-line error response. Changes need ``admin`` on the topic
and the CSRF token (:mod:`.session`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from tms_hbase import TopicId, TopicMetadata
from tms_hbase.errors import InvalidArgument, NotAuthenticated, TmsError, TopicNotFound
from tms_hbase.rest import codec as rest

from ..auth import ADMIN, ANONYMOUS
from ..bodies import query_flag, query_number, read_body
from ..config import ANY_PRINCIPAL
from ..errors import error_response
from ..service import Gateway
from . import produce, session, views, watch
from .catalog import Catalog
from .history import History
from .lists import SORT_LIMIT, Order
from .logins import SESSIONS_ENV, FailedLogins, Logins
from .recent import Recent
from .session import Viewer

log = logging.getLogger(__name__)  # tms_hbase_gateway.console.api: the changes made through the console
MAX_BODY_BYTES = 64 * 1024
READ_AT_ONCE = 8  # topic details one request reads at once (of the worker's library calls: threads = 16)
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
T = TypeVar("T")


def api(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A JSON endpoint: the viewer from the session (401/403), the handler's value as JSON."""

    @functools.wraps(handler)
    async def run(request: Request) -> Response:
        gateway: Gateway = request.app.state.gateway
        try:
            viewer = session.viewer(request, gateway.guard, _logins(request))
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


def _kept(request: Request, name: str, make: Callable[[], T]) -> T:
    """The app's one ``name`` object (made on first use): each worker process keeps its own."""
    state = request.app.state
    if not hasattr(state, name):
        setattr(state, name, make())
    kept: T = getattr(state, name)
    return kept


def _logins(request: Request) -> Logins:
    return _kept(request, "console_logins", lambda: Logins(session.SESSION_SECONDS, os.environ.get(SESSIONS_ENV)))


def _failed_logins(request: Request) -> FailedLogins:
    return _kept(request, "console_failed_logins", FailedLogins)


def _recent(request: Request) -> Recent:
    return _kept(request, "console_recent", lambda: Recent(max_keys=2 * SORT_LIMIT))


def _catalog(request: Request) -> Catalog:
    return _kept(request, "console_catalog", Catalog)


TOPIC_LIST = "topic metadata"


async def _topic_list(request: Request, gateway: Gateway, viewer: Viewer) -> list[dict]:
    """:func:`views.topic_list` of every topic's metadata: read for each request while there were at most
    :data:`SORT_LIMIT` topics (milliseconds), past that as :mod:`.recent` keeps it (a scan of 10,000 topics'
    metadata takes most of a second; a topic made elsewhere shows within seconds, one made here at once)."""
    kept = _metadata(request)
    known = kept.peek(TOPIC_LIST)
    if known is None or len(known) <= SORT_LIMIT:
        metadata = kept.put(TOPIC_LIST, await gateway.run(gateway.client.list_topic_metadata, None))
    else:
        metadata = await kept.get(TOPIC_LIST, lambda: _all_topics(gateway))
    return views.topic_list(metadata, viewer)


async def _first_topics(
    request: Request, gateway: Gateway, viewer: Viewer, count: int
) -> tuple[list[dict], bool] | None:
    """Before the worker has read every topic's metadata (the first view after it starts), the rows of the first
    ``count`` topics the viewer may see, and whether they are the whole list: about ``count`` metadata rows read
    (``client.admin.first_topics``), where the whole list of 10,000 topics takes most of a second. None once
    the worker keeps the list (:func:`_topic_list`). Unless they are all, the caller calls :func:`_count_topics`
    once it has its answer."""
    if _metadata(request).peek(TOPIC_LIST) is not None:
        return None
    first, complete = await gateway.run(gateway.client.admin.first_topics, count)
    return views.topic_list(first, viewer), complete


def _count_topics(request: Request, gateway: Gateway) -> None:
    """Start reading every topic's metadata behind (kept as :func:`_topic_list` keeps it), unless a read runs:
    called once a request's answer is ready, as the decoding of 10,000 topics' rows holds the worker's event
    loop for a while."""
    _metadata(request).known(TOPIC_LIST, lambda: _all_topics(gateway))


TOPICS_AT_ONCE = 1000  # topics' metadata rows one library call of :func:`_all_topics` reads and decodes


async def _all_topics(gateway: Gateway) -> list[TopicMetadata]:
    """Every topic's metadata, as ``client.list_topic_metadata`` gives it, read :data:`TOPICS_AT_ONCE` at a time:
    decoding 10,000 rows in one library call would hold the worker's event loop (and every request) for most
    of a second; between these calls other requests go on."""
    found: list[TopicMetadata] = []
    while True:
        after = found[-1].topic if found else None
        more, complete = await gateway.run(gateway.client.admin.first_topics, TOPICS_AT_ONCE, after)
        found += more
        if complete:
            return sorted(found, key=lambda meta: meta.topic)


def _metadata(request: Request) -> Recent:
    return _kept(request, "console_metadata", lambda: Recent(max_keys=1))


def _forget(request: Request, topic: TopicId, *, metadata: bool = False) -> None:
    """Drop what the worker read of ``topic`` (``metadata``: and the topic list): a change through the console
    makes it stale."""
    _recent(request).forget(str(topic))
    _summaries(request).forget(str(topic))
    _catalog(request).forget(str(topic))
    if metadata:
        _metadata(request).forget(TOPIC_LIST)


async def _detail(request: Request, gateway: Gateway, topic: TopicId) -> dict:
    """The topic's :func:`views.topic_detail`, as the worker read it lately (:mod:`.recent`)."""
    detail: dict = await _recent(request).get(
        str(topic), lambda: gateway.run(views.topic_detail, gateway.client, topic, _history(request))
    )
    return detail


async def _details(request: Request, gateway: Gateway, rows: list[dict]) -> dict[str, dict]:
    """The details of the topics of ``rows`` (rows of :func:`views.topic_list`) by name (:func:`_each`)."""
    return await _each(rows, lambda row: _detail(request, gateway, _topic_of(row)))


def _summaries(request: Request) -> Recent:
    return _kept(request, "console_summaries", lambda: Recent(max_keys=2 * SORT_LIMIT))


async def _numbers(request: Request, gateway: Gateway, rows: list[dict]) -> dict[str, dict]:
    """The numbers the topic list shows of the topics of ``rows`` by name (:func:`views.topics_numbers`: half the
    reads of a topic's detail), as the worker read them lately (:mod:`.recent`). Those not read yet (a page's, on
    the first view after the worker starts) are read now in :data:`READ_AT_ONCE` library calls at once, each
    reading a share of them with their metadata and subscriptions in a round trip for the share, not one per
    topic; those read before are served as read (refreshed behind once old). A topic deleted meanwhile has none."""
    kept, history = _summaries(request), _history(request)
    unread = [_topic_of(row) for row in rows if kept.peek(row["name"]) is None]
    share = max(1, -(-len(unread) // READ_AT_ONCE))
    shares = [unread[n : n + share] for n in range(0, len(unread), share)]
    read: dict[str, dict] = {}
    for found in await asyncio.gather(
        *(gateway.run(views.topics_numbers, gateway.client, topics, history) for topics in shares)
    ):
        read.update(found)
    numbers = {}
    for row in rows:
        name = row["name"]
        if name in read:
            numbers[name] = kept.put(name, read[name])
        elif kept.peek(name) is not None:
            numbers[name] = kept.known(name, functools.partial(_topic_numbers, gateway, _topic_of(row), history))
    return numbers


async def _topic_numbers(gateway: Gateway, topic: TopicId, history: History | None = None) -> dict:
    """One topic's :func:`views.topics_numbers`; TopicNotFound once it is gone."""
    found = await gateway.run(views.topics_numbers, gateway.client, [topic], history)
    if str(topic) not in found:
        raise TopicNotFound(topic)
    numbers: dict = found[str(topic)]
    return numbers


async def _each(rows: list[dict], read: Callable[[dict], Awaitable[dict]]) -> dict[str, dict]:
    """``read(row)`` of each of ``rows`` (rows of :func:`views.topic_list`) by name, :data:`READ_AT_ONCE` at a
    time (a page's topics not read lately come in the time of a few); a topic deleted meanwhile has none."""
    limit = asyncio.Semaphore(READ_AT_ONCE)

    async def one(row: dict) -> tuple[str, dict | None]:
        async with limit:
            try:
                return row["name"], await read(row)
            except TopicNotFound:
                return row["name"], None

    return {name: found for name, found in await asyncio.gather(*map(one, rows)) if found is not None}


def _topic_of(row: dict) -> TopicId:
    """The topic of a row of :func:`views.topic_list`."""
    return TopicId(row["namespace"], row["topic"])


def _order(request: Request, columns: tuple[str, ...], default: str | None) -> Order:
    """A list's filter, sort, page and size from the query (``?filter=&sort=&desc=1&page=&size=``)."""
    page, size = query_number(request, "page", int), query_number(request, "size", int)
    return Order(
        columns,
        filter=request.query_params.get("filter", ""),
        sort=request.query_params.get("sort") or default,
        descending=query_flag(request, "desc"),
        page=0 if page is None else page,
        size=50 if size is None else size,
    )


def _as_seen_by(detail: dict, viewer: Viewer) -> dict:
    """A topic's detail with what this viewer may do (the detail itself is shared by all viewers)."""
    namespace, topic = detail["namespace"], detail["topic"]
    return {
        **detail,
        "may_change": viewer.may_change(namespace, topic),
        "may_publish": viewer.may_publish(namespace, topic),
    }


def _confirmed(body: dict, target: str) -> None:
    """A change carries the target its confirmation named (``"target"``: ``ns:topic`` or ``ns:topic/subscription``):
    a dialog left open over another screen, or a request built for another target, changes nothing."""
    named = body.get("target")
    if not isinstance(named, str):
        raise InvalidArgument(f'a change must name its target: expected "target": "{target}"')
    if named != target:
        raise InvalidArgument(f"this change was confirmed for {named}, not {target}: nothing changed")


async def _json_body(request: Request) -> dict:
    data = rest.load_json(await read_body(request, MAX_BODY_BYTES) or b"{}", "body")
    if not isinstance(data, dict):
        raise InvalidArgument("the body must be a JSON object")
    return data


# -- pages ---------------------------------------------------------------------------------------


async def page(request: Request) -> Response:
    """The console's one page; without a valid session, the login form instead (an open gateway starts an
    anonymous session)."""
    gateway: Gateway = request.app.state.gateway
    try:
        session.viewer(request, gateway.guard, _logins(request))
    except NotAuthenticated:
        if not gateway.guard.open:
            return RedirectResponse("/console/login", 303, headers=HEADERS)
        return _signed_in(request, _asset("index.html"), ANONYMOUS)
    return _asset("index.html")


async def login_page(request: Request) -> Response:
    gateway: Gateway = request.app.state.gateway
    return RedirectResponse("/console/", 303, headers=HEADERS) if gateway.guard.open else _asset("login.html")


async def login(request: Request) -> Response:
    """The login page's post, ``{"token": ...}``: a new session (see :mod:`.session`), or 401; 429 once the
    client failed too often (:mod:`.logins`)."""
    gateway: Gateway = request.app.state.gateway
    failures = _failed_logins(request)
    client = request.client.host if request.client else "-"
    wait = failures.retry_after(client)
    if wait is not None:
        request.state.error = "TooManyFailedLogins"
        text = f"too many failed sign-ins from {client}: try again in {wait} s\n"
        return PlainTextResponse(text, 429, {**HEADERS, "Retry-After": str(wait)})
    try:
        token = (await _json_body(request)).get("token")
        if not isinstance(token, str):
            raise InvalidArgument('expected {"token": "..."}')
        principal = session.login(gateway.guard, token)
    except NotAuthenticated as error:
        failures.failed(client)
        return error_response(request, error)
    except TmsError as error:
        return error_response(request, error)
    failures.succeeded(client)
    request.state.principal = principal
    body = Response(json.dumps({"principal": principal}), 200, HEADERS, media_type=rest.JSON)
    return _signed_in(request, body, principal)


def _signed_in(request: Request, response: Response, principal: str) -> Response:
    """``response`` with the cookie of a new session of ``principal``."""
    gateway: Gateway = request.app.state.gateway
    options = session.cookie_options(gateway.settings.tls is not None)
    response.set_cookie(session.COOKIE, _logins(request).start(principal), max_age=session.SESSION_SECONDS, **options)
    return response


async def logout(request: Request) -> Response:
    """End the session: its cookie, wherever it was copied to, no longer works."""
    gateway: Gateway = request.app.state.gateway
    try:
        viewer = session.viewer(request, gateway.guard, _logins(request))
    except TmsError as error:
        return error_response(request, error)
    _logins(request).end(viewer.session)
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


SLOWEST = 5  # the overview's slowest subscriptions


@api
async def overview(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    """The installation's health, its recent sweeps and open transactions, and with at most
    :data:`SORT_LIMIT` topics visible its totals, its slowest subscriptions and those a transaction in
    progress holds back (from each topic's numbers as the worker read them lately). Past that, the number of
    topics, or None while the worker first reads them (:func:`_first_topics`)."""
    found = await gateway.run(views.overview, gateway.client)
    if not found["hbase"]["reachable"]:
        return found
    kept = _metadata(request)
    counting = kept.peek(TOPIC_LIST) is None and kept.reading(TOPIC_LIST)  # a view found more than a page's
    first = None if counting else await _first_topics(request, gateway, viewer, SORT_LIMIT + 1)
    if counting:
        listed: list[dict] | None = None
    elif first is None:
        listed = await _topic_list(request, gateway, viewer)
    elif first[1]:
        listed = first[0]
    else:  # more than SORT_LIMIT topics: counted behind
        listed = None
        _count_topics(request, gateway)
    totals: dict = {"topics": None if listed is None else len(listed), "limit": SORT_LIMIT}
    if listed is not None and len(listed) <= SORT_LIMIT:
        details = await _details(request, gateway, listed)
        summaries = [views.topic_summary(d) for d in details.values()]
        subscriptions = [row for d in details.values() for row in views.subscription_rows(d)]
        lagging = [row for row in subscriptions if row["lag_seconds"] is not None]
        totals.update(
            messages=sum(t["messages"] for t in summaries),
            bytes=sum(t["bytes"] for t in summaries),
            subscriptions=len(subscriptions),
            slowest=sorted(lagging, key=lambda r: (r["lag_seconds"], r["lag_messages"]), reverse=True)[:SLOWEST],
            held=sorted((r for r in subscriptions if r["held"]), key=lambda r: r["held"], reverse=True)[:SLOWEST],
        )
    return {**found, "totals": totals}


@api
async def topics(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    return await _topic_list(request, gateway, viewer)


TOPIC_NUMBERS = ("messages", "bytes", "last_publish", "rate", "lag_messages", "lag_seconds")
TOPIC_COLUMNS = ("name", "ordering", "tx_mode", "ttl", "generation", *TOPIC_NUMBERS)


@api
async def topic_page(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    """A page of the topic list, each topic with its numbers (:func:`views.topics_numbers`): filtered and sorted
    by name or a setting from the metadata alone, then only the page's topics are read. Sorted by a number,
    every topic listed is read, up to :data:`SORT_LIMIT`; past that the numbers come from the background
    walk of :mod:`.catalog` (``numbers_read``: how many topics listed it has read yet; the others sort last).
    The first view in name order before the worker has read every topic's metadata: see :func:`_first_page`."""
    order = _order(request, TOPIC_COLUMNS, "name")
    first = await _first_page(request, gateway, viewer, order)
    if first is not None:
        return first
    listed = order.matching(await _topic_list(request, gateway, viewer), "name")
    answer: dict = {"total": len(listed), "page": order.page, "size": order.size}
    if order.sort not in TOPIC_NUMBERS:
        page = order.cut(order.sorted(listed))
        return {**answer, "rows": _with_numbers(page, await _numbers(request, gateway, page))}
    if len(listed) <= SORT_LIMIT:
        rows = _with_numbers(listed, await _numbers(request, gateway, listed))
        return {**answer, "rows": order.cut(order.sorted(rows))}
    catalog = _catalog(request)
    known = catalog.known(listed, lambda row: _topic_numbers(gateway, _topic_of(row)))
    page = order.cut(order.sorted([{**row, **known.get(row["name"], {})} for row in listed]))
    numbers = await _numbers(request, gateway, [row for row in page if row["name"] not in known])
    for name, found in numbers.items():
        catalog.put(name, found)
    read = {row["name"]: row for row in _with_numbers(page, numbers)}
    rows = [read.get(row["name"], row) for row in page if row["name"] in known or row["name"] in read]
    return {**answer, "rows": rows, "numbers_read": len(known)}


async def _first_page(request: Request, gateway: Gateway, viewer: Viewer, order: Order) -> dict | None:
    """A page of the topic list in name order, unfiltered, read from the first topics alone while the worker
    reads every topic's metadata behind (:func:`_first_topics`): ``total`` None (being counted; the page asks
    again). None when the page needs the whole list: another order or a filter, the list kept already or read
    whole here (a short one), or fewer topics visible among the first than the page shows."""
    if order.sort != "name" or order.descending or order.filter:
        return None
    count = (order.page + 1) * order.size
    first = await _first_topics(request, gateway, viewer, count)
    if first is None or first[1] or len(first[0]) < count:
        return None
    page = order.cut(order.sorted(first[0]))
    rows = _with_numbers(page, await _numbers(request, gateway, page))
    _count_topics(request, gateway)
    return {"total": None, "page": order.page, "size": order.size, "rows": rows}


def _with_numbers(rows: list[dict], numbers: dict[str, dict]) -> list[dict]:
    """Rows of the topic list with their topic's ``numbers`` (by name); a topic without (deleted) left out."""
    return [{**row, **numbers[row["name"]]} for row in rows if row["name"] in numbers]


SUBSCRIPTION_COLUMNS = (
    "topic",
    "name",
    "kind",
    "lag_messages",
    "lag_seconds",
    "consumers",
    "in_flight",
    "dead_letters",
    "scheduled",
    "late_acks",
)


@api
async def subscription_page(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    """A page of the subscriptions of every topic visible (the filter narrows the topics by name). Their
    names come from one scan of the subscriptions table (:func:`views.subscription_names`), so in topic or
    name order only the page's topics are read; sorted by a number, every topic listed that has
    subscriptions is, up to :data:`SORT_LIMIT` such topics (topics without any are never read, nor is their
    metadata)."""
    order = _order(request, SUBSCRIPTION_COLUMNS, None)
    names = await gateway.run(views.subscription_names, gateway.client, viewer, order.matches)
    if order.sort in (None, "topic", "name"):
        first, second = ("name", "topic") if order.sort == "name" else ("topic", "name")
        page = order.cut(sorted(names, key=lambda n: (n[first], n[second]), reverse=order.descending))
        details = await _details(request, gateway, _topics_of(page))
        found = {(r["topic"], r["name"]): r for d in details.values() for r in views.subscription_rows(d)}
        rows = [found[key] for key in ((n["topic"], n["name"]) for n in page) if key in found]
        return {"total": len(names), "page": order.page, "size": order.size, "rows": rows}
    topics = _topics_of(names)
    order.check_readable(len(topics), "topic with subscriptions")
    details = await _details(request, gateway, topics)
    rows = order.sorted([row for d in details.values() for row in views.subscription_rows(d)])
    return {"total": len(rows), "page": order.page, "size": order.size, "rows": order.cut(rows)}


def _topics_of(names: list[dict]) -> list[dict]:
    """The distinct topics (as rows of :func:`views.topic_list`) of subscription names, in their order."""
    return list({n["topic"]: n["row"] for n in names}.values())


@api
async def topic(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    return _as_seen_by(await _detail(request, gateway, _topic(request, viewer)), viewer)


@api
async def create_topic(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer, Viewer.check_change)
    body = await _json_body(request)
    _confirmed(body, str(found))
    properties = _properties(body)

    def work() -> dict:
        gateway.client.admin.require_installation()  # the gateway never creates tables
        gateway.client.create_topic(found, properties)
        return views.topic_detail(gateway.client, found, _history(request))

    detail = await gateway.run(work)
    log.info("console: %s created topic %s with %s", viewer.principal, found, properties)
    _forget(request, found, metadata=True)
    return _as_seen_by(_recent(request).put(str(found), detail), viewer)


@api
async def update_topic(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer, Viewer.check_change)
    body = await _json_body(request)
    _confirmed(body, str(found))
    properties = _properties(body)

    def work() -> dict:
        gateway.client.update_topic(found, properties)
        return views.topic_detail(gateway.client, found, _history(request))

    detail = await gateway.run(work)
    log.info("console: %s set the properties of topic %s to %s", viewer.principal, found, properties)
    _forget(request, found, metadata=True)
    return _as_seen_by(_recent(request).put(str(found), detail), viewer)


@api
async def delete_topic(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer, Viewer.check_change)
    _confirmed(await _json_body(request), str(found))
    await gateway.run(gateway.client.delete_topic, found)
    log.info("console: %s deleted topic %s", viewer.principal, found)
    _forget(request, found, metadata=True)
    return {"deleted": str(found)}


def _properties(body: dict) -> dict[str, str]:
    properties = body.get("properties", {})
    if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
        raise InvalidArgument('expected {"properties": {"name": "value", ...}} with string values')
    return properties


@api
async def publish(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    """The Produce form: one message (:mod:`.produce`), for a viewer with ``publish`` on the topic."""
    found = _topic(request, viewer, Viewer.check_publish)
    body = await _json_body(request)
    _confirmed(body, str(found))
    record, transactional = produce.record_of(body), body.get("transactional") is True
    done = await gateway.run(lambda: produce.publish(gateway.client, found, record, transactional=transactional))
    log.info("console: %s published message %s to %s", viewer.principal, done["id"], found)
    _forget(request, found)  # it has a new message
    return done


@api
async def messages(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer, Viewer.check_read)
    limit = query_number(request, "limit", int)
    from_id = _id(request.query_params["id"]) if request.query_params.get("id") else None
    from_time, last = query_number(request, "time", int), query_number(request, "last", int)
    return await gateway.run(
        lambda: views.messages(
            gateway.client,
            found,
            from_id=from_id,
            from_time=from_time,
            last=last,
            limit=100 if limit is None else limit,
        )
    )


TAIL_WAIT_SECONDS = 10.0  # the longest a tail call waits for a new message
TAIL_POLL_SECONDS = 0.5  # how often it looks meanwhile


@api
async def tail(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    """The live tail, as a long poll: without ``after``, where it starts (the last message's id); with it,
    the messages after that id, waiting up to ``wait`` seconds (at most :data:`TAIL_WAIT_SECONDS`) for one."""
    found = _topic(request, viewer, Viewer.check_read)
    after = request.query_params.get("after")
    if after is None:
        return {"after": await gateway.run(watch.tail_start, gateway.client, found), "messages": []}
    start = _id(after) if after else None
    wait = query_number(request, "wait", float) or 0.0
    deadline = time.monotonic() + max(0.0, min(wait, TAIL_WAIT_SECONDS))
    while True:
        rows = await gateway.run(watch.tail_after, gateway.client, found, start)
        if rows or time.monotonic() >= deadline:
            ids = [row["id"] for row in rows if row["id"]]
            return {"after": ids[-1] if ids else after, "messages": rows}
        await asyncio.sleep(TAIL_POLL_SECONDS)


@api
async def search(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    """One bounded step of a search (:func:`watch.search`): ``q``, ``in`` (payload, key, header), from ``id``
    or ``from`` (ms), up to ``to`` (ms), reading at most ``scan`` messages."""
    found = _topic(request, viewer, Viewer.check_read)
    query = request.query_params
    from_id = _id(query["id"]) if query.get("id") else None
    scan = query_number(request, "scan", int)
    return await gateway.run(
        lambda: watch.search(
            gateway.client,
            found,
            needle=query.get("q", "").encode(),
            where=query.get("in", "payload"),
            from_id=from_id,
            from_time=query_number(request, "from", int),
            to_time=query_number(request, "to", int),
            scan=watch.SEARCH_SCAN if scan is None else scan,
        )
    )


@api
async def subscription(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    found = _topic(request, viewer)
    name = request.path_params["name"]
    detail = await gateway.run(views.subscription_detail, gateway.client, viewer, found, name, _history(request))
    may_change = viewer.may_change(found.namespace, found.topic)
    may_replay = may_change and viewer.may_publish(found.namespace, found.topic)
    return {**detail, "may_change": may_change, "may_replay": may_replay}


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
    _confirmed(body, f"{found}/{name}")

    def work() -> dict:
        if isinstance(start, int):
            gateway.client.reset_subscription(found, name, start_time_ms=start, force=force)
        else:
            gateway.client.reset_subscription(found, name, start, force=force)
        return views.subscription_detail(gateway.client, viewer, found, name, _history(request))

    detail = await gateway.run(work)
    log.info("console: %s reset subscription %s of %s to %r (force=%s)", viewer.principal, name, found, start, force)
    _forget(request, found)  # its lag changed
    return {**detail, "may_change": True}


@api
async def replay_preview(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    """What a replay would publish to the subscription's topic, and what it would refuse (it shows payloads:
    reading the dead-letter topic)."""
    found, name = _topic(request, viewer, Viewer.check_change), request.path_params["name"]
    target = await gateway.run(gateway.client.admin.dead_letter_topic, found, name)
    viewer.check_read(target.namespace, target.topic)
    return await gateway.run(lambda: views.replay_dead_letters(gateway.client, found, name, dry_run=True))


@api
async def replay(request: Request, gateway: Gateway, viewer: Viewer) -> object:
    """Publish every dead letter of the subscription's dead-letter topic not replayed yet back to the
    subscription's topic: ``admin`` on both topics (the dead-letter topic's subscription marks the replay) and
    ``publish`` on the one it publishes to. A letter naming another topic is refused, never published."""
    found, name = _topic(request, viewer, Viewer.check_change), request.path_params["name"]
    viewer.check_publish(found.namespace, found.topic)
    _confirmed(await _json_body(request), f"{found}/{name}")
    target = await gateway.run(gateway.client.admin.dead_letter_topic, found, name)
    viewer.check_change(target.namespace, target.topic)
    done = await gateway.run(lambda: views.replay_dead_letters(gateway.client, found, name, dry_run=False))
    log.info(
        "console: %s replayed %d dead letters of %s to %s, refused %d",
        viewer.principal,
        len(done["letters"]),
        target,
        found,
        len(done["refused"]),
    )
    for letter in done["refused"]:
        log.warning("console: refused dead letter %s of %s: %s", letter["id"], target, letter["reason"])
    _forget(request, found)  # it has new messages
    return done


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
    if isinstance(value, int) and not isinstance(value, bool) and rest.LONG[0] <= value <= rest.LONG[1]:
        return value
    if isinstance(value, str):
        return _id(value)
    raise InvalidArgument(f'bad start {value!r}: expected "earliest", "latest", a time in ms or a message id (hex)')


def _id(text: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise InvalidArgument(f"bad message id {text!r}: expected hex") from None


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
            Route("/api/topic-page", topic_page, methods=["GET"]),
            Route("/api/subscription-page", subscription_page, methods=["GET"]),
            Route(TOPIC, topic, methods=["GET"]),
            Route(TOPIC, create_topic, methods=["PUT"]),
            Route(TOPIC, delete_topic, methods=["DELETE"]),
            Route(TOPIC + "/properties", update_topic, methods=["PUT"]),
            Route(TOPIC + "/messages", messages, methods=["GET"]),
            Route(TOPIC + "/publish", publish, methods=["POST"]),
            Route(TOPIC + "/tail", tail, methods=["GET"]),
            Route(TOPIC + "/search", search, methods=["GET"]),
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
