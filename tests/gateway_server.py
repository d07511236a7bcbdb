"""tms-gateway as a real process for tests: the venv's console script on a free loopback port."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tms_hbase import MessagingClient
from tms_hbase.config import PREFIX_ENV, THRIFT_ENV

from .tx_server import free_port

# The console script installed next to this interpreter (a virtualenv's bin/ need not be on PATH).
TMS_GATEWAY = str(Path(sys.executable).with_name("tms-gateway"))


def gateway_env(thrift: str, prefix: str) -> dict[str, str]:
    """The environment of a gateway on the installation ``prefix``, created here as `tms-admin init` would."""
    with MessagingClient(thrift, prefix) as client:
        client.admin.init_tables()
    env = dict(os.environ)
    env[THRIFT_ENV], env[PREFIX_ENV] = thrift, prefix
    env.pop("TMS_GATEWAY_CONFIG", None)
    return env


class GatewayProcess:
    """``tms-gateway --host 127.0.0.1 --port <free> ARGS`` with its log in ``log_path``."""

    def __init__(self, env: dict[str, str], log_path: Path, *args: str, tls: bool = False) -> None:
        self.env, self.log_path, self.args = env, log_path, args
        self.port = free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> GatewayProcess:
        """Start and wait until the port accepts connections; a process that exits instead fails."""
        command = [TMS_GATEWAY, "--host", "127.0.0.1", "--port", str(self.port), *self.args]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"tms-gateway exited with {self.proc.returncode}:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise AssertionError(f"tms-gateway did not listen within {timeout}s:\n{self.log()}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait for the exit (SIGKILL if it does not come); returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"tms-gateway ignored SIGTERM for {timeout}s:\n{self.log()}") from None
        return self.proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def running_gateway(thrift: str, prefix: str, folder: Path, config: str) -> Iterator[GatewayProcess]:
    """A gateway on the installation ``prefix`` with ``config`` as its config file (in ``folder``, with its
    log); afterwards it must stop cleanly on SIGTERM."""
    path = folder / "gateway.toml"
    path.write_text(config)
    process = GatewayProcess(gateway_env(thrift, prefix), folder / "gateway.log", "--config", str(path))
    process.start()
    try:
        yield process
    except BaseException:
        process.stop()  # a failed test leaves no gateway behind
        raise
    assert process.stop() == 0, process.log()


def module_gateway(config: str) -> Callable[..., Iterator[GatewayProcess]]:
    """The module-scoped ``gateway`` fixture of a test module: one gateway with ``config`` on the module's
    installation for all of its tests (``gateway = module_gateway(CONFIG)`` in the module)."""

    @pytest.fixture(scope="module")
    def gateway(
        hbase_address: str, module_prefix: str, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[GatewayProcess]:
        with running_gateway(hbase_address, module_prefix, tmp_path_factory.mktemp("gateway"), config) as process:
            yield process

    return gateway
