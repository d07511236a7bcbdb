"""HBase permissions as values: what a role needs on one table kind (:class:`Access`) and one HBase grant
(:class:`Grant`, with its shell command); :mod:`tms_hbase.installation.grants` says which each role needs. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

PERMISSIONS = "RWXCA"
"""HBase's permission letters in its own order: read, write, exec, create, admin."""


@dataclass(frozen=True)
class Access:
    """What a role needs on one table kind (``None``: the tables' namespace): ``permissions`` on the whole table,
    and ``columns``: (``family:qualifier``, permissions, why) where it needs more on one column only; ``why``."""

    kind: str | None
    permissions: str
    why: str
    columns: tuple[tuple[bytes, str, str], ...] = ()


@dataclass(frozen=True)
class Grant:
    """One HBase grant: ``permissions`` (letters of :data:`PERMISSIONS`) for ``user`` on a table, or on one
    ``family``/``qualifier`` of it, or on a ``namespace``; ``why`` the role needs it."""

    user: str
    permissions: str
    why: str
    table: str | None = None
    namespace: str | None = None
    family: str | None = None
    qualifier: str | None = None

    def shell(self) -> str:
        """The HBase shell command that makes this grant."""
        scope = [f"@{self.namespace}"] if self.namespace else [str(self.table)]
        scope += [part for part in (self.family, self.qualifier) if part is not None]
        return "grant " + ", ".join(_quoted(word) for word in (self.user, self.permissions, *scope))

    def as_dict(self) -> dict[str, str]:
        """The grant as data (``--json``): the fields that apply."""
        return {name: value for name, value in vars(self).items() if value is not None}


def _quoted(word: str) -> str:
    """``word`` as a single-quoted Ruby string (the HBase shell's language)."""
    return "'" + word.replace("\\", "\\\\").replace("'", "\\'") + "'"
