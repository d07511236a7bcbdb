"""A long-running process for tests whose stdout and stderr go to temporary files instead of pipes.

A pipe that nobody reads until the process ends holds 64 KiB. A daemon printing a JSON line of about 500 bytes a
pass, every 0.2 s, fills it in half a minute of a slow (loaded) run and then blocks in its print: its metrics stop
moving and the test times out as if the daemon did not work. A file never blocks the writer.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from typing import IO


class Background(subprocess.Popen):
    """``subprocess.Popen(args, text=True, **kwargs)`` with stdout and stderr in temporary files; ``communicate``
    waits for the exit and returns both, as it does with pipes (it may be called again)."""

    def __init__(self, args: Sequence[str], **kwargs: object) -> None:
        # (closed when this object goes: communicate may be called more than once)
        self._out: IO[str] = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self._err: IO[str] = tempfile.TemporaryFile("w+")  # noqa: SIM115
        super().__init__(args, stdout=self._out, stderr=self._err, text=True, **kwargs)

    def communicate(self, input: str | None = None, timeout: float | None = None) -> tuple[str, str]:
        assert input is None, "a Background process reads no input"
        self.wait(timeout)
        return self._read(self._out), self._read(self._err)

    @staticmethod
    def _read(file: IO[str]) -> str:
        file.seek(0)
        return file.read()
