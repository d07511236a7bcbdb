"""`--log-format json|text` and `--log-level` of every daemon, from real processes on the real HBase: each
line of a JSON log parses and carries level, logger and message; the level filters (tms_hbase/ops/log_options.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tms_hbase import MessagingClient, TopicId

from ..gateway_server import GatewayProcess, gateway_env
from ..tx_server import free_port

BIN = Path(sys.executable).parent
LEVELS = {"debug", "info", "warning", "error", "critical"}


def json_records(stderr: str) -> list[dict]:
    """Every line as a JSON object with the fields every record has (a line that is not one fails)."""
    records = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    for record in records:
        assert record["level"] in LEVELS and record["logger"] and isinstance(record["message"], str), record
        assert record["time"].endswith("Z") and isinstance(record["pid"], int), record
    return records


def test_sweeper_logs_json_lines_and_honours_the_level(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(TopicId("ns", "t"))
    once = [str(BIN / "tms-sweeper"), "once", "--json"]
    done = subprocess.run([*once, "--log-format", "json"], env=tms_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["regions_swept"] >= 1  # the report on stdout, the log on stderr
    records = json_records(done.stderr)
    assert any(r["logger"] == "tms_hbase_sweeper.sweep" and r["message"].startswith("sweep done") for r in records)
    assert all(r["level"] != "debug" for r in records)  # --log-level info by default

    quiet = subprocess.run(
        once, env={**tms_env, "TMS_LOG_LEVEL": "warning"}, capture_output=True, text=True, timeout=120
    )
    assert quiet.returncode == 0 and "sweep done" not in quiet.stderr, quiet.stderr
    text = subprocess.run(once, env=tms_env, capture_output=True, text=True, timeout=120).stderr
    assert " INFO [" in text and "tms_hbase_sweeper.sweep: sweep done" in text  # the text format by default


def test_tx_server_and_metrics_exporter_log_json_lines(installed_env: dict[str, str]) -> None:
    tms_env = installed_env
    commands = {  # each with the message it logs once it serves (its signal handlers are in place by then)
        "transaction server listening on": ["tx", "serve", "--port", str(free_port())],
        "serving metrics on": ["metrics", "serve", "--port", str(free_port())],
    }
    for serving, args in commands.items():
        command = [str(BIN / "tms-admin"), *args, "--log-format", "json", "--log-level", "debug"]
        proc = subprocess.Popen(command, env=tms_env, stderr=subprocess.PIPE, text=True)
        lines = []
        try:
            assert proc.stderr is not None
            while not lines or serving not in lines[-1]:  # every line until that one; EOF fails
                lines.append(proc.stderr.readline())
                assert lines[-1], "".join(lines)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, rest = proc.communicate(timeout=60)
        assert proc.returncode == 0, "".join(lines) + rest
        records = json_records("".join(lines) + rest)
        assert {"debug", "info"} <= {r["level"] for r in records}, records  # the storage port's debug lines too
        assert any(r["logger"].startswith("tms_hbase") for r in records), records


def test_gateway_log_options(client: MessagingClient, hbase_address: str, prefix: str, tmp_path: Path) -> None:
    env = {**gateway_env(hbase_address, prefix), "TMS_LOG_FORMAT": "json"}
    url = "/v1/namespaces/nope/topics/x"
    for level in ("info", "warning"):
        gateway = GatewayProcess(env, tmp_path / f"{level}.log", "--log-level", level).start()
        try:
            assert httpx.get(f"{gateway.url}{url}", timeout=30).status_code == 404
        finally:
            assert gateway.stop() == 0, gateway.log()
        records = json_records(gateway.log())
        access = [r for r in records if r["logger"] == "tms_hbase_gateway.access"]
        if level == "info":  # the access line, its fields as keys
            assert [(r["status"], r["path"]) for r in access] == [(404, url)], records
        else:
            assert access == [] and all(r["level"] != "info" for r in records), records


def test_a_bad_log_option_is_bad_input(tms_env: dict[str, str], tmp_path: Path) -> None:
    for program, args in (
        ("tms-sweeper", ["run", "--log-format", "xml"]),
        ("tms-admin", ["tx", "serve", "--log-level", "loud"]),
        ("tms-gateway", ["--log-format", "yaml"]),
    ):
        done = subprocess.run([str(BIN / program), *args], env=tms_env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "Invalid value for '--log-" in done.stderr, (program, done.stderr)
    config = tmp_path / "gateway.toml"
    config.write_text('log_level = "loud"\n')
    done = subprocess.run(
        [str(BIN / "tms-gateway"), "--config", str(config)], env=tms_env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stderr.startswith("error: log_level must be one of"), done.stderr
