"""Fixtures shared by integration modules: real Apache Tephra 0.16.1 (tests/tephra/launcher.py), and the
clients of a module's own gateway (a module that starts one defines the ``gateway`` fixture)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest

from tms_hbase import MessagingClient

from ..gateway_server import GatewayProcess
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


@pytest.fixture(scope="module")
def http(gateway: GatewayProcess) -> Iterator[httpx.Client]:
    """A real HTTP client of the module's gateway."""
    with httpx.Client(base_url=gateway.url, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def direct(hbase_address: str, module_prefix: str) -> Iterator[MessagingClient]:
    """Direct library access to the installation the module's gateway serves."""
    with MessagingClient(hbase_address, module_prefix) as client:
        yield client
