"""The documented examples run as they are against the real HBase."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_runs(tms_env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        env=tms_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "all: [b'created', b'paid', b'refund', b'part-1', b'part-2']"
    assert lines[2] == "committed: [b'created', b'paid', b'part-1', b'part-2']"
    assert lines[3] == "after paid: [b'refund', b'part-1', b'part-2']"
    assert lines[5].startswith("background stored: 000000010")  # the id of the message: generation 1
    assert lines[6] == "consumed: [b'created', b'paid', b'part-1', b'part-2', b'async']"  # not the refund
    assert lines[7] == "consumed == committed: True"
    assert lines[8] == "behind by: 0 messages"
