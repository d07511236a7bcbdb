"""Console sign-ins kept on the server, and the limit on failed ones.

A sign-in gets a random session id (256 bits); the browser's cookie carries that id, never the token.
The gateway keeps one small file per session, named by the SHA-256 of its id and holding the principal
and the expiry, in a folder every worker of one ``tms-gateway`` shares (:data:`SESSIONS_ENV`, made and
removed by the CLI): any worker serves any session, signing out deletes the file so a copied cookie stops
working at once, and a restart ends every session.

Failed sign-ins are counted per client address in each worker: after :data:`MAX_FAILURES` within
:data:`WINDOW_SECONDS`, the next attempt is answered 429 with ``Retry-After`` until the oldest of them is
that old, whatever token it carries.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import tempfile
import time
from collections import deque
from pathlib import Path

SESSIONS_ENV = "TMS_GATEWAY_SESSIONS"  # set by tms-gateway for its workers; not for users
MAX_FAILURES = 10
WINDOW_SECONDS = 60.0
_CLIENTS = 10_000  # client addresses remembered at most (older ones are forgotten first)


class Logins:
    """The console's sessions: :meth:`start` at sign-in, :meth:`principal` on each request, :meth:`end` at sign-out."""

    def __init__(self, seconds: float, folder: str | None = None) -> None:
        self.seconds = seconds
        if folder is None:  # an app built without the CLI: one process, a folder of its own
            self._own = tempfile.TemporaryDirectory(prefix="tms-gateway-sessions-")
            folder = self._own.name
        self._folder = Path(folder)

    def start(self, principal: str) -> str:
        """A new session of ``principal``; returns its id (the cookie's value). Drops expired sessions."""
        self._drop_expired()
        session = secrets.token_urlsafe(32)
        path = self._path(session)
        temporary = path.with_suffix(".new")
        temporary.write_text(json.dumps({"principal": principal, "expires": time.time() + self.seconds}))
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
        return session

    def principal(self, session: str) -> str | None:
        """Who signed in as ``session``; None for an unknown, ended or expired one."""
        try:
            record = json.loads(self._path(session).read_text())
        except (OSError, ValueError):
            return None
        if record["expires"] <= time.time():
            self.end(session)
            return None
        principal: str = record["principal"]
        return principal

    def end(self, session: str) -> None:
        """Sign ``session`` out: its cookie no longer works anywhere."""
        self._path(session).unlink(missing_ok=True)

    def _path(self, session: str) -> Path:
        return self._folder / hashlib.sha256(session.encode()).hexdigest()

    def _drop_expired(self) -> None:
        now = time.time()
        for path in self._folder.iterdir():
            try:
                if json.loads(path.read_text())["expires"] <= now:
                    path.unlink(missing_ok=True)
            except (OSError, ValueError, KeyError):
                continue  # being written or removed by another worker


class FailedLogins:
    """Failed sign-ins per client address, to refuse the next ones for a while (see the module's docstring)."""

    def __init__(self) -> None:
        self._failures: dict[str, deque[float]] = {}

    def retry_after(self, client: str) -> int | None:
        """Seconds ``client`` must wait before its next sign-in is looked at; None if it may try now."""
        failures = self._failures.get(client)
        if failures is None:
            return None
        now = time.monotonic()
        while failures and failures[0] <= now - WINDOW_SECONDS:
            failures.popleft()
        if len(failures) < MAX_FAILURES:
            return None
        return max(1, math.ceil(failures[0] + WINDOW_SECONDS - now))

    def failed(self, client: str) -> None:
        """Count a failed sign-in of ``client``."""
        if client not in self._failures and len(self._failures) >= _CLIENTS:
            del self._failures[next(iter(self._failures))]
        self._failures.setdefault(client, deque(maxlen=MAX_FAILURES)).append(time.monotonic())

    def succeeded(self, client: str) -> None:
        """Forget the failures of ``client`` (it knew a token)."""
        self._failures.pop(client, None)
