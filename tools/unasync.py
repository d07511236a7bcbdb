"""Generate the asyncio interface (tms_hbase/aio/api.py) from the blocking one (tms_hbase/api.py).

    python -m tools.unasync            # rewrite tms_hbase/aio/api.py
    python -m tools.unasync --check    # exit 1 if it differs from what would be generated (make lint)

Each operation's signature and docstring are written once, in tms_hbase/api.py; adding a keyword there and
running this is all its asyncio twin needs. Line by line, as httpcore's unasync does the other way round:

- a method becomes a coroutine (``def`` to ``async def``), except a property and a method that returns an
  object to iterate or enter (a return annotation ``Iterator[...]`` or ``...Consumer``): that object is returned
  at once and does the waiting itself;
- ``Iterator`` becomes ``AsyncIterator``, ``__iter__``/``__next__`` ``__aiter__``/``__anext__``,
  ``__enter__``/``__exit__`` ``__aenter__``/``__aexit__``, ````with```` ````async with````;
- the interface's classes get an ``Async`` prefix (``MessagingService`` to ``AsyncMessagingService``...).

Where the two differ beyond that (the module's docstring, the exclusive consumer's ``open``), the source says
so in a block of comments::

    # unasync: sync
    ...lines of tms_hbase/api.py only...
    # unasync: async
    # ...lines of tms_hbase/aio/api.py only, commented out, as they appear there...
    # unasync: end

The result is formatted by ``ruff format`` (as ``make lint`` checks every file).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = Path("tms_hbase/api.py")
TARGET = Path("tms_hbase/aio/api.py")

HEADER = f"# Generated from {SOURCE} by tools/unasync.py: edit that file and run `python -m tools.unasync`.\n"

SUBSTITUTIONS = [
    (re.compile(r"\b(SharedSubscriptionConsumer|SubscriptionConsumer|MessagingService)\b"), r"Async\1"),
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
                raise PragmaError(f"{SOURCE}:{number}: '# unasync: {word}' after {section or 'no block'}")
            section = None if word == "end" else word
        elif section == "sync":
            continue
        elif section == "async":
            out.append("\0" + _uncomment(line, number))
        else:
            out.append(line)
    if section is not None:
        raise PragmaError(f"{SOURCE}: a '# unasync: {section}' block without '# unasync: end'")
    return out


def _uncomment(line: str, number: int) -> str:
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    if stripped.rstrip("\n") == "#":
        return "\n"
    if not stripped.startswith("# "):
        raise PragmaError(f"{SOURCE}:{number}: a line of an '# unasync: async' block is not commented out")
    return indent + stripped[2:]


def to_async(lines: list[str]) -> list[str]:
    """Substitute the names and make the methods coroutines (see the module's docstring)."""
    out: list[str] = []
    for index, line in enumerate(lines):
        if line.startswith("\0"):
            out.append(line[1:])
            continue
        for pattern, replacement in SUBSTITUTIONS:
            line = pattern.sub(replacement, line)
        definition = DEF.match(line)
        if definition and not _stays_plain(lines, index, out):
            indent = definition.group(1)
            line = f"{indent}async {line[len(indent) :]}"
        out.append(line)
    return out


def _stays_plain(lines: list[str], index: int, done: list[str]) -> bool:
    """A property, or a method returning an iterator or a consumer (its signature from ``lines[index]`` on)."""
    previous = next((line.strip() for line in reversed(done) if line.strip()), "")
    if previous == "@property":
        return True
    signature = ""
    for line in lines[index:]:
        signature += line.lstrip("\0").replace("\n", " ")
        if signature.count("(") == signature.count(")") and ":" in signature[signature.rindex(")") :]:
            break
    returns = RETURNS.search(signature)
    if returns is None:
        return False
    annotation = returns.group(1).strip()
    for pattern, replacement in SUBSTITUTIONS:
        annotation = pattern.sub(replacement, annotation)
    return bool(STAYS_PLAIN.match(annotation))


def generate(source: str) -> str:
    """The text of tms_hbase/aio/api.py for the text of tms_hbase/api.py, formatted."""
    body = "".join(to_async(select_async(source.splitlines(keepends=True))))
    return _format(HEADER + body)


def _format(text: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(ROOT / TARGET), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ruff format failed on the generated {TARGET}: {done.stderr.strip()}")
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.unasync", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help=f"exit 1 if {TARGET} is not what would be generated")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = parser.parse_args(argv)
    try:
        wanted = generate((args.root / SOURCE).read_text())
    except PragmaError as exc:
        print(f"unasync: {exc}", file=sys.stderr)
        return 2
    target = args.root / TARGET
    if args.check:
        if target.read_text() != wanted:
            print(f"unasync: {TARGET} is not generated from {SOURCE}: run `python -m tools.unasync`", file=sys.stderr)
            return 1
        return 0
    target.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
