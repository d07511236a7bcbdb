"""Parameters known under two names: a unit-suffixed one (``ttl_seconds``) and the name it had before
(``ttl``), which keeps working so existing calls do not break."""

from __future__ import annotations

from typing import TypeVar

from tms_hbase.errors import InvalidArgument

T = TypeVar("T")


def renamed(new_name: str, new: T | None, old_name: str, old: T | None, default: T) -> T:
    """The value given under either name, else ``default``; both names at once is InvalidArgument."""
    if new is not None and old is not None:
        raise InvalidArgument(f"give {new_name} or {old_name} (its older name), not both")
    if new is not None:
        return new
    return default if old is None else old
