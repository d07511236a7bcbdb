"""The asyncio bridge's rules (docs/architecture.md#how-protocol-code-waits), checked on the source by
``tools/bridge_rules.py`` (which ``make lint`` runs).

Protocol code runs on the caller's thread for the blocking client and in greenlets on an event loop for the
asyncio client and the gateway (:mod:`tms_hbase.runtime.bridge`). It may therefore wait only through
``runtime.green`` (``sleep``, ``lock``, ``event``, ``condition``, ``semaphore``, ``start_thread``,
``wait_readable``), which waits on the loop where there is one: a ``time.sleep``, a ``threading`` event,
condition or thread, a ``queue`` or ``concurrent.futures`` wait, a ``select`` or a socket timeout would block
the loop of every asyncio user and every gateway worker, and nothing else would notice. State shared by all
callers is guarded by ``runtime.green.no_wait_lock`` only, never a bare ``threading`` lock: the tests run with
its check on. tests/unit/conftest.py runs the memory-port scenarios through the bridge as well.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from tools import bridge_rules


def test_protocol_code_waits_only_through_the_runtime() -> None:
    assert len(bridge_rules.protocol_files()) > 40, "the protocol packages moved: update PROTOCOL"
    broken, unused = bridge_rules.violations()
    assert broken == [], "protocol code blocks the event loop (wait through tms_hbase.runtime.green):\n" + "\n".join(
        broken
    )
    assert unused == set(), f"allowances no longer needed (remove them, so they cannot hide a new use): {unused}"


def test_the_scan_finds_what_it_forbids() -> None:
    source = (
        "import time, threading, select\n"
        "from threading import Event\n"
        "time.sleep(1)\n"
        "threading.Thread(target=print).start()\n"
        "select.select([], [], [], 1)\n"
        "sock.settimeout(2)\n"
        "threading.Lock()\n"
        "import threading as th, socket, concurrent.futures\n"
        "th.Condition()\n"
        "socket.create_connection(('h', 1), timeout=3)\n"
        "sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, b'')\n"
        "concurrent.futures.Future().result()\n"
        "from queue import Queue\n"
        "from time import sleep as nap\n"
        "socket.setdefaulttimeout(1)\n"
        "socket.gethostname()\n"  # not a wait
    )
    assert sorted(bridge_rules.uses(ast.parse(source))) == [
        (1, "select"),
        (2, "threading.Event"),
        (3, "time.sleep"),
        (4, "threading.Thread"),
        (5, "select.select"),
        (6, "settimeout"),
        (7, "threading.Lock"),
        (9, "threading.Condition"),
        (10, "socket.create_connection"),
        (11, "socket.SO_RCVTIMEO"),
        (12, "concurrent.futures.Future"),
        (13, "queue.Queue"),
        (14, "time.sleep"),
        (15, "socket.setdefaulttimeout"),
    ]


@pytest.fixture
def library(tmp_path: Path) -> Path:
    """A copy of the library to break."""
    copy = tmp_path / "tms_hbase"
    shutil.copytree(bridge_rules.LIBRARY, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_a_blocking_sleep_added_to_protocol_code_fails_the_check(
    library: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bridge_rules.main(["--library", str(library)]) == 0
    writer = library / "publish" / "writer.py"
    writer.write_text(writer.read_text() + "\n\ndef _pause() -> None:\n    import time\n\n    time.sleep(0.1)\n")
    assert bridge_rules.main(["--library", str(library)]) == 1
    assert "tms_hbase/publish/writer.py:" in capsys.readouterr().err


def test_an_allowance_nothing_uses_fails_the_check(library: Path, capsys: pytest.CaptureFixture[str]) -> None:
    background = library / "publish" / "background.py"
    background.write_text(background.read_text().replace("threading.Thread(", "green.start_thread("))
    assert bridge_rules.main(["--library", str(library)]) == 1
    assert "no longer uses threading.Thread" in capsys.readouterr().err
