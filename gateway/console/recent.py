"""Recent answers of the console's costly reads, served again while a fresh read runs in the background.

A topic's screen reads its statistics and every subscription's lag: a few HBase reads per subscription,
hundreds of milliseconds for a topic with a hundred subscriptions on a busy cluster. The Prometheus
exporter keeps its reads for ``max_age`` seconds for the same reason. Here an answer younger than
:attr:`Recent.max_age` is served as it is; an older one is served too, and one read (per key) starts as
one of the gateway's library calls to replace it; the screen shows when its numbers were read and refreshes
itself. A key never read, or whose last read failed, is read while the caller waits. Changes made
through the console drop the topic's answer, so the next screen shows them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tms_hbase.errors import TmsError

log = logging.getLogger(__name__)
Read = Callable[[], Awaitable[Any]]  # a read: one or a few of the gateway's library calls


class Recent:
    """Answers by key, each with the monotonic time it was read. Used from the event loop only."""

    def __init__(self, max_age: float = 5.0, max_keys: int = 1000) -> None:
        self.max_age = max_age
        self.max_keys = max_keys
        self._answers: dict[str, tuple[float, Any]] = {}
        self._reading: set[str] = set()
        self._tasks: set[asyncio.Task] = set()

    async def get(self, key: str, read: Read) -> Any:
        """The answer for ``key``: read now if there is none, else the last one (refreshed behind it
        when older than ``max_age``)."""
        if key not in self._answers:
            return self._keep(key, await read())
        return self.known(key, read)

    def known(self, key: str, read: Read) -> Any:
        """The last answer for ``key`` (None: none yet), with a read started behind it when there is none or it
        is older than ``max_age``: for a caller that has something cheaper to show meanwhile."""
        found = self._answers.get(key)
        if (found is None or time.monotonic() - found[0] >= self.max_age) and key not in self._reading:
            self._reading.add(key)
            task = asyncio.get_running_loop().create_task(self._refresh(key, read))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return None if found is None else found[1]

    def peek(self, key: str) -> Any:
        """The last answer for ``key`` however old (None: none), reading nothing."""
        found = self._answers.get(key)
        return None if found is None else found[1]

    def reading(self, key: str) -> bool:
        """Whether a read of ``key`` runs behind (:meth:`known`)."""
        return key in self._reading

    def put(self, key: str, answer: Any) -> Any:
        """Keep an answer read elsewhere (a change's own read of the result)."""
        return self._keep(key, answer)

    def forget(self, key: str) -> None:
        self._answers.pop(key, None)

    def _keep(self, key: str, answer: Any) -> Any:
        if key not in self._answers and len(self._answers) >= self.max_keys:
            self._answers.pop(next(iter(self._answers)))
        self._answers[key] = (time.monotonic(), answer)
        return answer

    async def _refresh(self, key: str, read: Read) -> None:
        try:
            self._keep(key, await read())
        except TmsError as exc:  # the next request reads while it waits, and gets the error
            log.info("console: refreshing %s failed: %s", key, exc)
            self.forget(key)
        finally:
            self._reading.discard(key)
