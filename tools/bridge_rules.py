"""Check the asyncio bridge's rule on the source: protocol code waits only through ``tms_hbase.runtime.green``.

    python -m tools.bridge_rules      # exit 1, listing each use, if protocol code can block (make lint)

Protocol code runs on the caller's thread for the synchronous clients and in greenlets on an event loop for
the asyncio clients and the gateway (docs/architecture.md#how-protocol-code-waits). One blocking wait there
(a ``time.sleep``, a ``threading`` lock, event, condition or thread, a ``queue`` or ``concurrent.futures``
wait, ``select``, a socket timeout) stops the loop of every asyncio user and every gateway worker, and
nothing else would notice. This scans the protocol packages' syntax trees (aliases and ``from`` imports
included) for those names; the few modules that run on a thread of their own by design are listed in
:data:`ALLOWED` with the reason, and an allowance nothing uses any more is an error too.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "tms_hbase"

# The packages and modules whose code the asyncio clients and the gateway run on an event loop.
PROTOCOL = (
    "aio",
    "consume",
    "fetch",
    "installation",
    "isolation",
    "ordering",
    "publish",
    "shared",
    "storage",
    "sweep",
    "tx",
    "txaware",
    "client.py",
    "client_admin.py",
    "client_slices.py",
)

# (module relative to tms_hbase/, what it uses): why it may
ALLOWED = {
    # BackgroundPublisher is a thread by design (the caller's thread never waits on HBase); asyncio users
    # publish with AsyncMessagingClient instead.
    ("publish/background.py", "threading.Thread"): "a publishing thread by design",
    ("publish/background.py", "threading.Lock"): "a publishing thread by design",
    ("publish/background.py", "threading.Condition"): "a publishing thread by design",
    ("publish/background.py", "concurrent.futures.Future"): "a publishing thread by design",
    ("publish/futures.py", "concurrent.futures.Future"): "the publishing thread's futures",
    ("publish/futures.py", "threading.Condition"): "the publishing thread's futures",
    # the blocking driver's sockets; the asyncio driver (storage/aio.py) has sockets of its own
    ("storage/connection.py", "settimeout"): "the blocking driver's sockets",
    ("storage/connection.py", "socket.SO_RCVTIMEO"): "the blocking driver's sockets",
    ("storage/connection.py", "socket.SO_SNDTIMEO"): "the blocking driver's sockets",
}

# module -> the names in it that block a thread
BLOCKING = {
    "time": {"sleep"},
    "threading": {"Event", "Condition", "Thread", "Semaphore", "BoundedSemaphore", "Barrier", "Timer", "Lock", "RLock"},
    "queue": {"Queue", "SimpleQueue", "LifoQueue", "PriorityQueue"},
    "concurrent.futures": {"Future", "ThreadPoolExecutor", "ProcessPoolExecutor", "wait", "as_completed"},
    "socket": {"create_connection", "setdefaulttimeout", "SO_RCVTIMEO", "SO_SNDTIMEO"},
}
BLOCKING_MODULES = {"select", "selectors"}
# methods that block on any object that has them (a socket's timeout)
BLOCKING_METHODS = {"settimeout"}


def protocol_files(library: Path = LIBRARY) -> list[Path]:
    files: list[Path] = []
    for name in PROTOCOL:
        path = library / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each blocking name in ``tree``."""
    aliases = _aliases(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name in BLOCKING_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and not node.level:
            if node.module in BLOCKING_MODULES:
                found.append((node.lineno, node.module))
            found += [
                (node.lineno, f"{node.module}.{alias.name}")
                for alias in node.names
                if alias.name in BLOCKING.get(node.module, ())
            ]
        elif isinstance(node, ast.Attribute):
            if node.attr in BLOCKING_METHODS:
                found.append((node.lineno, node.attr))
            dotted = _dotted(node, aliases)
            if dotted is not None and _blocks(dotted):
                found.append((node.lineno, dotted))
    return found


def _aliases(tree: ast.AST) -> dict[str, str]:
    """The names ``import x as y`` binds: y -> x (``import a.b`` binds ``a`` to itself)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
    return names


def _dotted(node: ast.Attribute, aliases: dict[str, str]) -> str | None:
    parts = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if not isinstance(value, ast.Name):
        return None
    parts.append(aliases.get(value.id, value.id))
    return ".".join(reversed(parts))


def _blocks(dotted: str) -> bool:
    module, _, name = dotted.rpartition(".")
    return name in BLOCKING.get(module, ()) or module in BLOCKING_MODULES


def violations(library: Path = LIBRARY) -> tuple[list[str], set[tuple[str, str]]]:
    """The uses not allowed (``tms_hbase/<module>:<line>: <what>``), and the allowances nothing needs."""
    broken: list[str] = []
    used: set[tuple[str, str]] = set()
    for path in protocol_files(library):
        relative = path.relative_to(library).as_posix()
        for line, what in uses(ast.parse(path.read_text(), str(path))):
            if (relative, what) in ALLOWED:
                used.add((relative, what))
            else:
                broken.append(f"tms_hbase/{relative}:{line}: {what}")
    return broken, set(ALLOWED) - used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bridge_rules", description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, default=LIBRARY, help="the tms_hbase package (default: this one)")
    args = parser.parse_args(argv)
    broken, unused = violations(args.library)
    for line in broken:
        print(f"{line} blocks the event loop: wait through tms_hbase.runtime.green", file=sys.stderr)
    for module, what in sorted(unused):
        print(f"tms_hbase/{module}: no longer uses {what}: remove it from ALLOWED", file=sys.stderr)
    return 1 if broken or unused else 0


if __name__ == "__main__":
    sys.exit(main())
