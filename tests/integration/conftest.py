"""Fixtures shared by integration modules: real Apache Tephra 0.16.1 (tests/tephra/launcher.py), our own
transaction server and a table for transactional state, and the clients of a module's own gateway (a module
that starts one defines the ``gateway`` fixture)."""

from __future__ import annotations

from collections.abc import Iterator

import happybase
import httpx
import pytest

from tms_hbase import MessagingClient
from tms_hbase.config import thrift_address
from tms_hbase.model.tables import APPLICATION_MAX_VERSIONS
from tms_hbase.tx.client import TransactionClient

from ..gateway_server import GatewayProcess
from ..tephra.launcher import Tephra, TephraServer
from ..tx_server import TxServer, free_port


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


@pytest.fixture
def tx_client(tms_env: dict[str, str]) -> Iterator[TransactionClient]:
    """A client of a real ``tms-admin tx serve`` process of the test's own."""
    server = TxServer(tms_env, free_port()).start()
    with TransactionClient(server.address) as client:
        yield client
    server.stop()


@pytest.fixture
def state_table(client: MessagingClient, hbase_address: str) -> str:
    """A table of the test's installation for transactional state, keeping every version Tephra needs."""
    name = f"{client.installation.prefix}_state"
    host, port = thrift_address(hbase_address)
    conn = happybase.Connection(host, port)
    conn.create_table(name, {"d": {"max_versions": APPLICATION_MAX_VERSIONS}})
    conn.close()
    return name


@pytest.fixture(scope="module")
def http(gateway: GatewayProcess) -> Iterator[httpx.Client]:
    """A real HTTP client of the module's gateway."""
    with httpx.Client(base_url=gateway.url, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def direct(hbase_address: str, module_prefix: str) -> Iterator[MessagingClient]:
    """Direct library access to the installation the module's gateway serves (its first create_topic
    creates the tables)."""
    with MessagingClient(hbase_address, module_prefix, create_tables=True) as client:
        yield client
