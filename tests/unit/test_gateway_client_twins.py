"""The blocking and the asyncio gateway clients offer the same calls with the same arguments.

Their one-request operations are generated from one source (tools/unasync.py, checked by ``make lint``) and
mypy holds each client to its interface; this also covers what each writes by hand (fetching, consumers,
the asyncio client's publish, the settings, ``run``): a method or keyword added to one client and not the
other fails here. The differences the asyncio client is meant to have are listed with it."""

from __future__ import annotations

import inspect

import pytest

from tms_hbase.gateway_client.aio import AsyncGatewayClient
from tms_hbase.gateway_client.aio_consumers import AsyncGatewayConsumer, AsyncGatewaySharedConsumer
from tms_hbase.gateway_client.http import GatewayClient, GatewayConsumer
from tms_hbase.gateway_client.http_shared import GatewaySharedConsumer

# the asyncio names of the blocking client's protocol methods
ASYNC_NAMES = {"__enter__": "__aenter__", "__exit__": "__aexit__", "__iter__": "__aiter__", "__next__": "__anext__"}


def surface(cls: type) -> dict[str, list[tuple[str, str, object]]]:
    """The public methods and properties of ``cls`` (and ``__init__`` and the protocol methods), each with its
    parameters (name, kind, default) under its asyncio name."""
    names = {n for n in dir(cls) if not n.startswith("_")} | {"__init__"}
    names |= {n for n in (*ASYNC_NAMES, *ASYNC_NAMES.values()) if hasattr(cls, n)}
    result = {}
    for name in names:
        attribute = inspect.getattr_static(cls, name)
        if isinstance(attribute, property) or name in ASYNC_NAMES or name in ASYNC_NAMES.values():
            result[name] = []  # a property, or a method whose arguments Python sets
        elif callable(attribute):
            parameters = inspect.signature(getattr(cls, name)).parameters.values()
            result[name] = [(p.name, p.kind.name, p.default) for p in parameters]
    return {ASYNC_NAMES.get(name, name): params for name, params in result.items()}


def differences(blocking: type, asynchronous: type, expected: dict[str, str]) -> list[str]:
    """How the two classes' surfaces differ, but for ``expected``: {name: why} of what only the asyncio class
    has, or a method whose arguments differ on purpose."""
    sync, aio = surface(blocking), surface(asynchronous)
    found = [f"{name}: only in {blocking.__name__}" for name in sorted(sync.keys() - aio.keys())]
    found += [f"{name}: only in {asynchronous.__name__}" for name in sorted(aio.keys() - sync.keys() - expected.keys())]
    for name in sorted(sync.keys() & aio.keys() - expected.keys()):
        if sync[name] != aio[name]:
            found.append(f"{name}: arguments differ: {sync[name]} != {aio[name]}")
    return found


@pytest.mark.parametrize(
    ("blocking", "asynchronous", "expected"),
    [
        (
            GatewayClient,
            AsyncGatewayClient,
            {
                "__init__": "max_connections: calls in flight at once on one event loop",
                "run": "since: a coalesced publish's deadline counts from when it was queued",
            },
        ),
        (
            GatewayConsumer,
            AsyncGatewayConsumer,
            {
                "__init__": "made by the clients' consumer(), whose arguments are compared",
                "open": "the asyncio consumer opens in `async with` or `await open()`",
            },
        ),
        (
            GatewaySharedConsumer,
            AsyncGatewaySharedConsumer,
            {"__init__": "made by the clients' shared_consumer(), whose arguments are compared"},
        ),
    ],
)
def test_the_blocking_and_the_asyncio_class_offer_the_same_calls(
    blocking: type, asynchronous: type, expected: dict[str, str]
) -> None:
    assert differences(blocking, asynchronous, expected) == []


class _Blocking:
    def __enter__(self) -> _Blocking:
        return self

    def lag(self, topic: str, name: str) -> None: ...

    def pending(self, topic: str, name: str, *, limit: int | None = None) -> None: ...

    def fetch(self, topic: str, limit: int | None = None) -> None: ...


class _Drifted:
    async def __aenter__(self) -> _Drifted:
        return self

    async def lag(self, topic: str, name: str) -> None: ...

    async def pending(self, topic: str, name: str, *, limit: int | None = 100) -> None: ...

    async def extra(self) -> None: ...


def test_a_method_or_an_argument_in_one_client_only_is_a_difference() -> None:
    found = differences(_Blocking, _Drifted, {})
    assert [line.split(":")[0] for line in found] == ["fetch", "extra", "pending"]
    assert found[0] == "fetch: only in _Blocking"
    assert found[1] == "extra: only in _Drifted"
    assert "('limit', 'KEYWORD_ONLY', None)] != [" in found[2]
    assert found[2].endswith("('limit', 'KEYWORD_ONLY', 100)]")
    assert differences(_Blocking, _Drifted, {"extra": "on purpose", "pending": "on purpose"}) == found[:1]
