"""Processes tests share: a free loopback port, and ``tms-admin tx serve`` (the transaction server) in a
process of its own, started and stopped by the test that needs it."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tms_hbase import MessagingClient
from tms_hbase.config import PREFIX_ENV, THRIFT_ENV
from tms_hbase.tx.client import TransactionClient, TransactionServiceUnavailable

TMS_ADMIN = str(Path(sys.executable).with_name("tms-admin"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TxServer:
    """``tms-admin tx serve`` in a process of its own."""

    def __init__(self, env: dict[str, str], port: int, *extra: str) -> None:
        self.env, self.port, self.extra = env, port, extra
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TxServer:
        """Start it on the environment's installation (created first, as `tms-admin init` would: the
        server never creates one) and wait until it answers."""
        with MessagingClient(self.env[THRIFT_ENV], self.env[PREFIX_ENV]) as client:
            client.admin.init_tables()
        cmd = [TMS_ADMIN, "tx", "serve", "--port", str(self.port), "--cleanup-interval", "0.2", *self.extra]
        self.proc = subprocess.Popen(cmd, env=self.env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                with TransactionClient(self.address, timeout_seconds=2) as c:
                    c.status()
                return self
            except TransactionServiceUnavailable:
                assert self.proc.poll() is None, self.proc.stderr.read()
                assert time.monotonic() < deadline, "transaction server did not start"
                time.sleep(0.1)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> str:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.terminate()
        _, err = self.proc.communicate(timeout=60)
        return err
