"""`tms-admin hbase …` without the launcher: the launcher is a distribution of its own (launcher/, never
uploaded), so a user who installed the library's wheel has none. Each command then ends with one line
saying how to install it and exit code 6; its --help still works. (tests/smoke.sh checks the same in a
virtualenv that really has only the wheel.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

# Runs tms-admin's main() as its console script does, with ``tms_hbase_launcher`` not importable: a finder
# ahead of all others answers for it as Python does for a module that is not installed.
PROBE = """
import sys

class NotInstalled:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "tms_hbase_launcher":
            raise ModuleNotFoundError("No module named " + repr(name), name=name)
        return None

sys.meta_path.insert(0, NotInstalled)
from tms_hbase_admin.cli import main
main({args!r}, prog_name="tms-admin")
"""


def _tms_admin(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "args",
    [
        ["hbase", "start", "--json"],
        ["hbase", "status"],
        ["hbase", "stop"],
        ["hbase", "logs"],
        ["hbase", "cluster", "status", "--json"],
        ["hbase", "cluster", "start", "--base-port", "19000"],
        ["hbase", "cluster", "kill", "rs1"],
    ],
    ids=" ".join,
)
def test_a_command_says_how_to_install_the_launcher(args: list[str]) -> None:
    result = _tms_admin(args)
    assert result.returncode == 6, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: the local HBase launcher is not installed")
    assert "pip install -e ./launcher" in lines[0]


@pytest.mark.parametrize("args", [["hbase", "--help"], ["hbase", "start", "--help"], ["hbase", "cluster", "--help"]])
def test_help_works_without_the_launcher(args: list[str]) -> None:
    result = _tms_admin(args)
    assert result.returncode == 0, result.stderr
    assert "Usage: tms-admin hbase" in result.stdout
