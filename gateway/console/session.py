"""Who a console request comes from, and whether a change it asks for is the user's own (CSRF).

A browser cannot send a bearer header on a page load, so the console signs in once: the login page posts
the token (JSON, never in a URL), the gateway checks it with the same :class:`~gateway.auth.Guard` as
``Authorization: Bearer`` and starts a session kept on the server (:mod:`.logins`). The ``tms_console``
cookie carries the session's id, not the token; it is ``HttpOnly`` (no script can read it),
``SameSite=Strict`` (no other site's page sends it), limited to ``/console``, ``Secure`` under TLS, and
lasts :data:`SESSION_SECONDS`, as the session does. Signing out ends the session on the server. An open
gateway (no tokens) starts an ``anonymous`` session for a page load without one.

Every change (PUT, POST, DELETE) must also carry ``X-CSRF-Token``: an HMAC of the session's id that the
page reads from ``/console/api/session`` (a same-origin read another site cannot make). A cross-site
form cannot set that header, and a cross-site script cannot send it without a CORS preflight the gateway
never answers; a request from another site's page is refused before that (:mod:`gateway.browsers`).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from starlette.requests import Request

from tms_hbase.errors import NotAuthenticated, NotAuthorized

from ..auth import ADMIN, CONSUME, PUBLISH, Guard
from .logins import Logins

COOKIE = "tms_console"
CSRF_HEADER = "x-csrf-token"
SESSION_SECONDS = 8 * 3600
PATH = "/console"
SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class Viewer:
    """The authenticated caller of one console request."""

    principal: str
    session: str  # the session's id (the cookie's value)
    guard: Guard

    def may_see(self, namespace: str, topic: str) -> bool:
        """Any action on the topic shows it (as ``GET /topics/<t>`` needs)."""
        return self.guard.allows(self.principal, namespace, topic, None)

    def may_change(self, namespace: str, topic: str) -> bool:
        """Console changes (topics, subscription resets) need ``admin`` on the topic."""
        return self.guard.allows(self.principal, namespace, topic, ADMIN)

    def may_read(self, namespace: str, topic: str) -> bool:
        """Payloads need ``consume`` (what polling needs) or ``admin`` (the operator) on the topic."""
        return any(self.guard.allows(self.principal, namespace, topic, action) for action in (CONSUME, ADMIN))

    def check_see(self, namespace: str, topic: str) -> None:
        self.guard.check(self.principal, namespace, topic, None)

    def check_read(self, namespace: str, topic: str) -> None:
        if not self.may_read(namespace, topic):
            raise NotAuthorized(f"{self.principal} may not read the messages of {namespace}:{topic}")

    def check_change(self, namespace: str, topic: str) -> None:
        self.guard.check(self.principal, namespace, topic, ADMIN)

    def may_publish(self, namespace: str, topic: str) -> bool:
        """What a dead letter's replay needs on the topic it publishes to (as ``POST /publish`` does)."""
        return self.guard.allows(self.principal, namespace, topic, PUBLISH)

    def check_publish(self, namespace: str, topic: str) -> None:
        self.guard.check(self.principal, namespace, topic, PUBLISH)

    @property
    def csrf(self) -> str:
        """The token a change must carry: derived from the session's secret, so only its holder knows it."""
        return hmac.new(self.session.encode(), b"tms-console csrf", hashlib.sha256).hexdigest()


def viewer(request: Request, guard: Guard, logins: Logins) -> Viewer:
    """The caller of a console request from its session cookie (NotAuthenticated: 401), noted for the
    access log; a change is also checked for its CSRF token (NotAuthorized: 403)."""
    session = request.cookies.get(COOKIE, "")
    principal = logins.principal(session) if session else None
    if principal is None:
        raise NotAuthenticated("sign in to the console: no session, or it ended")
    request.state.principal = principal
    found = Viewer(principal, session, guard)
    if request.method not in SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), found.csrf.encode()):
            raise NotAuthorized("a console change needs the session's X-CSRF-Token header")
    return found


def login(guard: Guard, token: str) -> str:
    """The principal of a token typed into the login form; NotAuthenticated for an unknown one."""
    if not token.strip():
        raise NotAuthenticated("enter a token")
    return guard.principal(f"Bearer {token.strip()}")


def cookie_options(secure: bool) -> dict:
    """How the session cookie is set (and cleared)."""
    return {"path": PATH, "httponly": True, "samesite": "strict", "secure": secure}
