"""The asyncio client for tests: an AsyncMessagingClient on a test's table prefix."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tms_hbase.aio import AsyncMessagingClient


@asynccontextmanager
async def async_client(address: str, prefix: str, **options: Any) -> AsyncIterator[AsyncMessagingClient]:
    """An AsyncMessagingClient on ``prefix`` (the test's prefix fixture drops its tables), closed afterwards;
    its first create_topic creates the tables unless ``create_tables=False`` is passed."""
    async with AsyncMessagingClient(address, prefix, **{"create_tables": True, **options}) as client:
        yield client
