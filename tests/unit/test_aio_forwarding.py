"""AsyncMessagingClient offers every operation of AsyncMessagingService with the interface's own signature.

Each operation is either forwarded by the generated ``ForwardedOperations`` (tms_hbase/aio/forwarding.py, from
tms_hbase/api.py by ``python -m tools.unasync``) or written by hand in the client and listed in
tools/forwarding.py's ``HAND_WRITTEN``; a forwarded one the client also defines would hide the generated one.
"""

from __future__ import annotations

import inspect

import pytest

from tms_hbase.aio.api import AsyncMessagingService
from tms_hbase.aio.client import AsyncMessagingClient
from tms_hbase.aio.forwarding import ForwardedOperations
from tools.forwarding import HAND_WRITTEN


def operations(cls: type) -> set[str]:
    """The methods ``cls`` defines itself (its public ones and its ``__aenter__``/``__aexit__``)."""
    return {
        name
        for name, value in vars(cls).items()
        if inspect.isfunction(value) and (not name.startswith("_") or name in {"__aenter__", "__aexit__"})
    }


INTERFACE = operations(AsyncMessagingService)
FORWARDED = operations(ForwardedOperations)


def test_each_operation_is_forwarded_or_written_by_hand_in_the_client() -> None:
    assert INTERFACE  # (the interface's methods are found)
    assert INTERFACE - FORWARDED - HAND_WRITTEN.keys() == set()  # neither forwarded nor written by hand
    assert FORWARDED & HAND_WRITTEN.keys() == set()
    assert HAND_WRITTEN.keys() <= operations(AsyncMessagingClient)  # written in the client itself
    assert FORWARDED & operations(AsyncMessagingClient) == set()  # not hidden by a hand-written one


@pytest.mark.parametrize("name", sorted(FORWARDED))
def test_a_forwarded_operation_has_the_interface_s_signature(name: str) -> None:
    assert name in INTERFACE
    forwarded = getattr(AsyncMessagingClient, name)
    assert forwarded is vars(ForwardedOperations)[name]
    assert inspect.iscoroutinefunction(forwarded)
    assert inspect.signature(forwarded) == inspect.signature(getattr(AsyncMessagingService, name))
    assert inspect.getdoc(forwarded) == inspect.getdoc(getattr(AsyncMessagingService, name))
