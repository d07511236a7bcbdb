"""Real Apache Tephra 0.16.1 for the compatibility tests: its jars (resolved with Maven once and cached), the small
Java helper beside this file (compiled at test time) and a Tephra transaction server on 127.0.0.1.

Nothing here is faked: a missing ``mvn``, ``java`` or ``javac``, or a failed download, raises TephraUnavailable
with what to do about it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from tms_hbase.errors import LauncherError
from tms_hbase.tx.client import TransactionClient, TransactionServiceUnavailable
from tms_hbase_launcher.jars import resolve_jars
from tms_hbase_launcher.paths import default_home, default_jars_root

TEPHRA_VERSION = "0.16.1"
HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
HELPER = HERE / "TephraCompat.java"
LOGBACK = HERE / "logback.xml"
HOST = "127.0.0.1"

# Guice 3 (Tephra's dependency injection) defines classes through ClassLoader.defineClass by reflection.
JDK17_FLAGS = ["--add-opens", "java.base/java.lang=ALL-UNNAMED"]

Progress = Callable[[str], None]


class TephraUnavailable(RuntimeError):
    """Tephra's jars, the JDK or the server could not be had; the message says why and what to do."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def jars_dir() -> Path:
    """Where the jars go: beside the local HBase's (``$TMS_HBASE_JARS`` or ``~/.cache/tms-hbase/jars``)."""
    return default_jars_root(default_home()) / f"tephra-{TEPHRA_VERSION}"


def ensure_jars(progress: Progress = _stderr) -> Path:
    """The folder of Tephra's runtime jars, downloaded with ``mvn`` unless a download for this pom is cached."""
    try:
        return resolve_jars(
            POM,
            jars_dir(),
            f"Apache Tephra {TEPHRA_VERSION} jars",
            progress,
            expect=f"tephra-core-{TEPHRA_VERSION}.jar",
        )
    except LauncherError as exc:
        raise TephraUnavailable(f"the Tephra compatibility tests cannot get their jars: {exc}") from None


def _tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    path = str(Path(home) / "bin" / name) if home else shutil.which(name)
    if not path or not Path(path).exists():
        raise TephraUnavailable(
            f"{name} is not on PATH (nor in $JAVA_HOME); the Tephra tests need a JDK 11+ (17 tested)"
        )
    return path


class Tephra:
    """Tephra's jars plus the compiled helper: run its codec, or start its transaction server."""

    def __init__(self, lib: Path, classes: Path) -> None:
        self.lib, self.classes = lib, classes
        self.java = _tool("java")

    @classmethod
    def prepare(cls, workdir: Path, progress: Progress = _stderr) -> Tephra:
        """Download the jars if needed and compile ``TephraCompat.java`` into ``workdir``."""
        lib = ensure_jars(progress)
        classes = workdir / "classes"
        classes.mkdir(parents=True, exist_ok=True)
        cmd = [_tool("javac"), "-nowarn", "-cp", f"{lib}/*", "-d", str(classes), str(HELPER)]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise TephraUnavailable(f"javac could not compile {HELPER.name}:\n{result.stdout}{result.stderr}")
        return cls(lib, classes)

    def command(self, *args: str, heap: str = "128m") -> list[str]:
        return [
            self.java,
            f"-Xmx{heap}",
            "-Djava.net.preferIPv4Stack=true",
            *JDK17_FLAGS,
            f"-Dlogback.configurationFile={LOGBACK}",
            "-cp",
            f"{self.classes}:{self.lib}/*",
            "TephraCompat",
            *args,
        ]

    def _run(self, *args: str) -> list[str]:
        result = subprocess.run(self.command(*args), capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise AssertionError(f"TephraCompat {args[0]} failed (exit {result.returncode}):\n{result.stderr}")
        return result.stdout.splitlines()

    def encode(self, specs: Iterable[str]) -> list[bytes]:
        """``org.apache.tephra.TransactionCodec().encode`` of each transaction spec (see TephraCompat.java)."""
        return [bytes.fromhex(line) for line in self._run("encode", *specs)]

    def decode(self, encoded: Iterable[bytes]) -> list[str]:
        """``TransactionCodec().decode`` of each byte string, as a transaction spec."""
        return self._run("decode", *(b.hex() for b in encoded))

    def server(self, port: int, workdir: Path) -> TephraServer:
        return TephraServer(self, port, workdir)


class TephraServer:
    """Tephra's ``TransactionServiceMain`` (with ZooKeeper in the same JVM) in a process of its own."""

    def __init__(self, tephra: Tephra, port: int, workdir: Path) -> None:
        self.tephra, self.port, self.workdir = tephra, port, workdir
        self.log = workdir / "tephra-server.log"
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self, timeout: float = 60.0) -> TephraServer:
        """Start and wait until ``status()`` answers OK; on failure the process is stopped and its log shown."""
        zk_dir = self.workdir / "zookeeper"
        zk_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.tephra.command("server", str(self.port), str(zk_dir), heap="256m"),
                stdin=subprocess.PIPE,  # never written: the JVM stops when it closes (TephraCompat.java)
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        try:
            while True:
                if self.proc.poll() is not None:
                    raise TephraUnavailable(f"Tephra server exited (code {self.proc.returncode}):\n{self.tail()}")
                try:
                    with TransactionClient(self.address, timeout_seconds=2) as client:
                        status = client.status()
                    if status == "OK":
                        return self
                except TransactionServiceUnavailable:
                    pass
                if time.monotonic() > deadline:
                    raise TephraUnavailable(f"Tephra server did not answer OK within {timeout:.0f}s:\n{self.tail()}")
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise

    def stop(self, grace: float = 10.0) -> None:
        """Close its stdin and SIGTERM it (Tephra's shutdown hook stops the service); SIGKILL after ``grace`` s."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        if proc.poll() is not None:
            return
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(pid, sig)
