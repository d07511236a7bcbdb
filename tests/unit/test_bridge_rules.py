"""The asyncio bridge's rules (docs/architecture.md#how-protocol-code-waits), checked on the source.

Protocol code runs on the caller's thread for the blocking client and in greenlets on an event loop for the
asyncio client and the gateway (:mod:`tms_hbase.runtime.green`). It may therefore wait only through
``runtime.green`` (``sleep``, ``lock``, ``event``, ``condition``, ``semaphore``, ``start_thread``,
``wait_readable``), which waits on the loop where there is one: a ``time.sleep``, a ``threading`` event,
condition or thread, a ``select`` or a socket timeout would block the loop of every asyncio user and every
gateway worker, and nothing else would notice. State shared by all callers is guarded by
``runtime.green.no_wait_lock`` only, never a bare ``threading`` lock: the tests run with its check on.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tms_hbase

LIBRARY = Path(tms_hbase.__file__).parent

# The packages and modules whose code the asyncio client and the gateway run on an event loop.
PROTOCOL = (
    "aio",
    "consume",
    "fetch",
    "installation",
    "publish",
    "shared",
    "storage",
    "sweep",
    "tx",
    "client.py",
    "client_admin.py",
    "client_slices.py",
)

# module (relative to tms_hbase/) -> what it may use, and why
ALLOWED = {
    # BackgroundPublisher is a thread by design (the caller's thread never waits on HBase); asyncio users
    # publish with AsyncMessagingClient instead.
    ("publish/background.py", "threading.Thread"),
    # the blocking driver's sockets; the asyncio driver (storage/aio.py) has sockets of its own
    ("storage/connection.py", "settimeout"),
}

BLOCKING = {
    "time": {"sleep"},
    "threading": {"Event", "Condition", "Thread", "Semaphore", "BoundedSemaphore", "Barrier", "Timer", "Lock", "RLock"},
}
BLOCKING_MODULES = {"select", "selectors"}


def _protocol_files() -> list[Path]:
    files: list[Path] = []
    for name in PROTOCOL:
        path = LIBRARY / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def _uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each blocking primitive named in ``tree``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name in BLOCKING_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and not node.level:
            if node.module in BLOCKING_MODULES:
                found.append((node.lineno, node.module))
            for alias in node.names:
                if alias.name in BLOCKING.get(node.module, ()):
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name):
                owner = node.value.id
                if node.attr in BLOCKING.get(owner, ()) or owner in BLOCKING_MODULES:
                    found.append((node.lineno, f"{owner}.{node.attr}"))
            if node.attr == "settimeout":
                found.append((node.lineno, "settimeout"))
    return found


def test_protocol_code_waits_only_through_the_runtime() -> None:
    files = _protocol_files()
    assert len(files) > 40, "the protocol packages moved: update PROTOCOL"
    broken = []
    for path in files:
        relative = path.relative_to(LIBRARY).as_posix()
        for line, what in _uses(ast.parse(path.read_text(), str(path))):
            if (relative, what) not in ALLOWED:
                broken.append(f"tms_hbase/{relative}:{line}: {what}")
    assert broken == [], "protocol code blocks the event loop (wait through tms_hbase.runtime.green):\n" + "\n".join(
        broken
    )


def test_every_exception_is_still_used() -> None:
    """An allowance that nothing needs any more is removed, so it cannot hide a new use."""
    used = set()
    for path in _protocol_files():
        relative = path.relative_to(LIBRARY).as_posix()
        used |= {(relative, what) for _, what in _uses(ast.parse(path.read_text(), str(path)))}
    assert used >= ALLOWED, f"no longer needed: {sorted(ALLOWED - used)}"


def test_the_scan_finds_what_it_forbids() -> None:
    source = (
        "import time, threading, select\n"
        "from threading import Event\n"
        "time.sleep(1)\n"
        "threading.Thread(target=print).start()\n"
        "select.select([], [], [], 1)\n"
        "sock.settimeout(2)\n"
        "threading.Lock()\n"
    )
    assert sorted(_uses(ast.parse(source))) == [
        (1, "select"),
        (2, "threading.Event"),
        (3, "time.sleep"),
        (4, "threading.Thread"),
        (5, "select.select"),
        (6, "settimeout"),
        (7, "threading.Lock"),
    ]
