"""The asyncio client for tests: an AsyncMessagingClient on a test's table prefix."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tms_hbase import TopicId
from tms_hbase.aio import AsyncMessagingClient
from tms_hbase.config import Config


@asynccontextmanager
async def async_client(address: str, prefix: str, **options: Any) -> AsyncIterator[AsyncMessagingClient]:
    """An AsyncMessagingClient on ``prefix`` (the test's prefix fixture drops its tables), closed afterwards;
    its first create_topic creates the tables unless ``create_tables=False`` is passed."""
    async with AsyncMessagingClient(address, prefix, **{"create_tables": True, **options}) as client:
        yield client


async def round_trip(config: Config, topic: TopicId) -> tuple[list[bytes], list[bytes]]:
    """Through an AsyncMessagingClient on ``config``: create ``topic`` and a subscription, publish eight
    messages at once, fetch them and poll them with a consumer; (fetched, polled) payloads."""
    async with AsyncMessagingClient(config=config) as client:
        await client.create_topic(topic)
        await client.create_subscription(topic, "work")
        await asyncio.gather(*(client.publish(topic, [b"m%d" % i]) for i in range(8)))
        fetched = [m.payload async for m in client.fetch(topic)]
        async with client.consumer(topic, "work") as consumer:
            polled = [m.payload for m in await consumer.poll(10, timeout_seconds=30)]
            await consumer.commit()
        return fetched, polled
