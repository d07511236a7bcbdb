"""Every topic's numbers, for sorting a topic list longer than :data:`.lists.SORT_LIMIT` by one of them.

A topic's numbers (messages, bytes, last publish, rate, worst lag) take a few HBase reads; a list of 10,000
topics sorted by messages needs all of them, far too many reads for one request. Such a sort starts one
walk in the background that reads the numbers of every topic listed whose numbers are missing or older than
:attr:`Catalog.max_age`, :attr:`Catalog.parallel` topics at a time, and keeps them (a few numbers per topic).
Each request is answered at once, sorted among the topics whose numbers are known, saying how many those
are: the page shows the progress and asks again until every topic listed has its numbers. Nothing is read
while nobody sorts a long list.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from tms_hbase.errors import TmsError, TopicNotFound

log = logging.getLogger(__name__)
Read = Callable[[dict], Awaitable[dict]]


class Catalog:
    """Numbers by topic name, each with the monotonic time it was read. Used from the event loop only."""

    def __init__(self, max_age: float = 60.0, parallel: int = 4) -> None:
        self.max_age = max_age
        self.parallel = parallel
        self._numbers: dict[str, tuple[float, dict]] = {}
        self._walk: asyncio.Task | None = None

    def known(self, rows: list[dict], read: Read) -> dict[str, dict]:
        """The numbers known of the topics of ``rows`` (rows of the topic list, by ``name``); unless a walk
        runs, one starts that reads ``read(row)`` for each row whose numbers are missing or too old."""
        now = time.monotonic()
        if self._walk is None or self._walk.done():
            todo = [r for r in rows if self._stale(r["name"], now)]
            if todo:
                self._walk = asyncio.get_running_loop().create_task(self._read_all(todo, read))
        return {r["name"]: self._numbers[r["name"]][1] for r in rows if r["name"] in self._numbers}

    def _stale(self, name: str, now: float) -> bool:
        found = self._numbers.get(name)
        return found is None or now - found[0] >= self.max_age

    def put(self, name: str, numbers: dict) -> None:
        self._numbers[name] = (time.monotonic(), numbers)

    def forget(self, name: str) -> None:
        self._numbers.pop(name, None)

    async def _read_all(self, rows: list[dict], read: Read) -> None:
        queue = list(reversed(rows))

        async def reader() -> None:
            while queue:
                row = queue.pop()
                try:
                    self.put(row["name"], await read(row))
                except TopicNotFound:
                    self.forget(row["name"])
                except TmsError as exc:  # left unknown: the next sort's walk reads it again
                    log.info("console: reading the numbers of %s failed: %s", row["name"], exc)

        await asyncio.gather(*(reader() for _ in range(self.parallel)))
