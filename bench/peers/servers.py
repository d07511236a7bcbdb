"""Starting and stopping the peer servers: free loopback ports, a process in its own session that dies
with the benchmark, waiting until it listens, and a stop that leaves nothing behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from abc import abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..procs import die_with_parent
from .system import Server, ServerInfo

HOST = "127.0.0.1"


class ServerError(RuntimeError):
    """A peer server could not be had; the message says which and why (with its log's tail)."""


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Process:
    """One server process: own session (Ctrl-C reaches only the benchmark, which stops it), killed by the
    kernel if the benchmark itself is killed, output to ``log``."""

    def __init__(self, name: str, args: Sequence[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.name, self.log = name, log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                list(args),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
                env=env,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_listening(self, port: int, timeout: float, ready: Callable[[], bool] | None = None) -> None:
        """Until ``port`` accepts connections (and ``ready()`` is true); a dead process or the deadline
        raises ServerError with the end of the log."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise ServerError(f"{self.name} exited with {self.proc.returncode} while starting; {self.tail()}")
            if _accepts(port) and (ready is None or ready()):
                return
            if time.monotonic() > deadline:
                raise ServerError(f"{self.name} did not get ready within {timeout:.0f} s; {self.tail()}")
            time.sleep(0.2)

    def tail(self, lines: int = 8) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"no log at {self.log}"
        return f"end of {self.log}:\n  " + "\n  ".join(text)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM to the process group, SIGKILL after ``timeout`` s; returns once it is gone."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything it forked


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        try:
            s.connect((HOST, port))
        except OSError:
            return False
        return True


def run_tool(args: Sequence[str], what: str, timeout: float = 120.0) -> str:
    """Run a short command (a version query, a storage format); its output, or ServerError."""
    try:
        done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerError(f"{what} failed: {exc}") from None
    if done.returncode != 0:
        tail = "\n  ".join((done.stdout + done.stderr).strip().splitlines()[-8:])
        raise ServerError(f"{what} failed (exit {done.returncode}):\n  {tail}")
    return done.stdout + done.stderr


class ProcessServer(Server):
    """A peer server that is one process in a temp dir of its own: ``start`` launches it (keeping it in
    ``self.proc``) and returns its ServerInfo; leaving stops it and removes the dir, whatever happened."""

    name = "server"

    def __init__(self, settings: Any, workloads: Sequence[str]) -> None:
        self.dir: Path | None = None
        self.proc: Process | None = None

    def __enter__(self) -> ServerInfo:
        self.dir = Path(tempfile.mkdtemp(prefix=f"tms-peers-{self.name}-"))
        try:
            return self.start(self.dir)
        except BaseException:
            self.__exit__()
            raise

    @abstractmethod
    def start(self, workdir: Path) -> ServerInfo: ...

    def __exit__(self, *exc_info: object) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
