"""The client over every Thrift transport a gateway may serve, for real: a stock HBase ThriftServer JVM on the
local HBase per mode (framed, compact, framed+compact, HTTP, and HTTPS with the gateway's own TLS and a
certificate of a test CA, from tms_hbase_launcher.gateway), and TLS on the binary transport (a TLS terminator in
front of the shared gateway, with a test CA and a required client certificate). Publish, fetch, a consumer, a
shared consumer and the asyncio client work on each; a client that speaks another transport, an untrusted
certificate or a missing client certificate get a clear error, never a hang until the deadline."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import pytest
import trustme

from tms_hbase import MessagingClient, TopicId
from tms_hbase.aio import AsyncMessagingClient
from tms_hbase.config import TRANSPORT_ENV, Config, ThriftTransport
from tms_hbase.errors import HBaseUnavailable
from tms_hbase.storage.connection import HBaseConnection
from tms_hbase.storage.hbase import Table
from tms_hbase_launcher.gateway import ThriftGateway, start_gateway

from ..aio_client import round_trip
from ..gateway_server import GatewayProcess
from ..keystores import gateway_keystore
from ..tls_proxy import TlsTerminator

pytestmark = [pytest.mark.transports, pytest.mark.slow]

MODES = ["framed", "compact", "framed+compact", "http", "https", "tls"]
TIMEOUT = 60.0  # the clients' deadline: generous for a loaded machine; a failure is expected well before it


@dataclass
class Served:
    """A gateway of one mode: where it is, how a client must speak to it, and what a wrong client tries."""

    mode: str
    address: str
    transport: ThriftTransport
    wrong: dict[str, ThriftTransport] = field(default_factory=dict)  # what the error must say -> a wrong client
    gateway: ThriftGateway | None = None  # the ThriftServer JVM, if the mode has one

    def config(self, prefix: str, transport: ThriftTransport | None = None) -> Config:
        return Config((self.address,), prefix, timeout_seconds=TIMEOUT, transport=transport or self.transport)

    def topic(self, name: str) -> TopicId:
        return TopicId("transports", f"{name}_{self.mode.replace('+', '_')}")


@pytest.fixture(scope="module")
def installation(hbase_address: str, module_prefix: str) -> str:
    """The module's installation, made through the shared (plain) gateway; every mode's clients use it."""
    with MessagingClient(hbase_address, module_prefix) as client:
        client.admin.init_tables()
    return module_prefix


def _tls_files(folder: Path) -> tuple[trustme.CA, Path, Path]:
    """A test CA (its PEM file) and a client certificate it signed (certificate and key in one PEM)."""
    ca = trustme.CA()
    ca_file, client_file = folder / "ca.pem", folder / "client.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    ca.issue_cert("tms-client@example.test").private_key_and_cert_chain_pem.write_to_path(str(client_file))
    return ca, ca_file, client_file


@pytest.fixture(scope="module", params=MODES)
def served(
    request: pytest.FixtureRequest, hbase_address: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One gateway per mode, for the module's tests of that mode, stopped after them."""
    mode = request.param
    if mode == "tls":
        ca, ca_file, client_file = _tls_files(tmp_path_factory.mktemp("tls"))
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(server)
        ca.configure_trust(server)
        server.verify_mode = ssl.CERT_REQUIRED  # a client certificate signed by the test CA
        host, port = hbase_address.rsplit(":", 1)
        terminator = TlsTerminator((host, int(port)), server)
        good = ThriftTransport(tls=True, ca_file=str(ca_file), cert_file=str(client_file))
        yield Served(
            mode,
            terminator.address,
            good,
            {
                "not accepted": ThriftTransport(tls=True, cert_file=str(client_file)),  # the system's CAs only
                "TLS failed": replace(good, cert_file=None),  # no client certificate
                "closed the connection": ThriftTransport(),  # no TLS at all
            },
        )
        terminator.close()
        return
    if mode in ("http", "https"):
        folder = tmp_path_factory.mktemp(mode)
        ca, ca_file, _client = _tls_files(folder)
        keystore = gateway_keystore(ca, folder) if mode == "https" else None
        gateway = start_gateway(http=True, keystore=keystore)
        good = ThriftTransport(http=True, tls=True, ca_file=str(ca_file)) if keystore else ThriftTransport(http=True)
        wrong = {"not an HBase Thrift reply": ThriftTransport()}  # the binary transport
        if keystore:
            wrong = {
                "not accepted": ThriftTransport(http=True, tls=True),  # the system's CAs only
                "closed the connection": ThriftTransport(http=True),  # no TLS
            }
        else:
            wrong["TLS failed"] = ThriftTransport(http=True, tls=True)
        try:
            yield Served(mode, gateway.address, good, wrong, gateway)
        finally:
            gateway.stop()
        return
    framed, compact = "framed" in mode, "compact" in mode
    gateway = start_gateway(framed, compact)
    try:
        yield Served(
            mode,
            gateway.address,
            ThriftTransport(framed=framed, compact=compact),
            {
                "closed the connection": ThriftTransport(framed=not framed, compact=compact),
                "does its Thrift gateway serve": ThriftTransport(framed=framed, compact=not compact),
            },
            gateway,
        )
    finally:
        gateway.stop()


def test_publish_and_fetch(served: Served, installation: str) -> None:
    topic = served.topic("pub")
    large = bytes(range(256)) * (3 * 4096)  # 3 MiB: more than a framed server takes by default (2 MB)
    with MessagingClient(config=served.config(installation)) as client:
        client.create_topic(topic)
        client.publish(topic, [b"one", b"two"])
        client.publish(topic, [large])
        assert [m.payload for m in client.fetch(topic)] == [b"one", b"two", large]


def test_a_consumer_polls_and_commits(served: Served, installation: str) -> None:
    topic = served.topic("sub")
    with MessagingClient(config=served.config(installation)) as client:
        client.create_topic(topic)
        client.create_subscription(topic, "work")
        client.publish(topic, [b"a", b"b", b"c"])
        with client.consumer(topic, "work") as consumer:
            got = consumer.poll(10, timeout_seconds=30)
            consumer.commit()
        assert [m.payload for m in got] == [b"a", b"b", b"c"]
        assert client.lag(topic, "work").messages == 0


def test_a_shared_consumer_receives_and_acks(served: Served, installation: str) -> None:
    topic = served.topic("shared")
    with MessagingClient(config=served.config(installation)) as client:
        client.create_topic(topic)
        client.create_subscription(topic, "work", shared=True)
        client.publish(topic, [b"x%d" % i for i in range(5)])
        with client.shared_consumer(topic, "work") as consumer:
            got = []
            for _ in range(20):
                got += consumer.receive(10, 1.0)
                if len(got) >= 5:
                    break
            consumer.ack(*got)
        assert sorted(d.payload for d in got) == [b"x%d" % i for i in range(5)]
        assert client.lag(topic, "work").messages == 0


def test_the_asyncio_client(served: Served, installation: str) -> None:
    topic = served.topic("aio")

    fetched, polled = asyncio.run(round_trip(served.config(installation), topic))
    assert sorted(fetched) == sorted(b"m%d" % i for i in range(8))
    assert polled == fetched


@pytest.mark.parametrize("served", ["http"], indirect=True)
def test_a_call_that_is_not_retried_after_the_http_gateway_closed_idle_connections_goes_through(
    served: Served, installation: str
) -> None:
    """HBase's HTTP server closes a connection idle for 30 s, sooner than its binary one: a compare-and-set
    (never retried, as it may have landed) on a connection the pool kept that long would fail."""
    with MessagingClient(config=served.config(installation)) as client:
        name = client.installation.metadata.name
    host, port = served.address.rsplit(":", 1)
    pool = HBaseConnection(host, int(port), pool_size=1, timeout=TIMEOUT, transport=served.transport)
    try:
        table = Table(pool, name)
        assert table.compare_and_set(b"idle", b"d:x", None, b"1")
        with socket.create_connection((host, int(port)), timeout=TIMEOUT * 2) as idle:  # younger than the pool's
            assert idle.recv(1) == b"", "the gateway answered a request never made"  # it closed it: idle too long
        assert table.compare_and_set(b"idle", b"d:x", b"1", b"2")
    finally:
        pool.close()


@pytest.mark.parametrize("driver", ["sync", "asyncio"])
def test_a_client_speaking_otherwise_gets_a_clear_error_not_a_hang(
    served: Served, installation: str, driver: str
) -> None:
    for says, transport in served.wrong.items():
        config = served.config(installation, transport)
        with pytest.raises(HBaseUnavailable) as info:
            if driver == "sync":
                with MessagingClient(config=config) as client:
                    client.list_topics("transports")
            else:

                async def call(config: Config = config) -> None:
                    async with AsyncMessagingClient(config=config) as client:
                        await client.list_topics("transports")

                asyncio.run(call())
        assert not info.value.timed_out, f"{transport.describe()}: waited for the deadline: {info.value}"
        assert says in str(info.value), f"{transport.describe()}: {info.value}"
        assert served.address in str(info.value)


def _flags(transport: ThriftTransport) -> list[str]:
    """The command-line options that say ``transport``."""
    switches = {"--thrift-framed": transport.framed, "--thrift-compact": transport.compact}
    switches |= {"--thrift-http": transport.http, "--thrift-tls": transport.tls}
    files = {"--thrift-ca": transport.ca_file, "--thrift-cert": transport.cert_file}
    return [flag for flag, on in switches.items() if on] + [a for f, v in files.items() if v for a in (f, v)]


def _toml(transport: ThriftTransport) -> str:
    """The TOML lines that say ``transport`` (the gateway's and the sweeper's config files)."""
    switches = {"framed": transport.framed, "compact": transport.compact, "http": transport.http, "tls": transport.tls}
    lines = [f"thrift_{name} = {str(on).lower()}" for name, on in switches.items()]
    files = {"ca": transport.ca_file, "cert": transport.cert_file}
    return "\n".join(lines + [f'thrift_{name} = "{path}"' for name, path in files.items() if path]) + "\n"


def _env(transport: ThriftTransport) -> dict[str, str]:
    """The environment that says ``transport``, over this one's (no other TMS_ setting)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMS_")}
    given = {name: getattr(transport, name) for name in TRANSPORT_ENV}
    for name, value in given.items():
        if value not in (None, False):
            env[TRANSPORT_ENV[name]] = "1" if value is True else str(value)
    return env


def _tool(name: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    program = str(Path(sys.executable).with_name(name))
    return subprocess.run([program, *args], env=env, capture_output=True, text=True, timeout=300)


def test_the_command_line_tools_take_the_transport_from_options_environment_and_config_files(
    served: Served, installation: str, tmp_path: Path
) -> None:
    plain = _env(ThriftTransport())
    where = ["--thrift", served.address, "--prefix", installation, "--timeout", "30"]
    by_flags = _tool("tms-admin", "topic", "list", "--json", *where, *_flags(served.transport), env=plain)
    assert by_flags.returncode == 0, by_flags.stderr
    by_env = _tool("tms-admin", *where, "topic", "list", "--json", env=_env(served.transport))
    assert by_env.returncode == 0, by_env.stderr
    unsaid = _tool("tms-admin", *where, "topic", "list", "--json", env=plain)
    assert unsaid.returncode == 5 and served.address in unsaid.stderr, unsaid.stderr  # HBase unavailable
    config = tmp_path / "sweeper.toml"
    config.write_text(f'thrift = "{served.address}"\nprefix = "{installation}"\n' + _toml(served.transport))
    sweeper = _tool("tms-sweeper", "--config", str(config), "status", "--json", env=plain)
    assert sweeper.returncode == 0, sweeper.stderr


def test_the_gateway_takes_the_transport_from_its_config_file(
    served: Served, installation: str, tmp_path: Path
) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(f'thrift = "{served.address}"\nprefix = "{installation}"\n' + _toml(served.transport))
    gateway = GatewayProcess(_env(ThriftTransport()), tmp_path / "gateway.log", "--config", str(config)).start()
    try:
        topic = served.topic("http")
        with httpx.Client(base_url=gateway.url, timeout=60) as http:
            url = f"/v1/namespaces/{topic.namespace}/topics/{topic.topic}"
            assert http.put(url).status_code == 200, gateway.log()
            assert http.get(url).status_code == 200, gateway.log()
    finally:
        assert gateway.stop() == 0, gateway.log()


def _documented(mode: str) -> dict[str, str]:
    """The settings docs/existing-cluster.md gives for ``mode`` (its row of the transports table)."""
    page = (Path(__file__).parents[2] / "docs" / "existing-cluster.md").read_text()
    row = re.search(rf"^\| {re.escape(mode)} \| (.*?) \|", page, re.M)
    assert row, f"docs/existing-cluster.md has no row for {mode}"
    return dict(re.findall(r"`(hbase\.[\w.]+)` = `([^`]+)`", row.group(1)))


# TLS runs through the tests' own terminator (stock HBase has no TLS on the binary gateway): no settings to read
@pytest.mark.parametrize("served", [m for m in MODES if m != "tls"], indirect=True)
def test_the_documented_server_settings_are_what_the_tested_gateway_runs_with(served: Served) -> None:
    assert served.gateway is not None
    documented = _documented(served.mode)
    assert documented == served.gateway.settings_of(documented)
