"""The client through Kerberized HBase Thrift gateways, for real: a KDC (Apache Kerby's, from
tms_hbase_launcher.kdc), a local HBase secured with it (its master and region server log in with their keytab) and
a stock ThriftServer JVM on it per mode: SASL/GSSAPI on the binary transport with each quality of protection
(auth, auth-int, auth-conf) and SPNEGO on the HTTP transport. Publish, fetch, a consumer and the asyncio client
work on each, from a keytab and from a ticket cache; no ticket, a wrong principal or a wrong quality of protection
is a clear error at once, never a wait until the deadline. ``make test-secured`` runs this group."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import gssapi
import httpx
import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.aio import AsyncMessagingClient
from tms_hbase.config import TRANSPORT_ENV, Config, ThriftTransport
from tms_hbase.errors import HBaseUnavailable
from tms_hbase_launcher.gateway import ThriftGateway, start_gateway
from tms_hbase_launcher.kdc import CLIENT, SERVER_HOST, Kdc
from tms_hbase_launcher.local import LocalHBase

from ..aio_client import round_trip
from ..gateway_server import GatewayProcess
from ..secured_hbase import SecuredHBase, secured_hbase_running

pytestmark = [pytest.mark.secured, pytest.mark.slow]

MODES = ["auth", "auth-int", "auth-conf", "spnego"]
TIMEOUT = 60.0  # the clients' deadline: generous for a loaded machine; a failure is expected well before it


@dataclass
class Served:
    """A Kerberized gateway of one mode: where clients reach it (by the host name its principal holds), how they
    must speak to it, what a wrong client tries (what the error must say -> its transport), and its JVM."""

    mode: str
    address: str
    transport: ThriftTransport
    gateway: ThriftGateway
    kdc: Kdc
    wrong: dict[str, ThriftTransport] = field(default_factory=dict)

    def config(self, prefix: str, transport: ThriftTransport | None = None) -> Config:
        return Config((self.address,), prefix, timeout_seconds=TIMEOUT, transport=transport or self.transport)

    def topic(self, name: str) -> TopicId:
        return TopicId("kerberos", f"{name}_{self.mode.replace('-', '_')}")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredHBase]:
    """The module's KDC and a local HBase of its own (its home, its ports) secured with it, stopped after the
    module; the tests' own GSS library finds the KDC through ``KRB5_CONFIG``."""
    with secured_hbase_running(tmp_path_factory.mktemp("secured")) as secured:
        yield secured


@pytest.fixture(scope="module")
def kdc(secured: SecuredHBase) -> Kdc:
    return secured.kdc


@pytest.fixture(scope="module")
def secured_hbase(secured: SecuredHBase) -> LocalHBase:
    return secured.hbase


@pytest.fixture(scope="module")
def installation(secured_hbase: LocalHBase) -> str:
    """The module's installation, made through the secured HBase's own gateway (no SASL: it serves as HBase's
    service principal), which the Kerberized gateways' clients then use."""
    prefix = f"k{uuid.uuid4().hex[:10]}"
    with MessagingClient(f"127.0.0.1:{secured_hbase.thrift_port}", prefix, timeout_seconds=TIMEOUT) as client:
        client.admin.init_tables()
    return prefix


def _client_identity(kdc: Kdc) -> dict[str, str]:
    return {"keytab": str(kdc.client_keytab), "principal": kdc.principal(CLIENT)}


@pytest.fixture(scope="module", params=MODES)
def served(request: pytest.FixtureRequest, kdc: Kdc, secured_hbase: LocalHBase) -> Iterator[Served]:
    """One Kerberized gateway per mode, for the module's tests of that mode, stopped after them."""
    mode = request.param
    http = mode == "spnego"
    gateway = start_gateway(http=http, kerberos=kdc, qop="auth" if http else mode, local=secured_hbase)
    address = f"{SERVER_HOST}:{gateway.address.rsplit(':', 1)[1]}"  # the host part of its principal
    good = ThriftTransport(http=http, kerberos=True, kerberos_qop=None if http else mode, **_client_identity(kdc))
    wrong = {
        f"Server nosuch/{SERVER_HOST}@{kdc.realm} not found in Kerberos database": replace(
            good, kerberos_service="nosuch"
        )
    }
    if http:
        wrong["--thrift-kerberos"] = ThriftTransport(http=True)  # no Kerberos: HTTP 401
    else:
        other = "auth" if mode == "auth-conf" else "auth-conf"
        wrong[f"quality of protection is {mode}"] = replace(good, kerberos_qop=other)
    try:
        yield Served(mode, address, good, gateway, kdc, wrong)
    finally:
        gateway.stop()


def test_publish_and_fetch(served: Served, installation: str) -> None:
    topic = served.topic("pub")
    large = bytes(range(256)) * (3 * 4096)  # 3 MiB: many SASL wrap tokens' worth
    with MessagingClient(config=served.config(installation)) as client:
        client.create_topic(topic)
        client.publish(topic, [b"one", b"two"])
        client.publish(topic, [large])
        assert [m.payload for m in client.fetch(topic)] == [b"one", b"two", large]


def test_the_asyncio_client_and_a_consumer(served: Served, installation: str) -> None:
    topic = served.topic("aio")

    fetched, polled = asyncio.run(round_trip(served.config(installation), topic))
    assert sorted(fetched) == sorted(b"m%d" % i for i in range(8))
    assert polled == fetched


@pytest.mark.parametrize("driver", ["sync", "asyncio"])
def test_a_wrong_principal_protection_or_transport_is_a_clear_error_at_once(
    served: Served, installation: str, driver: str
) -> None:
    for says, transport in served.wrong.items():
        with pytest.raises(HBaseUnavailable) as info:
            _list_topics(served.config(installation, transport), driver)
        assert not info.value.timed_out, f"{transport.describe()}: waited for the deadline: {info.value}"
        assert says in str(info.value), f"{transport.describe()}: {info.value}"
        assert served.address in str(info.value)


@pytest.mark.parametrize("served", ["auth-conf"], indirect=True)
def test_no_ticket_is_a_clear_error_at_once(served: Served, installation: str, tmp_path: Path) -> None:
    without = replace(served.transport, keytab=None, principal=None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'no-such-cache'}")
        with pytest.raises(HBaseUnavailable) as info:
            _list_topics(served.config(installation, without), "sync")
    assert not info.value.timed_out and not info.value.retriable, info.value
    assert "no valid Kerberos ticket from the ticket cache (kinit" in str(info.value)


@pytest.mark.parametrize("served", ["auth-conf"], indirect=True)
def test_a_kerberos_client_to_a_gateway_without_sasl_is_a_clear_error(
    served: Served, installation: str, secured_hbase: LocalHBase
) -> None:
    plain_gateway = f"{SERVER_HOST}:{secured_hbase.thrift_port}"
    config = Config((plain_gateway,), installation, timeout_seconds=TIMEOUT, transport=served.transport)
    with pytest.raises(HBaseUnavailable) as info:
        _list_topics(config, "sync")
    assert not info.value.timed_out, info.value
    assert plain_gateway in str(info.value) and "SASL" in str(info.value), info.value


@pytest.mark.parametrize("served", ["auth-conf"], indirect=True)
def test_a_client_without_kerberos_to_a_sasl_gateway_fails_by_its_deadline(served: Served, installation: str) -> None:
    """HBase's SASL gateway answers a call that is not a SASL negotiation with nothing and keeps the connection
    open: the client's deadline ends the wait."""
    config = Config((served.address,), installation, timeout_seconds=10.0, transport=ThriftTransport())
    with pytest.raises(HBaseUnavailable) as info:
        _list_topics(config, "sync")
    assert info.value.timed_out and served.address in str(info.value), info.value


_RENEWAL = """
import json, sys, time
from dataclasses import replace
import gssapi
from tms_hbase.config import ThriftTransport
from tms_hbase.errors import HBaseUnavailable
from tms_hbase.storage.connection import HBaseConnection
from tms_hbase.storage.hbase import Table

host, port, table, keytab, principal = sys.argv[1:6]
transport = ThriftTransport(kerberos=True, kerberos_qop="auth-conf", keytab=keytab, principal=principal)
pools = {
    "keytab": HBaseConnection(host, int(port), timeout=60, max_idle=1.0, transport=transport),
    "cache": HBaseConnection(host, int(port), timeout=60, max_idle=1.0, transport=replace(transport, keytab=None)),
}
client = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
lifetime = gssapi.Credentials(name=client, usage="initiate").lifetime
end = time.monotonic() + lifetime + 1
before = {what: Table(pool, table).get(b"no-such-row") == {} for what, pool in pools.items()}
while time.monotonic() < end:  # until the ticket cache's ticket (and so the keytab's, fetched later) has ended
    time.sleep(0.5)
after = {}
for what, pool in pools.items():  # each pool's idle connection is older than its max_idle by now: new ones
    try:
        after[what] = Table(pool, table).get(b"no-such-row") == {}
    except HBaseUnavailable as exc:
        after[what] = str(exc)
print(json.dumps({"before": before, "lifetime": lifetime, "after": after}))
"""


@pytest.mark.parametrize("served", ["auth-conf"], indirect=True)
def test_a_long_running_client_renews_its_tickets_from_its_keytab(
    served: Served, installation: str, tmp_path: Path
) -> None:
    """Tickets of 15 s (in processes of their own: the GSS library reads its configuration once): a client with a
    keytab goes on past their end, as new connections need new tickets, which it fetches from the keytab; one on a
    ticket cache, which it cannot renew, gets a clear error."""
    short = tmp_path / "krb5.conf"  # the client asks for 15 s tickets (the servers' are a day)
    short.write_text(
        served.kdc.krb5_conf.read_text().replace("[libdefaults]\n", "[libdefaults]\n  ticket_lifetime = 15s\n")
    )
    env = os.environ | {"KRB5_CONFIG": str(short), "KRB5CCNAME": f"FILE:{tmp_path / 'krb5cc'}"}
    seed = "import gssapi, sys; gssapi.Credentials(name=gssapi.Name(sys.argv[1], gssapi.NameType.kerberos_principal), "
    seed += "usage='initiate', store={'client_keytab': sys.argv[2], 'ccache': sys.argv[3]})"  # kinit -kt
    principal, keytab = str(served.transport.principal), str(served.transport.keytab)
    subprocess.run([sys.executable, "-c", seed, principal, keytab, env["KRB5CCNAME"]], env=env, check=True, timeout=60)
    host, port = served.address.rsplit(":", 1)
    args = [host, port, f"{installation}_metadata", keytab, principal]
    done = subprocess.run([sys.executable, "-c", _RENEWAL, *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["before"] == {"keytab": True, "cache": True} and result["lifetime"] <= 15, result
    assert result["after"]["keytab"] is True, result
    assert "expired" in result["after"]["cache"], result


def _list_topics(config: Config, driver: str) -> None:
    if driver == "sync":
        with MessagingClient(config=config) as client:
            client.list_topics("kerberos")
        return

    async def call() -> None:
        async with AsyncMessagingClient(config=config) as client:
            await client.list_topics("kerberos")

    asyncio.run(call())


def _ticket_cache(kdc: Kdc, folder: Path) -> str:
    """A ticket cache holding the client's ticket, as ``kinit -kt`` leaves one."""
    cache = f"FILE:{folder / 'krb5cc'}"
    name = gssapi.Name(kdc.principal(CLIENT), gssapi.NameType.kerberos_principal)
    gssapi.Credentials(name=name, usage="initiate", store={"client_keytab": str(kdc.client_keytab), "ccache": cache})
    return cache


def _tool(name: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    program = str(Path(sys.executable).with_name(name))
    return subprocess.run([program, *args], env=env, capture_output=True, text=True, timeout=300)


def test_the_command_line_tools_take_kerberos_from_options_and_environment(
    served: Served, installation: str, tmp_path: Path
) -> None:
    plain = {k: v for k, v in os.environ.items() if not k.startswith("TMS_")}
    where = ["--thrift", served.address, "--prefix", installation, "--timeout", "30"]
    transport = served.transport
    flags = ["--thrift-kerberos", "--thrift-keytab", str(transport.keytab), "--thrift-principal"]
    flags += [str(transport.principal), *(["--thrift-http"] if transport.http else ["--thrift-qop", transport.qop])]
    by_flags = _tool("tms-admin", "topic", "list", "--json", *where, *flags, env=plain)
    assert by_flags.returncode == 0, by_flags.stderr
    # from the environment, with the user's ticket cache (kinit's) instead of a keytab
    env = plain | {"KRB5CCNAME": _ticket_cache(served.kdc, tmp_path), TRANSPORT_ENV["kerberos"]: "1"}
    env |= {TRANSPORT_ENV["http"]: "1"} if transport.http else {TRANSPORT_ENV["kerberos_qop"]: transport.qop}
    by_env = _tool("tms-admin", *where, "topic", "list", "--json", env=env)
    assert by_env.returncode == 0, by_env.stderr
    no_ticket = _tool(
        "tms-admin", *where, "topic", "list", "--json", env=env | {"KRB5CCNAME": f"FILE:{tmp_path / 'none'}"}
    )
    assert no_ticket.returncode == 5, no_ticket.stderr  # HBase unavailable, in one line
    assert len(no_ticket.stderr.strip().splitlines()) == 1 and "no valid Kerberos ticket" in no_ticket.stderr
    config = tmp_path / "sweeper.toml"
    config.write_text(f'thrift = "{served.address}"\nprefix = "{installation}"\n' + _toml(transport))
    sweeper = _tool("tms-sweeper", "--config", str(config), "status", "--json", env=plain)
    assert sweeper.returncode == 0, sweeper.stderr


def _toml(transport: ThriftTransport) -> str:
    """The TOML lines that say ``transport``'s Kerberos (the gateway's and the sweeper's config files)."""
    lines = ["thrift_kerberos = true", f'thrift_keytab = "{transport.keytab}"']
    lines += [f'thrift_principal = "{transport.principal}"']
    lines += ["thrift_http = true"] if transport.http else [f'thrift_qop = "{transport.qop}"']
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("served", ["auth-conf", "spnego"], indirect=True)
def test_the_gateway_takes_kerberos_from_its_config_file(served: Served, installation: str, tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(f'thrift = "{served.address}"\nprefix = "{installation}"\n' + _toml(served.transport))
    plain = {k: v for k, v in os.environ.items() if not k.startswith("TMS_")}
    gateway = GatewayProcess(plain, tmp_path / "gateway.log", "--config", str(config)).start()
    try:
        topic = served.topic("http")
        with httpx.Client(base_url=gateway.url, timeout=60) as http:
            url = f"/v1/namespaces/{topic.namespace}/topics/{topic.topic}"
            assert http.put(url).status_code == 200, gateway.log()
            assert http.get(url).status_code == 200, gateway.log()
    finally:
        assert gateway.stop() == 0, gateway.log()


def _documented(mode: str) -> dict[str, str]:
    """The settings docs/existing-cluster.md gives for ``mode`` (its row of the Kerberos table)."""
    page = (Path(__file__).parents[2] / "docs" / "existing-cluster.md").read_text()
    row = re.search(rf"^\| {re.escape(mode)} \| (.*?) \|", page, re.M)
    assert row, f"docs/existing-cluster.md has no row for {mode}"
    return dict(re.findall(r"`((?:hbase|hadoop)\.[\w.]+)` = `([^`]+)`", row.group(1)))


def test_the_documented_server_settings_are_what_the_tested_gateway_runs_with(served: Served) -> None:
    documented = _documented("secured HBase") | _documented("Kerberos gateway") | _documented(served.mode)
    running = served.gateway.settings_of(documented)
    for name, value in documented.items():
        if name.endswith("keytab.file"):  # a path of the operator's: set, to the keytab the KDC wrote
            assert running[name] == str(served.kdc.server_keytab), name
        else:
            assert running[name] == value.replace("EXAMPLE.COM", served.kdc.realm), name
