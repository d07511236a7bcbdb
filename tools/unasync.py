"""Generate the asyncio twins of the blocking sources: each operation's signature and docstring written once.

    python -m tools.unasync            # rewrite the twins
    python -m tools.unasync --check    # exit 1 if a twin differs from what would be generated (make lint)

The twins (:data:`TWINS`): the asyncio interface ``tms_hbase/aio/api.py`` from ``tms_hbase/api.py``; the
asyncio gateway client's forwarding operations ``tms_hbase/gateway_client/aio_operations.py`` from the
blocking client's ``tms_hbase/gateway_client/operations.py``; and the asyncio direct client's forwarding
operations ``tms_hbase/aio/forwarding.py``, made by ``tools/forwarding.py`` of the asyncio interface.
Adding a keyword to a source and running this is all its asyncio twins need. Line by line, as httpcore's
unasync does the other way round:

- a method becomes a coroutine (``def`` to ``async def``), except a property and a method that returns an
  object to iterate or enter (a return annotation ``Iterator[...]`` or ``...Consumer``): that object is returned
  at once and does the waiting itself; a call of one of the file's coroutines on ``self`` is awaited
  (``self.run(`` to ``await self.run(``);
- ``Iterator`` becomes ``AsyncIterator``, ``__iter__``/``__next__`` ``__aiter__``/``__anext__``,
  ``__enter__``/``__exit__`` ``__aenter__``/``__aexit__``, ````with```` ````async with````;
- the interface's classes get an ``Async`` prefix (``MessagingService`` to ``AsyncMessagingService``...), and
  ``tms_hbase.api`` becomes ``tms_hbase.aio.api``.

Where the two differ beyond that (a module's docstring, the exclusive consumer's ``open``), the source says
so in a block of comments::

    # unasync: sync
    ...lines of the blocking source only...
    # unasync: async
    # ...lines of the asyncio twin only, commented out, as they appear there...
    # unasync: end

The result's imports are sorted and it is formatted by ruff (as ``make lint`` checks every file).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tools.forwarding import ForwardingError, forwarding_module

ROOT = Path(__file__).resolve().parents[1]


def _as_is(text: str) -> str:
    return text


@dataclass(frozen=True)
class Twin:
    """A blocking source and the asyncio file generated from it (paths relative to the repository): ``build``
    makes the file of the source's asyncio text (by default, that text itself)."""

    source: Path
    target: Path
    build: Callable[[str], str] = _as_is


TWINS = (
    Twin(Path("tms_hbase/api.py"), Path("tms_hbase/aio/api.py")),
    Twin(Path("tms_hbase/gateway_client/operations.py"), Path("tms_hbase/gateway_client/aio_operations.py")),
    Twin(Path("tms_hbase/api.py"), Path("tms_hbase/aio/forwarding.py"), forwarding_module),
)

SUBSTITUTIONS = [
    (
        re.compile(r"\b(SharedSubscriptionConsumer|SubscriptionConsumer|MessagingService|GatewayOperations)\b"),
        r"Async\1",
    ),
    (re.compile(r"\btms_hbase\.api\b"), "tms_hbase.aio.api"),
    (re.compile(r"\bIterator\b"), "AsyncIterator"),
    (re.compile(r"\b__(iter|next|enter|exit)__\b"), r"__a\1__"),
    (re.compile(r"``with``"), "``async with``"),
]
PRAGMA = re.compile(r"^\s*# unasync: (sync|async|end)\s*$")
DEF = re.compile(r"^(\s*)def (\w+)\(")
RETURNS = re.compile(r"\)\s*->\s*([^:]+):")
STAYS_PLAIN = re.compile(r"^(AsyncIterator\[.*\]|\w*Consumer)$")


class PragmaError(ValueError):
    """A ``# unasync:`` block that is not ``sync``, then ``async``, then ``end``."""


def select_async(lines: Iterable[str]) -> list[str]:
    """The lines of the asyncio twin before substitution: the ``sync`` sections dropped, the ``async`` ones
    uncommented (and kept from substitution, marked by a leading NUL)."""
    out: list[str] = []
    section: str | None = None
    for number, line in enumerate(lines, 1):
        pragma = PRAGMA.match(line)
        if pragma:
            word = pragma.group(1)
            expected = {None: {"sync", "async"}, "sync": {"async", "end"}, "async": {"end"}}[section]
            if word not in expected:
                raise PragmaError(f"line {number}: '# unasync: {word}' after {section or 'no block'}")
            section = None if word == "end" else word
        elif section == "sync":
            continue
        elif section == "async":
            out.append("\0" + _uncomment(line, number))
        else:
            out.append(line)
    if section is not None:
        raise PragmaError(f"a '# unasync: {section}' block without '# unasync: end'")
    return out


def _uncomment(line: str, number: int) -> str:
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    if stripped.rstrip("\n") == "#":
        return "\n"
    if not stripped.startswith("# "):
        raise PragmaError(f"line {number}: a line of an '# unasync: async' block is not commented out")
    return indent + stripped[2:]


def to_async(lines: list[str]) -> list[str]:
    """Substitute the names, make the methods coroutines and await their calls on ``self`` (see the module's
    docstring); the lines of ``async`` blocks (a leading NUL) stay as they are."""
    kept = [line.startswith("\0") for line in lines]
    text = [line[1:] if keep else _substitute(line) for line, keep in zip(lines, kept, strict=True)]
    coroutines = {
        index: definition
        for index, line in enumerate(text)
        if not kept[index] and (definition := DEF.match(line)) and not _stays_plain(text, index)
    }
    names = "|".join(sorted(definition.group(2) for definition in coroutines.values()))
    awaited = re.compile(rf"\bself\.({names})\(") if names else None
    out: list[str] = []
    for index, line in enumerate(text):
        if index in coroutines:
            indent = coroutines[index].group(1)
            line = f"{indent}async {line[len(indent) :]}"
        if awaited is not None and not kept[index]:
            line = awaited.sub(r"await self.\1(", line)
        out.append(line)
    return out


def _substitute(text: str) -> str:
    for pattern, replacement in SUBSTITUTIONS:
        text = pattern.sub(replacement, text)
    return text


def _stays_plain(lines: list[str], index: int) -> bool:
    """A property, or a method returning an iterator or a consumer (its signature from ``lines[index]`` on)."""
    previous = next((line.strip() for line in reversed(lines[:index]) if line.strip()), "")
    if previous == "@property":
        return True
    signature = ""
    for line in lines[index:]:
        signature += line.replace("\n", " ")
        if signature.count("(") == signature.count(")") and ":" in signature[signature.rindex(")") :]:
            break
    returns = RETURNS.search(signature)
    return returns is not None and bool(STAYS_PLAIN.match(returns.group(1).strip()))


def generate(twin: Twin, source: str) -> str:
    """The text of ``twin.target`` for the text of ``twin.source``, formatted."""
    body = twin.build("".join(to_async(select_async(source.splitlines(keepends=True)))))
    header = (
        f"# Generated from {twin.source} by tools/unasync.py:\n# edit that file and run `python -m tools.unasync`.\n"
    )
    return _format(header + body, twin.target)


def _format(text: str, target: Path) -> str:
    for command in (["check", "--select", "I", "--fix"], ["format"]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", str(ROOT / target), "-"],
            input=text,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if done.returncode != 0:
            raise RuntimeError(f"ruff {command[0]} failed on the generated {target}: {done.stderr.strip()}")
        text = done.stdout
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.unasync", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a twin is not what would be generated")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = parser.parse_args(argv)
    drifted = False
    for twin in TWINS:
        try:
            wanted = generate(twin, (args.root / twin.source).read_text())
        except (PragmaError, ForwardingError) as exc:
            print(f"unasync: {twin.source}: {exc}", file=sys.stderr)
            return 2
        target = args.root / twin.target
        if not args.check:
            target.write_text(wanted)
        elif not target.exists() or target.read_text() != wanted:
            print(
                f"unasync: {twin.target} is not generated from {twin.source}: run `python -m tools.unasync`",
                file=sys.stderr,
            )
            drifted = True
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
