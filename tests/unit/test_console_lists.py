"""The console's pages of long lists: filtered, sorted with unknown numbers last, cut into pages, and a sort
that would read too many topics refused with a clear error."""

from __future__ import annotations

import asyncio

import pytest

from tms_hbase import TopicId
from tms_hbase.errors import InvalidArgument, TopicNotFound
from tms_hbase_gateway.console.catalog import Catalog
from tms_hbase_gateway.console.lists import SORT_LIMIT, Order

COLUMNS = ("name", "lag")
ROWS = [{"name": "a:x", "lag": 3}, {"name": "b:y", "lag": None}, {"name": "a:z", "lag": 9}, {"name": "c:w", "lag": 1}]


def order(**changes: object) -> Order:
    settings: dict = {"filter": "", "sort": None, "descending": False, "page": 0, "size": 2, **changes}
    return Order(COLUMNS, **settings)


def test_rows_are_filtered_sorted_with_unknown_numbers_last_and_paged() -> None:
    largest = order(sort="lag", descending=True)
    assert [r["name"] for r in largest.sorted(ROWS)] == ["a:z", "a:x", "c:w", "b:y"]
    smallest = order(sort="lag", page=1)
    assert [r["name"] for r in smallest.cut(smallest.sorted(ROWS))] == ["a:z", "b:y"]
    assert [r["name"] for r in order(filter="A:").matching(ROWS, "name")] == ["a:x", "a:z"]


def test_bad_requests_and_sorts_reading_too_much_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="cannot sort by 'size'"):
        order(sort="size")
    with pytest.raises(InvalidArgument, match="bad page -1"):
        order(page=-1)
    with pytest.raises(InvalidArgument, match="bad page 0 of size 0"):
        order(size=0)
    order(sort="lag").check_readable(SORT_LIMIT, "topic")
    with pytest.raises(InvalidArgument, match=f"{SORT_LIMIT + 1} match, narrow the filter"):
        order(sort="lag").check_readable(SORT_LIMIT + 1, "topic")


def test_a_long_lists_numbers_are_read_once_in_the_background_and_again_when_old() -> None:
    """The catalog answers at once with what it knows, reads each topic listed once per walk (a failed or
    deleted one is left unknown), and starts another walk only for numbers missing or older than max_age."""
    reads: list[str] = []

    async def read(row: dict) -> dict:
        reads.append(row["name"])
        if row["name"] == "gone":
            raise TopicNotFound(TopicId("a", "gone"))
        await asyncio.sleep(0)
        return {"messages": len(row["name"])}

    async def scenario() -> None:
        catalog = Catalog(max_age=3600, parallel=2)
        rows = [{"name": n} for n in ("a:x", "a:yy", "gone", "a:zzz")]
        assert catalog.known(rows, read) == {}
        assert catalog.known(rows, read) == {}  # one walk at a time
        await asyncio.sleep(0.1)
        assert catalog.known(rows, read) == {"a:x": {"messages": 3}, "a:yy": {"messages": 4}, "a:zzz": {"messages": 5}}
        assert sorted(reads) == sorted(["a:x", "a:yy", "gone", "a:zzz"])
        await asyncio.sleep(0.1)  # only "gone" was missing: read again
        assert sorted(reads) == sorted(["a:x", "a:yy", "gone", "gone", "a:zzz"])
        catalog.max_age = 0
        catalog.known(rows[:1], read)
        await asyncio.sleep(0.1)
        assert reads[-1] == "a:x"

    asyncio.run(scenario())
