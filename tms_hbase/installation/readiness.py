"""Whether an installation's tables exist, as one client knows it: checked once, created only where allowed."""

from __future__ import annotations

from tms_hbase.errors import InstallationNotFound
from tms_hbase.model.tables import FAMILIES
from tms_hbase.runtime import green
from tms_hbase.storage.hbase import Installation


class Readiness:
    """The tables of ``installation``, checked once per client.

    Only :meth:`create_all` (``init``) and, if ``may_create`` (the client's ``create_tables=True``),
    ``ensure(create=True)`` (the first ``create_topic``, a setting) create tables; every other call on a
    prefix whose tables are missing raises InstallationNotFound and creates nothing, so a mistyped prefix
    is noticed. Thread-safe.
    """

    def __init__(self, installation: Installation, *, may_create: bool) -> None:
        self.installation = installation
        self.may_create = may_create
        self._ready = self._subscriptions_ready = False
        self._lock = green.lock()

    def ensure(self, *, create: bool = False) -> None:
        """Check once that the tables exist; create the missing ones when ``create`` is asked (and allowed),
        else raise InstallationNotFound."""
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            missing = self.installation.missing()
            if missing and not (create and self.may_create):
                raise InstallationNotFound(self.installation.prefix, self.installation.address, missing)
            if missing:
                self.installation.create_missing()
            self._ready = True

    def ensure_subscriptions(self) -> None:
        """The subscriptions table of an installation that exists (its core tables checked first, so a
        mistyped prefix still creates nothing) is made on the first use of subscriptions (tables.CORE)."""
        self.ensure()
        if self._subscriptions_ready:
            return
        with self._lock:
            if not self._subscriptions_ready:
                self.installation.create_missing(["subscriptions"])
                self._subscriptions_ready = True

    def create_all(self) -> list[str]:
        """Create every missing table now; returns the names created."""
        created = self.installation.create_missing(FAMILIES)
        self._ready = self._subscriptions_ready = True
        return created

    def drop_all(self) -> list[str]:
        """Delete every table of the prefix and what is in them; returns the names."""
        with self._lock:
            self._ready = self._subscriptions_ready = False
            return self.installation.drop()

    def check(self) -> None:
        """InstallationNotFound unless every core table exists (one call; nothing remembered or created)."""
        with self.installation.hbase.operation():
            missing = self.installation.missing()
        if missing:
            raise InstallationNotFound(self.installation.prefix, self.installation.address, missing)
