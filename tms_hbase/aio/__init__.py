"""tms-hbase for asyncio programs: :class:`AsyncMessagingClient` (docs/asyncio.md).

The client loads on first use (PEP 562), so that importing :mod:`tms_hbase.aio.api` (the interface the
gateway's asyncio client implements) does not load the storage port and the messaging core.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tms_hbase.aio.client import AsyncMessagingClient


def __getattr__(name: str) -> Any:
    if name != "AsyncMessagingClient":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from tms_hbase.aio.client import AsyncMessagingClient

    globals()[name] = AsyncMessagingClient
    return AsyncMessagingClient


__all__ = ["AsyncMessagingClient"]
