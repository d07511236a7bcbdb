"""Bounding what one HTTP connection may hold: uvicorn's protocol (httptools) with deadlines and a count.

uvicorn closes a connection that idles between requests (``keep_alive``) but waits for ever for a request
that arrives slowly: a client sending a header byte every few seconds (slowloris), or a body the same
way, holds its connection, and enough of them hold every one the worker can have. So each connection
here has a deadline while a request is coming in:

* its request line and headers within ``header_timeout`` of the connection opening or of the request's
  first byte (whichever is earlier);
* its body within ``body_timeout`` of the headers.

When the deadline passes the connection is closed (the app, if it was reading the body, sees the client
gone). No deadline runs while the app works on a request or a long-poll waits, so long-polls are not
cut. A worker also takes at most ``max_client_connections`` connections at once from one client address:
one more is answered 503 and closed.

``tms-gateway`` hands the settings to its workers in the environment (:data:`~.config.SETTINGS_ENV`), where
:class:`BoundedProtocol` reads them once per worker.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .config import SETTINGS_ENV, Settings

log = logging.getLogger(__name__)


class BoundedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the deadlines and the per-client count of the module's docstring."""

    settings: ClassVar[Settings | None] = None  # read at the worker's first connection
    per_client: ClassVar[Counter[str]] = Counter()  # this worker's open connections by client address

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if BoundedProtocol.settings is None:
            BoundedProtocol.settings = Settings.from_json(os.environ[SETTINGS_ENV])
        self._deadline: asyncio.TimerHandle | None = None
        self._counted: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        assert self.settings is not None
        address = self.client[0] if self.client else "-"
        if self.per_client[address] >= self.settings.max_client_connections:
            log.warning("refused a connection from %s: it has %d open", address, self.per_client[address])
            text = b"too many connections from this client\n"
            head = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
            transport.write(head + b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(text) + text)
            transport.close()
            return
        self.per_client[address] += 1
        self._counted = address
        self._arm(self.settings.header_timeout, "its request line and headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._counted is not None:
            self.per_client[self._counted] -= 1
            if not self.per_client[self._counted]:
                del self.per_client[self._counted]
            self._counted = None
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # the connection's first request is timed from the connection
            assert self.settings is not None
            self._arm(self.settings.header_timeout, "its request line and headers")

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        assert self.settings is not None
        self._arm(self.settings.body_timeout, "its request body")

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def _arm(self, seconds: float, what: str) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired, seconds, what)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self, seconds: float, what: str) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            client = f"{self.client[0]}:{self.client[1]}" if self.client else "-"
            log.info("closed the connection from %s: %s did not arrive within %g s", client, what, seconds)
            self.transport.close()
