"""tms-admin bench, run as a process against the real HBase: its JSON says what it measured (every message
published was consumed, with rates and latency percentiles), it shows progress on stderr, and it leaves no
topic, subscription or message behind."""

from __future__ import annotations

import json
import subprocess

import happybase
import pytest

from tms_hbase.config import PREFIX_ENV, thrift_address

from .test_cli import TMS_ADMIN, ok, tms_admin


def _rows(hbase_address: str, prefix: str, kind: str) -> int:
    host, port = thrift_address(hbase_address)
    conn = happybase.Connection(host, port)
    try:
        return sum(1 for _ in conn.table(f"{prefix}_{kind}").scan(filter="KeyOnlyFilter()"))
    finally:
        conn.close()


def _bench(env: dict[str, str], *args: str) -> tuple[dict, str]:
    result = subprocess.run([TMS_ADMIN, "bench", *args, "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


@pytest.mark.usefixtures("installed_env")  # made through the library: `tms-admin init` is test_cli.py's
def test_bench_publishes_consumes_reports_and_leaves_nothing(tms_env: dict[str, str], hbase_address: str) -> None:
    report, progress = _bench(tms_env, "--count", "3000", "--publishers", "2", "--batch", "10", "--size", "64")
    assert report["settings"] == {
        "size": 64,
        "count": 3000,
        "duration": None,
        "publishers": 2,
        "batch": 10,
        "rate": None,
        "mode": "sync",
        "consumer": "concurrent",
    }
    publish, consume = report["publish"], report["consume"]
    assert publish["messages"] == consume["messages"] == 3000 and consume["complete"] is True
    for side in (publish, consume):
        assert side["messages_per_second"] > 0 and side["seconds"] > 0
        lat = side["latency_ms"]
        assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    assert len(report["load_average"]) == 3
    assert "bench:" in progress or publish["seconds"] < 1  # a line a second while it runs
    assert json.loads(ok(tms_env, "topic", "list", "tms-bench", "--json").stdout) == []
    prefix = tms_env[PREFIX_ENV]
    assert [_rows(hbase_address, prefix, kind) for kind in ("messages", "payloads", "subscriptions")] == [0, 0, 0]


@pytest.mark.usefixtures("installed_env")  # made through the library: `tms-admin init` is test_cli.py's
def test_bench_pipelined_for_a_duration_at_a_rate_then_consumes_after(tms_env: dict[str, str]) -> None:
    report, _ = _bench(
        tms_env, "--mode", "pipelined", "--duration", "2", "--rate", "500", "--consumer", "after", "--ordering", "chain"
    )
    publish, consume = report["publish"], report["consume"]
    assert report["ordering"] == "chain" and report["settings"]["mode"] == "pipelined"
    assert 0 < publish["messages"] <= 500 * 2 + 1  # paced: never ahead of the rate
    assert consume["messages"] == publish["messages"] and consume["complete"] is True
    assert publish["latency_ms"]["p50"] > 0 and consume["latency_ms"] is None  # no latency for a catch-up read


def test_bench_refuses_bad_input_and_a_missing_installation(tms_env: dict[str, str]) -> None:
    both = tms_admin(tms_env, "bench", "--count", "5", "--duration", "1")
    assert both.returncode == 2 and "give --count or --duration, not both" in both.stderr
    assert tms_admin(tms_env, "bench", "--size", "0").returncode == 2
    missing = tms_admin(tms_env, "bench", "--count", "5")  # no `tms-admin init` yet: exit code 7, nothing made
    assert missing.returncode == 7 and "init" in missing.stderr
