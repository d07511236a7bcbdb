"""The console's long lists as pages: filtered by a substring, sorted by one column, cut into pages.

The topic list and the list of every subscription are built from rows (plain dicts); a column whose values
come from reading each topic's numbers (messages, lag, ...) can only be sorted once every row is read, so a
sort on such a column is refused past :data:`SORT_LIMIT` rows (the caller narrows the filter): a screen's cost
stays bounded by what it shows, or by that limit.
"""

from __future__ import annotations

from collections.abc import Sequence

from tms_hbase.errors import InvalidArgument

SORT_LIMIT = 1000  # rows whose numbers a sort on a number column may read
MAX_PAGE = 100


class Order:
    """A list's request: ``filter`` (substring of the row's name, any case), ``sort`` (a column), ``descending``,
    ``page`` (from 0) and ``size``."""

    def __init__(
        self, columns: Sequence[str], *, filter: str, sort: str | None, descending: bool, page: int, size: int
    ) -> None:
        if sort is not None and sort not in columns:
            raise InvalidArgument(f"cannot sort by {sort!r}: expected one of {', '.join(columns)}")
        if page < 0 or not 1 <= size <= MAX_PAGE:
            raise InvalidArgument(f"bad page {page} of size {size}: pages count from 0 and hold 1 to {MAX_PAGE}")
        self.filter, self.sort, self.descending, self.page, self.size = filter.lower(), sort, descending, page, size

    def matching(self, rows: list[dict], name: str) -> list[dict]:
        """The rows whose ``name`` column contains the filter."""
        return [r for r in rows if self.matches(str(r[name]))] if self.filter else rows

    def matches(self, name: str) -> bool:
        """Whether ``name`` contains the filter, in any case."""
        return self.filter in name.lower()

    def sorted(self, rows: list[dict]) -> list[dict]:
        """``rows`` in the requested order; a row without a value for the column (never read, no lag) goes last."""
        if self.sort is None:
            return rows
        column = self.sort
        known = [r for r in rows if r.get(column) is not None]
        unknown = [r for r in rows if r.get(column) is None]
        return sorted(known, key=lambda r: r[column], reverse=self.descending) + unknown

    def cut(self, rows: list[dict]) -> list[dict]:
        """The requested page of ``rows``."""
        return rows[self.page * self.size : (self.page + 1) * self.size]

    def check_readable(self, count: int, what: str) -> None:
        """A sort on a number column reads the numbers of ``count`` rows: refused past :data:`SORT_LIMIT`."""
        if count > SORT_LIMIT:
            raise InvalidArgument(
                f"sorting by {self.sort} reads the numbers of every {what} listed: {count} match, narrow the "
                f"filter to at most {SORT_LIMIT}"
            )
