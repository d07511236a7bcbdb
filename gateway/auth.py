"""Authentication (bearer tokens, stored as SHA-256 hashes) and authorization (rules per principal,
namespace and topic pattern, and action).

* No ``[[tokens]]`` configured: the gateway is open, every caller is ``anonymous`` and may do anything.
* Tokens configured: every request to ``/v1`` needs ``Authorization: Bearer <token>`` of a known token,
  else 401. The token's ``name`` is the caller's principal.
* Rules configured: deny by default; a request is allowed only if some rule names its principal (or
  ``*``), matches its namespace and topic (shell globs, ``fnmatch``) and lists its action.

Actions: ``admin`` (create, update, delete topics), ``publish`` (store, publish, rollback), ``consume``
(poll, and every subscription call: create, delete, reset, messages, commit). Reading a topic's metadata
or its stats needs any action on it;
listing a namespace shows only the topics the caller has some action on.

Tokens are random secrets of 256 bits (``tms-gateway --new-token``), so one SHA-256 is enough to store
them safely (no password stretching needed: there is nothing to guess); hashes are looked up, never
the tokens themselves, and the file never holds a token.
"""

from __future__ import annotations

import hashlib
import secrets
from fnmatch import fnmatchcase

from tms_hbase.errors import NotAuthenticated, NotAuthorized

from .config import ANY_PRINCIPAL, Rule, Settings

ANONYMOUS = "anonymous"
ADMIN, PUBLISH, CONSUME = "admin", "publish", "consume"


def hash_token(token: str) -> str:
    """The hex SHA-256 of a token's UTF-8 text: what the config file stores."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe base64)."""
    return secrets.token_urlsafe(32)


class Guard:
    """Decides who a request comes from and whether it may do what it asks."""

    def __init__(self, settings: Settings) -> None:
        self._names = {token.sha256: token.name for token in settings.tokens}
        self._rules = settings.rules

    @property
    def open(self) -> bool:
        """True when no tokens are configured (anyone may do anything)."""
        return not self._names

    def principal(self, authorization: str | None) -> str:
        """The principal of a request's ``Authorization`` header; NotAuthenticated if it has none or a bad one."""
        if self.open:
            return ANONYMOUS
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthenticated("this gateway needs a bearer token: send 'Authorization: Bearer <token>'")
        name = self._names.get(hash_token(token.strip()))
        if name is None:
            raise NotAuthenticated("unknown bearer token")
        return name

    def allows(self, principal: str, namespace: str, topic: str, action: str | None) -> bool:
        """Whether ``principal`` may do ``action`` (None: any action) on the topic."""
        if not self._rules:
            return True
        return any(
            self._covers(rule, principal, namespace) and fnmatchcase(topic, rule.topics)
            for rule in self._rules
            if action is None or action in rule.actions
        )

    def check(self, principal: str, namespace: str, topic: str, action: str | None) -> None:
        """NotAuthorized unless :meth:`allows`."""
        if not self.allows(principal, namespace, topic, action):
            doing = f"{action} on" if action else "access"
            raise NotAuthorized(f"{principal} may not {doing} topic {namespace}:{topic}")

    def check_namespace(self, principal: str, namespace: str) -> None:
        """NotAuthorized unless some rule gives ``principal`` some topic of ``namespace``."""
        if self._rules and not any(self._covers(rule, principal, namespace) for rule in self._rules):
            raise NotAuthorized(f"{principal} has no access to namespace {namespace}")

    @staticmethod
    def _covers(rule: Rule, principal: str, namespace: str) -> bool:
        return rule.principal in (principal, ANY_PRINCIPAL) and fnmatchcase(namespace, rule.namespace)
