"""Fixtures shared by the modules that run against real Apache Tephra 0.16.1 (tests/tephra/launcher.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from ..tephra.launcher import Tephra, TephraServer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tephra(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Tephra:
    """Tephra's jars (downloaded once) and the compiled helper."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():  # the first run's download progress shows on the terminal
        return Tephra.prepare(tmp_path_factory.mktemp("tephra"))


@pytest.fixture(scope="module")
def tephra_server(tephra: Tephra, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TephraServer]:
    """A real Tephra transaction server on 127.0.0.1 (its JVM starts slowly: one per module)."""
    server = tephra.server(free_port(), tmp_path_factory.mktemp("tephra-server")).start()
    yield server
    server.stop()
