"""Generate the asyncio client's forwarding operations from the asyncio interface.

:class:`~tms_hbase.aio.client.AsyncMessagingClient` runs the blocking client's protocol code on the event loop,
and most of its operations do nothing more: ``await self._run(lambda c: c.get_topic(topic))``. Those are
generated, with the interface's signatures and docstrings, into ``tms_hbase/aio/forwarding.py``
(``ForwardedOperations``, the client's base), so that a keyword added to an operation in ``tms_hbase/api.py``
reaches the asyncio client without an edit there. ``tools/unasync.py`` calls :func:`forwarding_module` on the
asyncio interface it generates from ``tms_hbase/api.py`` (``python -m tools.unasync``; ``--check`` in
``make lint``).

Every coroutine of ``AsyncMessagingService`` is forwarded but those with asyncio behaviour of their own,
written by hand in the client and listed in :data:`HAND_WRITTEN`: a new operation is forwarded by default.
A method of the interface that is not a coroutine (it returns an iterator or a consumer) cannot be forwarded
and must be listed there.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping

INTERFACE = "AsyncMessagingService"

# name -> what AsyncMessagingClient does in it beyond running the blocking client's operation
HAND_WRITTEN = {
    "__aenter__": "connects, and returns the client",
    "__aexit__": "closes as close() does",
    "close": "waits for coalesced and cancelled publishes before closing the connections",
    "publish": "coalesces concurrent publishes and runs a cancelled write on to its outcome",
    "fetch": "an async iterator that reads in chunks on the event loop",
    "consumer": "an unopened asyncio consumer, opened by `async with`",
    "shared_consumer": "an unopened asyncio shared consumer, opened by `async with`",
}

CLIENT = "c"  # the blocking client's name in each forwarding lambda

TEMPLATE = '''\
"""The operations of :class:`~tms_hbase.aio.client.AsyncMessagingClient` that run the blocking client's on the
event loop and do nothing more, with :class:`~tms_hbase.aio.api.AsyncMessagingService`'s signatures and
docstrings (by ``tools/forwarding.py``). The operations with asyncio behaviour of their own are written in the
client and listed in that tool's ``HAND_WRITTEN``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from tms_hbase.aio.api import AsyncMessagingService

if TYPE_CHECKING:
    from tms_hbase.client import MessagingClient
{imports}

T = TypeVar("T")


class ForwardedOperations(AsyncMessagingService):
    """Each operation as the blocking client's, run by :meth:`_run`."""

    @abstractmethod
    async def _run(self, call: Callable[[MessagingClient], T]) -> T:
        """``call`` of the client's blocking protocol code, run on the event loop."""
{methods}'''


class ForwardingError(ValueError):
    """The interface has an operation that cannot be forwarded and is not listed as hand-written."""


def forwarding_module(interface: str, hand_written: Mapping[str, str] = HAND_WRITTEN) -> str:
    """The text of ``tms_hbase/aio/forwarding.py`` (before formatting) for the text of the asyncio interface,
    forwarding each operation but those in ``hand_written``."""
    tree = ast.parse(interface)
    service = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == INTERFACE)
    operations = {node.name: node for node in service.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    if stale := sorted(hand_written.keys() - operations.keys()):
        raise ForwardingError(f"HAND_WRITTEN names what {INTERFACE} does not have: {', '.join(stale)}")
    forwarded = [node for name, node in operations.items() if name not in hand_written]
    methods = "".join(_method(interface, node) for node in forwarded)
    annotations = [part for node in forwarded for part in (node.args, node.returns) if part is not None]
    used = {name.id for part in annotations for name in ast.walk(part) if isinstance(name, ast.Name)}
    imports = "".join(f"    {line}\n" for line in _imports(tree, used))
    return TEMPLATE.format(imports=imports, methods=methods)


def _method(interface: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """One forwarding coroutine with the interface's signature and docstring."""
    if not isinstance(node, ast.AsyncFunctionDef):
        raise ForwardingError(
            f"{INTERFACE}.{node.name} is not a coroutine, so it cannot be forwarded: write it in "
            "AsyncMessagingClient and list it in tools/forwarding.py's HAND_WRITTEN"
        )
    returns = ast.unparse(node.returns) if node.returns else "None"
    call = f"self._run(lambda {CLIENT}: {CLIENT}.{node.name}({', '.join(_passed(node))}))"
    docstring = ast.get_docstring(node, clean=False)
    lines = [f"    async def {node.name}({ast.unparse(node.args)}) -> {returns}:"]
    if docstring is not None:
        lines.append(f"        {ast.get_source_segment(interface, node.body[0])}")
    lines.append(f"        await {call}" if returns == "None" else f"        return await {call}")
    return "\n" + "\n".join(lines) + "\n"


def _passed(node: ast.AsyncFunctionDef) -> Iterator[str]:
    """The arguments of the forwarded call: positional ones in place, keyword-only ones by keyword."""
    arguments = node.args
    positional = [*arguments.posonlyargs, *arguments.args][1:]  # without self
    names = [argument.arg for argument in (*positional, *arguments.kwonlyargs)]
    names += [argument.arg for argument in (arguments.vararg, arguments.kwarg) if argument is not None]
    if CLIENT in names:
        raise ForwardingError(f"{INTERFACE}.{node.name} has a parameter named {CLIENT!r}, the forwarding lambda's")
    yield from (argument.arg for argument in positional)
    if arguments.vararg is not None:
        yield f"*{arguments.vararg.arg}"
    yield from (f"{argument.arg}={argument.arg}" for argument in arguments.kwonlyargs)
    if arguments.kwarg is not None:
        yield f"**{arguments.kwarg.arg}"


def _imports(tree: ast.Module, used: set[str]) -> Iterator[str]:
    """The interface module's ``from`` imports (its ``TYPE_CHECKING`` ones included) of the names in ``used``,
    to import for type checking only."""
    blocks = [tree.body, *(node.body for node in tree.body if isinstance(node, ast.If))]
    for block in blocks:
        for node in block:
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                names = [ast.unparse(alias) for alias in node.names if (alias.asname or alias.name) in used]
                if names:
                    yield f"from {node.module} import {', '.join(names)}"
