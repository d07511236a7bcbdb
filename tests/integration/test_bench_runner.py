"""The benchmark runner keeps the report of every benchmark that finished when another one fails."""

from __future__ import annotations

import pytest

from bench import run
from bench.common import Result, Settings


def finished(settings: Settings) -> Result:
    result = Result("finished", "a benchmark that works")
    result.table(["what", "msg/s"], [["publish", 1234.0]])
    return result


def broken(settings: Settings) -> Result:
    raise RuntimeError("the peer server did not start")


def test_a_failing_benchmark_keeps_the_others_report_and_fails_the_run(
    hbase_address: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(run, "BENCHMARKS", {"broken": broken, "finished": finished})
    code = run.main(["--address", hbase_address, "--only", "broken,finished", "--rounds", "1"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "| publish | 1,234 |" in out  # measured after the failure, still reported
    assert "**broken** failed: RuntimeError: the peer server did not start" in out
    assert "failed: broken" in err
