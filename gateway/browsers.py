"""Refusing what a web browser is made to send: an ASGI middleware in front of every endpoint.

A page of another site can make the browser of someone who reaches the gateway send requests to it:
``fetch(gateway + path, {method: "POST", mode: "no-cors", body})`` needs no CORS preflight when the body
has no ``Content-Type`` or a form's, and a DNS name the attacker points at the gateway (DNS rebinding)
even makes the page's origin the gateway's. Every request is therefore refused when

* its ``Host`` is not the gateway's: an IP address, ``localhost``, the name it listens on, or one of
  ``allowed_hosts`` (globs) are; a rebinding page's requests carry the attacker's name (403);
* its ``Origin`` (which browsers send with every cross-origin request and every POST, PUT, DELETE) is
  not the gateway's own, ``scheme://host``: the gateway answers no CORS preflight, so no other site's
  page is ever meant to call it (403);
* it has a body whose ``Content-Type`` is not Avro, JSON or ``application/octet-stream``, none of which a
  page can send without a preflight (415). A PUT or DELETE may send its body without a ``Content-Type``
  (CDAP's client sends topic properties that way): a page can send neither method to another site.

Programs (the clients, curl, CDAP) send none of this and are not affected.
"""

from __future__ import annotations

import ipaddress
from fnmatch import fnmatchcase

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from tms_hbase.errors import NotAuthorized, TmsError
from tms_hbase.rest import codec as rest

from .config import Settings
from .errors import error_response

_BODY_TYPES = frozenset(m.encode() for m in (*rest.AVROS, rest.JSON, rest.OCTETS))
_KNOWN_HOSTS = 1024  # Host values remembered with their verdict (a client could send any number)


class BrowserGuard:
    """Wraps the app: refuses a foreign ``Host`` or ``Origin`` and a body of a type a page can send."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self._names = (settings.host.lower(), *settings.allowed_hosts)
        self._hosts: dict[bytes, bool] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            error = self._refusal(scope)
            if error is not None:
                await error_response(Request(scope), error)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> TmsError | None:
        host = origin = media = None
        body = False
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
            elif name == b"origin":
                origin = value
            elif name == b"content-type":
                media = value
            elif name == b"content-length":
                body = value.strip(b"0 ") != b""
            elif name == b"transfer-encoding":
                body = True
        if host is not None and not self._served(host):
            return NotAuthorized(
                f"Host {host.decode('latin-1')!r} is not a name of this gateway (add it to allowed_hosts to serve it)"
            )
        if origin is not None and (host is None or origin.lower() != f"{scope['scheme']}://".encode() + host.lower()):
            return NotAuthorized(f"a request from a page of {origin.decode('latin-1')} is refused")
        if body:
            kind = (media or b"").split(b";", 1)[0].strip().lower()
            if kind in _BODY_TYPES or (kind.startswith(b"application/") and kind.endswith(b"+json")):
                return None
            if not kind and scope["method"] in ("PUT", "DELETE"):
                return None
            return rest.UnsupportedMediaType(
                f"a request body needs Content-Type {', '.join(rest.AVROS)}, {rest.JSON} or {rest.OCTETS}, "
                f"not {kind.decode('latin-1') or 'none'}"
            )
        return None

    def _served(self, host: bytes) -> bool:
        known = self._hosts.get(host)
        if known is None:
            if len(self._hosts) >= _KNOWN_HOSTS:
                self._hosts.clear()
            known = self._hosts[host] = self._is_own(host.decode("latin-1").lower())
        return known

    def _is_own(self, host: str) -> bool:
        name = host[1 : host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0]
        if name == "localhost" or any(fnmatchcase(name, pattern) for pattern in self._names):
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True  # a page whose origin is an address is served from that address: no rebinding there
