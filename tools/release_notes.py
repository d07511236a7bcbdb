"""Assemble the news fragments of changes/ into a release's section of CHANGELOG.md.

    python -m tools.release_notes VERSION [--date YYYY-MM-DD] [--draft]

Every change a user would notice adds a fragment ``changes/<issue>.<slug>.md``: one to four lines saying what
changed for a user (CONTRIBUTING.md). At a release this puts them, in file-name order, as the bullets of a new
``## VERSION (date)`` section at the top of CHANGELOG.md and deletes them; ``--draft`` prints the section and
changes nothing. The fragments' names are for sorting and merging only: the notes do not show them.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAGMENT = re.compile(r"[0-9]+\.[A-Za-z0-9][A-Za-z0-9_.-]*\.md")
FIRST_SECTION = re.compile(r"^## ", re.MULTILINE)


def fragments(folder: Path) -> list[Path]:
    """The fragments of ``folder``, sorted; a file named otherwise (but the folder's README) is an error."""
    found: list[Path] = []
    stray: list[Path] = []
    for path in sorted(folder.glob("*")):
        if path.name == "README.md":
            continue
        (found if FRAGMENT.fullmatch(path.name) else stray).append(path)
    if stray:
        names = ", ".join(p.name for p in stray)
        raise ValueError(f"not named <issue>.<slug>.md: {names}")
    return found


def bullet(text: str) -> str:
    """One fragment as one bullet: ``- `` before its first line, the others indented under it."""
    lines = [line.rstrip() for line in text.strip().splitlines()]
    if not lines or not lines[0]:
        raise ValueError("an empty fragment")
    first = lines[0][2:] if lines[0].startswith("- ") else lines[0]
    return "\n".join([f"- {first}", *(f"  {line.strip()}" if line.strip() else "" for line in lines[1:])])


def section(version: str, date: str, paths: list[Path]) -> str:
    """The release's section of CHANGELOG.md."""
    if not paths:
        raise ValueError("no fragments in changes/: nothing to release")
    return f"## {version} ({date})\n\n" + "\n".join(bullet(p.read_text()) for p in paths) + "\n"


def insert(changelog: str, text: str) -> str:
    """``changelog`` with ``text`` before its first release section (at the end if it has none)."""
    match = FIRST_SECTION.search(changelog)
    at = match.start() if match else len(changelog)
    return changelog[:at] + text + "\n" + changelog[at:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.release_notes", description=__doc__.split("\n")[0])
    parser.add_argument("version", help="the version being released, e.g. 0.2.0")
    parser.add_argument("--date", default=datetime.date.today().isoformat(), help="the release date (default today)")
    parser.add_argument("--draft", action="store_true", help="print the section; change nothing")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        paths = fragments(args.root / "changes")
        text = section(args.version, args.date, paths)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.draft:
        print(text, end="")
        return 0
    changelog = args.root / "CHANGELOG.md"
    changelog.write_text(insert(changelog.read_text(), text))
    for path in paths:
        path.unlink()
    print(f"CHANGELOG.md: {args.version} with {len(paths)} changes; the fragments are deleted (commit both)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
