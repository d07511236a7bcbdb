"""tms-hbase for asyncio programs: :class:`AsyncMessagingClient` (docs/asyncio.md)."""

from tms_hbase.aio.client import AsyncMessagingClient

__all__ = ["AsyncMessagingClient"]
