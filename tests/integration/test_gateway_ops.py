"""tms-gateway as a process: graceful SIGTERM, a worker killed with SIGKILL, HBase unreachable (503) and
back, JSON logs, bad configuration, a taken port, --help and --new-token."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.config import THRIFT_ENV
from tms_hbase.errors import HBaseUnavailable, InstallationNotFound
from tms_hbase.gateway_client.http import GatewayClient

from ..gateway_server import TMS_GATEWAY, GatewayProcess, free_port, gateway_env
from ..tcp_proxy import TcpProxy
from ..waiting import wait_for

T = TopicId("ops", "events")


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


def test_sigterm_lets_the_request_in_flight_finish(
    client: MessagingClient, hbase_address: str, prefix: str, tmp_path: Path
) -> None:
    client.create_topic(T)
    gateway = GatewayProcess(gateway_env(hbase_address, prefix), tmp_path / "gw.log", "--json").start()
    body = json.dumps({"messages": [base64.b64encode(b"in flight").decode()]}).encode()
    head = (
        f"POST /v1/namespaces/ops/topics/events/publish HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as sock:
        sock.sendall(head.encode())
        assert sock.recv(1024).startswith(b"HTTP/1.1 100 Continue")  # the endpoint is now reading the body
        gateway.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        wait_for(lambda: refused(gateway.port), "the gateway to stop accepting connections", 30)
        sock.sendall(body)
        response = b""
        while chunk := sock.recv(65536):
            response += chunk
    assert response.startswith(b"HTTP/1.1 200"), response
    assert gateway.proc.wait(30) == 0, gateway.log()  # type: ignore[union-attr]
    assert [m.payload for m in client.fetch(T)] == [b"in flight"]
    # --json: every line is a JSON object; the access line names the request and the caller
    records = [json.loads(line) for line in gateway.log().splitlines() if line.strip()]
    (access,) = [r for r in records if r["logger"] == "tms_hbase_gateway.access"]
    assert access["status"] == 200 and access["principal"] == "anonymous" and access["method"] == "POST"
    assert access["path"] == "/v1/namespaces/ops/topics/events/publish" and access["bytes_in"] == len(body)


def workers_of(gateway: GatewayProcess) -> set[int]:
    """The live worker processes of a gateway (uvicorn starts them with multiprocessing's spawn)."""
    pid = gateway.proc.pid  # type: ignore[union-attr]
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                stat = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] != "Z" and b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.add(int(child))
            except FileNotFoundError:  # gone meanwhile
                pass
    return found


def test_a_killed_worker_is_replaced_and_the_gateway_keeps_serving(
    client: MessagingClient, hbase_address: str, prefix: str, tmp_path: Path
) -> None:
    """Both original workers are killed, one after the other once the first has a successor: every publish
    after that is served by a replacement (which worker the kernel hands a connection to is not relied on)."""
    client.create_topic(T)
    gateway = GatewayProcess(gateway_env(hbase_address, prefix), tmp_path / "gw.log", "--workers", "2").start()
    try:
        wait_for(lambda: len(workers_of(gateway)) == 2, "two workers", 60)
        first, second = sorted(workers_of(gateway))
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: len(workers_of(gateway) - {first, second}) == 1, "a worker in place of the killed one", 60)
        os.kill(second, signal.SIGKILL)
        wait_for(lambda: second not in workers_of(gateway), "the second worker to be gone", 60)
        sent = 0
        for _ in range(5):
            with httpx.Client(base_url=gateway.url, timeout=60) as http:  # a new connection each time
                response = http.post("/v1/namespaces/ops/topics/events/publish", json={"messages": ["eA=="]})
                assert response.status_code == 200, response.text
                sent += 1
                assert http.get("/health").json()["worker"] not in (first, second)
        assert len(list(client.fetch(T))) == sent
    finally:
        assert gateway.stop() == 0, gateway.log()


PAUSE = 12.0  # seconds a worker is stopped: past uvicorn's default health check (5 s), within the gateway's


def test_a_paused_worker_is_not_killed_by_the_health_check(
    client: MessagingClient, hbase_address: str, prefix: str, tmp_path: Path
) -> None:
    """A worker stopped for a while (a long GC or swap pause, or a machine so loaded its start takes seconds)
    is waited for, not killed and replaced: what it holds (consumer sessions, read-ahead) survives."""
    client.create_topic(T)
    gateway = GatewayProcess(gateway_env(hbase_address, prefix), tmp_path / "gw.log", "--workers", "2").start()
    try:
        wait_for(lambda: len(workers_of(gateway)) == 2, "two workers", 60)
        paused, other = sorted(workers_of(gateway))
        os.kill(paused, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + PAUSE
            while time.monotonic() < deadline:  # the fault lasts PAUSE; the supervisor checks every half second
                assert paused in workers_of(gateway), gateway.log()
                time.sleep(0.5)
        finally:
            os.kill(paused, signal.SIGCONT)
        wait_for(lambda: "died" not in gateway.log() and workers_of(gateway) == {paused, other}, "both workers", 60)
        assert "died" not in gateway.log()
    finally:
        assert gateway.stop() == 0, gateway.log()


def test_hbase_unreachable_is_503_and_health_recovers(
    client: MessagingClient, proxy: TcpProxy, tms_env: dict[str, str], tmp_path: Path
) -> None:
    client.create_topic(T)
    env = {**tms_env, THRIFT_ENV: proxy.address}
    gateway = GatewayProcess(env, tmp_path / "gw.log", "--timeout", "1").start()
    publish = f"{gateway.url}/v1/namespaces/ops/topics/events/publish"
    try:
        with httpx.Client(timeout=60) as http:
            assert http.get(f"{gateway.url}/health").status_code == 200
            assert http.post(publish, json={"messages": ["YmVmb3Jl"]}).status_code == 200
            proxy.stall = True  # HBase Thrift hangs for good: without the gateway's timeout, no answer within 60 s
            health = http.get(f"{gateway.url}/health")
            assert health.status_code == 503 and health.headers["tms-error"] == "HBaseUnavailable", health.text
            for response in (
                http.post(publish, json={"messages": ["ZHVyaW5n"]}),
                http.post(f"{gateway.url}/v1/namespaces/ops/topics/events/poll", json={}),
            ):
                assert response.status_code == 503, response.text
                assert response.text.count("\n") == 1
            with GatewayClient(gateway.url, timeout_seconds=60) as gateway_client, pytest.raises(HBaseUnavailable):
                gateway_client.publish(T, [b"during"])
            proxy.stall = False
            wait_for(lambda: http.get(f"{gateway.url}/health").status_code == 200, "health to recover", 60)
            assert http.post(publish, json={"messages": ["YWZ0ZXI="]}).status_code == 200
    finally:
        assert gateway.stop() == 0, gateway.log()
    # the stalled requests never reached HBase: nothing of them was stored
    assert [m.payload for m in client.fetch(T)] == [b"before", b"after"]


def test_a_prefix_without_an_installation_is_503_and_creates_nothing(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path
) -> None:
    gateway = GatewayProcess(tms_env, tmp_path / "gw.log").start()  # a mistyped prefix: no `tms-admin init`
    try:
        with httpx.Client(timeout=60) as http:
            for response in (
                http.get(f"{gateway.url}/health"),
                http.get(f"{gateway.url}/v1/namespaces/ops/topics"),
                http.post(f"{gateway.url}/v1/namespaces/ops/topics/events/publish", json={"messages": ["eA=="]}),
                http.put(f"{gateway.url}/v1/namespaces/ops/topics/events", json={"ttl": 60}),  # the first create
            ):
                assert response.status_code == 503, response.text
                assert response.headers["tms-error"] == "InstallationNotFound"
                assert "tms-admin init" in response.text and response.text.count("\n") == 1
    finally:
        assert gateway.stop() == 0, gateway.log()
    with pytest.raises(InstallationNotFound):
        client.admin.require_installation()  # nothing was created on the gateway's behalf


BAD_CONFIGS = [
    ("workers = 'two'", "setting workers must be of type int"),
    ("colour = 'red'", "unknown setting(s) colour"),
    ("this is = not toml =", "cannot read config file"),
    ('[[tokens]]\nname = "svc"\nsha256 = "abc"', "64 lowercase hex"),
    ('[[rules]]\nprincipal = "*"\nnamespace = "a"\ntopics = "*"\nactions = ["publish"]', "need [[tokens]]"),
    (
        f'[[tokens]]\nname = "svc"\nsha256 = "{"a" * 64}"\n'
        '[[rules]]\nprincipal = "svk"\nnamespace = "a"\ntopics = "*"\nactions = ["publish"]',
        "no [[tokens]] entry has that name",
    ),
    (
        f'[[tokens]]\nname = "svc"\nsha256 = "{"a" * 64}"\n'
        '[[rules]]\nprincipal = "svc"\nnamespace = "a"\ntopics = "*"\nactions = ["write"]',
        "actions must be a non-empty list",
    ),
    ('[tls]\ncert = "missing.pem"\nkey = "missing.key"', "cannot load the certificate files"),
    ('thrift = "no-port"', "bad HBase Thrift address"),
]


@pytest.mark.parametrize(("content", "message"), BAD_CONFIGS, ids=[m for _, m in BAD_CONFIGS])
def test_a_bad_config_file_is_refused_with_exit_code_2(tmp_path: Path, content: str, message: str) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(content + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMS_HBASE", "TMS_TABLE", "TMS_GATEWAY"))}
    command = [TMS_GATEWAY, "--config", str(config), "--port", str(free_port())]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_taken_port_exits_1(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = subprocess.run(
            [TMS_GATEWAY, "--host", "127.0.0.1", "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 1
    assert "address already in use" in result.stderr.lower()


def test_help_explains_the_options_and_exit_codes() -> None:
    result = subprocess.run([TMS_GATEWAY, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for text in ("--thrift", "--prefix", "--config", "--workers", "--timeout", "TMS_HBASE_THRIFT", "Exit codes"):
        assert text in result.stdout
    assert re.search(r"avro/binary\s+or\s+application/json", result.stdout)


def test_new_token_prints_the_token_and_its_hash() -> None:
    result = subprocess.run([TMS_GATEWAY, "--new-token", "svc"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    token = re.search(r"^# (\S{40,})$", result.stdout, re.M).group(1)  # type: ignore[union-attr]
    digest = re.search(r'sha256 = "([0-9a-f]{64})"', result.stdout).group(1)  # type: ignore[union-attr]
    assert hashlib.sha256(token.encode()).hexdigest() == digest
    assert 'name = "svc"' in result.stdout
    bad = subprocess.run([TMS_GATEWAY, "--new-token", "no spaces"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
