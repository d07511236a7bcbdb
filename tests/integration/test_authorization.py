"""HBase authorization for real: HBase's AccessController on, as docs/existing-cluster.md says to turn it on, in a
Kerberized HBase of the module's own; one identity per role (a principal of the module's KDC with a keytab of its
own) calls through one Kerberized Thrift gateway (SASL, auth-conf), which runs each call as its caller. Each
identity is granted what ``tms-admin grants ROLE --json`` prints, as HBase's superuser through HBase's Java client
(``AccessControlClient.grant``, what the HBase shell's ``grant`` runs): that is enough for the role's operations,
and a consumer-only identity cannot publish, create topics or drop the installation (AccessDenied, naming the
table and the permission). ``make test-secured`` runs this group."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.config import Config, ThriftTransport
from tms_hbase.errors import AccessDenied, InstallationNotFound
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase_launcher.gateway import ThriftGateway, start_gateway
from tms_hbase_launcher.kdc import SERVER_HOST, SERVICE, Kdc
from tms_hbase_launcher.local import JDK17_FLAGS, LocalHBase
from tms_hbase_sweeper.sweep import Sweeper

from ..gateway_server import GatewayProcess
from ..hbase_admin import compiled
from ..secured_hbase import secured_hbase_running

pytestmark = [pytest.mark.secured, pytest.mark.slow]

TIMEOUT = 60.0  # the clients' deadline: generous for a loaded machine
GRACE = 4  # the sweeper's smallest grace with the installation's tail-cache setting of 1 s
USERS = {role: f"tms{role}" for role in ("publisher", "consumer", "admin", "sweeper", "gateway")}
"""The identity of each role: a principal (and HBase user) of its own."""
NOBODY = "tmsnobody"
"""An identity granted nothing."""
GRANTER = Path(__file__).parents[1] / "java" / "GrantPermissions.java"
DOCS = Path(__file__).parents[2] / "docs" / "existing-cluster.md"


def documented_authorization() -> dict[str, str]:
    """The settings docs/existing-cluster.md tells an operator to set for HBase's AccessController (its
    "authorization" row): what the module's HBase runs with."""
    row = re.search(r"^\| authorization \| (.*?) \|$", DOCS.read_text(), re.M)
    assert row, "docs/existing-cluster.md has no authorization row"
    return dict(re.findall(r"`(hbase\.[\w.]+)` = `([^`]+)`", row.group(1)))


@dataclass
class Secured:
    """The module's servers: the KDC, the HBase (AccessController on) and its Kerberized gateway (host:port by the
    host name its principal holds), and the installation's prefix, made by HBase's superuser."""

    kdc: Kdc
    hbase: LocalHBase
    gateway: ThriftGateway
    prefix: str

    @property
    def address(self) -> str:
        return f"{SERVER_HOST}:{self.gateway.address.rsplit(':', 1)[1]}"

    def config(self, role: str, prefix: str | None = None) -> Config:
        """How the identity of ``role`` (or :data:`NOBODY`) reaches the installation (``prefix``: another one)."""
        user = USERS.get(role, NOBODY)
        transport = ThriftTransport(
            kerberos=True,
            kerberos_qop="auth-conf",
            keytab=str(self.kdc.keytab(user)),
            principal=self.kdc.principal(user),
        )
        return Config((self.address,), prefix or self.prefix, timeout_seconds=TIMEOUT, transport=transport)

    def superuser(self, prefix: str | None = None) -> MessagingClient:
        """A client through the HBase's own gateway, which acts as HBase's service principal: its superuser."""
        return MessagingClient(f"127.0.0.1:{self.hbase.thrift_port}", prefix or self.prefix, timeout_seconds=TIMEOUT)

    def grant(self, role: str, prefix: str | None = None) -> list[dict[str, str]]:
        """Grant the identity of ``role`` what ``tms-admin grants ROLE --json`` prints for ``prefix``, as HBase's
        superuser; the grants."""
        tool = str(Path(sys.executable).with_name("tms-admin"))
        args = [tool, "grants", role, "--user", USERS[role], "--prefix", prefix or self.prefix, "--json"]
        printed = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert printed.returncode == 0, printed.stderr
        grants = json.loads(printed.stdout)["grants"]
        lines = []
        for g in grants:
            scope = f"@{g['namespace']}" if "namespace" in g else g["table"]
            lines.append("\t".join([g["user"], scope, g.get("family", ""), g.get("qualifier", ""), g["permissions"]]))
        lib = self.hbase.paths.lib
        classes = compiled(GRANTER, lib)
        log = self.hbase.paths.logs / "grants.log"  # the configuration folder's log4j2.properties names it
        cmd = ["java", *self.kdc.java_flags(), *JDK17_FLAGS, "-Dlog4j2.level=WARN", f"-Dtms.log.file={log}"]
        cmd += ["-cp", f"{classes}:{self.hbase.paths.conf}:{lib}/*", GRANTER.stem]
        cmd += [self.kdc.principal(f"{SERVICE}/{SERVER_HOST}"), str(self.kdc.server_keytab)]
        done = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        return grants


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    users = [*USERS.values(), NOBODY]
    with secured_hbase_running(
        tmp_path_factory.mktemp("authorized"), users=users, site=documented_authorization()
    ) as running:
        gateway = start_gateway(kerberos=running.kdc, qop="auth-conf", local=running.hbase)
        try:
            served = Secured(running.kdc, running.hbase, gateway, f"a{uuid.uuid4().hex[:10]}")
            with served.superuser() as client:
                client.admin.init_tables()
                client.admin.set_tail_cache_seconds(1)
            yield served
        finally:
            gateway.stop()


def _topic(secured: Secured, name: str, count: int) -> TopicId:
    """A topic the superuser made, with ``count`` messages in it."""
    topic = TopicId("authz", name)
    with secured.superuser() as client:
        client.create_topic(topic)
        if count:
            client.publish(topic, [b"m%d" % i for i in range(count)])
    return topic


def test_an_identity_granted_nothing_is_shown_no_installation_and_told_why(secured: Secured) -> None:
    with MessagingClient(config=secured.config(NOBODY)) as client, pytest.raises(InstallationNotFound) as info:
        client.list_topics()
    assert "tms-admin grants ROLE" in str(info.value), info.value


def test_a_consumer_consumes_but_cannot_publish_create_topics_or_drop(secured: Secured) -> None:
    topic = _topic(secured, "consumed", 5)
    secured.grant("consumer")
    with MessagingClient(config=secured.config("consumer")) as client:
        assert [m.payload for m in client.fetch(topic)] == [b"m%d" % i for i in range(5)]
        client.create_subscription(topic, "work")
        with client.consumer(topic, "work") as consumer:
            assert [m.payload for m in consumer.poll(10, timeout_seconds=30)] == [b"m%d" % i for i in range(5)]
            consumer.commit()
        assert client.lag(topic, "work").messages == 0

        with pytest.raises(AccessDenied) as published:
            client.publish(topic, [b"not allowed"])
        assert published.value.table == f"{secured.prefix}_messages" and published.value.permission == "W"
        assert f"HBase denied user {USERS['consumer']}" in str(published.value), published.value
        assert len(str(published.value).splitlines()) == 1
        with pytest.raises(AccessDenied) as created:
            client.create_topic(TopicId("authz", "by_consumer"))
        assert created.value.table == f"{secured.prefix}_metadata" and created.value.permission == "W"
        with pytest.raises(AccessDenied) as dropped:
            client.admin.drop_tables()
        assert dropped.value.table is not None and dropped.value.table.startswith(secured.prefix)

    tool = str(Path(sys.executable).with_name("tms-admin"))
    transport = secured.config("consumer").transport
    where = ["--thrift", secured.address, "--prefix", secured.prefix, "--thrift-kerberos", "--thrift-qop", "auth-conf"]
    where += ["--thrift-keytab", str(transport.keytab), "--thrift-principal", str(transport.principal)]
    plain = {k: v for k, v in os.environ.items() if not k.startswith("TMS_")}
    done = subprocess.run(
        [tool, "topic", "create", "authz:by_cli", *where], env=plain, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 8, done.stderr  # denied by HBase, in one line naming the table and permission
    assert done.stderr.strip().count("\n") == 0 and f"W permission on {secured.prefix}_metadata" in done.stderr

    with secured.superuser() as client:  # nothing was changed
        assert [m.payload for m in client.fetch(topic)] == [b"m%d" % i for i in range(5)]
        assert client.installation.missing() == []
        assert not {TopicId("authz", "by_consumer"), TopicId("authz", "by_cli")} & set(client.list_topics("authz"))


def test_a_publisher_publishes_and_reads_back(secured: Secured) -> None:
    topic = _topic(secured, "published", 0)
    secured.grant("publisher")
    with MessagingClient(config=secured.config("publisher")) as client:
        client.publish(topic, [b"one", b"two"])
        client.publish(topic, [b"three"])
        assert [m.payload for m in client.fetch(topic)] == [b"one", b"two", b"three"]
        with pytest.raises(AccessDenied):
            client.admin.drop_tables()
    with secured.superuser() as client:
        assert [m.payload for m in client.fetch(topic)] == [b"one", b"two", b"three"]


def test_an_admin_creates_uses_and_drops_an_installation(secured: Secured) -> None:
    prefix = f"b{uuid.uuid4().hex[:10]}"
    secured.grant("admin", prefix)
    topic = TopicId("authz", "admin")
    with MessagingClient(config=secured.config("admin", prefix)) as client:
        created = client.admin.init_tables()
        assert sorted(created) == sorted(client.installation.names.all())
        client.create_topic(topic)
        client.publish(topic, [b"x"])
        assert [m.payload for m in client.fetch(topic)] == [b"x"]
        client.delete_topic(topic)
        assert sorted(client.admin.drop_tables()) == sorted(created)
    with secured.superuser(prefix) as client:
        assert sorted(client.installation.missing()) == sorted(client.installation.names.core())


def test_the_sweeper_drops_expired_messages_and_compacts(secured: Secured) -> None:
    topic = TopicId("authz", "expiring")
    with secured.superuser() as client:
        client.create_topic(topic, {"ttl": "1"})
        client.publish(topic, [b"a"])
        client.publish(topic, [b"b"])  # the first batch is then no generation's newest row: it is deleted
    secured.grant("sweeper")
    time.sleep(1 + GRACE + 0.3)  # past the TTL and the sweeper's grace
    with MessagingClient(config=secured.config("sweeper")) as client:
        report = Sweeper(client.installation, grace_seconds=GRACE, compact_after=1).sweep_once()
    assert report.messages_dropped >= 1 and report.compactions >= 1, report
    with secured.superuser() as client:
        assert list(client.fetch(topic)) == []


def test_the_messaging_gateway_publishes_consumes_and_manages_topics(secured: Secured, tmp_path: Path) -> None:
    secured.grant("gateway")
    transport = secured.config("gateway").transport
    config = tmp_path / "gateway.toml"
    config.write_text(
        f'thrift = "{secured.address}"\nprefix = "{secured.prefix}"\nthrift_kerberos = true\nthrift_qop = "auth-conf"\n'
        f'thrift_keytab = "{transport.keytab}"\nthrift_principal = "{transport.principal}"\n'
    )
    plain = {k: v for k, v in os.environ.items() if not k.startswith("TMS_")}
    gateway = GatewayProcess(plain, tmp_path / "gateway.log", "--config", str(config)).start()
    topic = TopicId("authz", "through_gateway")
    try:
        with GatewayClient(gateway.url, timeout_seconds=TIMEOUT) as client:
            client.create_topic(topic)
            client.publish(topic, [b"one", b"two"])
            assert [m.payload for m in client.fetch(topic)] == [b"one", b"two"]
            client.create_subscription(topic, "work")
            with client.consumer(topic, "work") as consumer:
                assert [m.payload for m in consumer.poll(10, timeout_seconds=30)] == [b"one", b"two"]
                consumer.commit()
            client.delete_topic(topic)
    finally:
        assert gateway.stop() == 0, gateway.log()
