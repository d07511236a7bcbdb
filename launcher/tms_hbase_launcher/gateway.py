"""An extra HBase Thrift1 gateway on the running local HBase: a stock ``org.apache.hadoop.hbase.thrift.ThriftServer``
JVM, from the launcher's jars, serving the framed transport and/or the compact protocol, or the HTTP transport with
or without TLS, as HBase's settings say (``hbase.regionserver.thrift.framed``, ``hbase.regionserver.thrift.compact``,
``hbase.regionserver.thrift.http``, ``hbase.thrift.ssl.enabled``). What the client's transports are tested
against; the local HBase itself (its gateway included) is left as it is."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tms_hbase.errors import LauncherError
from tms_hbase_launcher.kdc import Kdc
from tms_hbase_launcher.local import HOST, LocalHBase, _find_java, _free_port, _pid_alive, _signal_group, spawn_jvm
from tms_hbase_launcher.paths import read_state
from tms_hbase_launcher.siteconf import LOG4J2, write_site

THRIFT_SERVER_CLASS = "org.apache.hadoop.hbase.thrift.ThriftServer"
MAX_FRAME_MB = 64
"""The framed server's largest request (HBase's default is 2 MB, less than one default-sized publish batch)."""
FULL_JIT = ("-XX:TieredStopAtLevel=4",)
"""The JIT a production gateway runs with (C2 too), for benchmarks: with C1 alone the JVM's TLS and SASL encryption
run several times slower."""


@dataclass(frozen=True)
class Keystore:
    """The gateway's TLS certificate and key: a PKCS #12 (or JKS, ``kind``) file and its password."""

    path: Path
    password: str
    kind: str = "pkcs12"


def gateway_settings(
    framed: bool = False,
    compact: bool = False,
    *,
    http: bool = False,
    keystore: Keystore | None = None,
    kerberos: Kdc | None = None,
    qop: str = "auth",
) -> dict[str, str]:
    """The hbase-site.xml settings that make a Thrift1 gateway serve ``framed`` and ``compact``, or ``http``
    (HTTP transport, TLS with ``keystore``), with ``kerberos`` (its KDC's realm; the HBase it serves is secured
    with it too): SASL/GSSAPI of quality of protection ``qop`` on the binary transport, SPNEGO on HTTP. What
    docs/existing-cluster.md tells an operator to set."""
    settings = _kerberos_settings(kerberos, http, qop) if kerberos is not None else {}
    if kerberos is not None and framed:
        raise LauncherError("HBase's Thrift gateway serves SASL on the buffered transport only")
    if http:
        settings |= {"hbase.regionserver.thrift.http": "true"}
        if keystore is not None:
            settings |= {
                "hbase.thrift.ssl.enabled": "true",
                "hbase.thrift.ssl.keystore.store": str(keystore.path),
                "hbase.thrift.ssl.keystore.password": keystore.password,
                "hbase.thrift.ssl.keystore.type": keystore.kind,
            }
        return settings
    if keystore is not None:
        raise LauncherError("HBase's Thrift gateway serves TLS on its HTTP transport only")
    settings |= {
        "hbase.regionserver.thrift.framed": str(framed).lower(),
        "hbase.regionserver.thrift.compact": str(compact).lower(),
    }
    if framed:
        settings["hbase.regionserver.thrift.framed.max_frame_size_in_mb"] = str(MAX_FRAME_MB)
    return settings


def _kerberos_settings(kdc: Kdc, http: bool, qop: str) -> dict[str, str]:
    """A secured gateway's settings: the secured HBase's (:meth:`Kdc.server_settings`), and SPNEGO's principal and
    keytab over HTTP, else the SASL quality of protection."""
    if http:
        spnego = {"hbase.thrift.spnego.principal": f"HTTP/_HOST@{kdc.realm}"}
        return kdc.server_settings() | spnego | {"hbase.thrift.spnego.keytab.file": str(kdc.server_keytab)}
    return kdc.server_settings() | {"hbase.thrift.security.qop": qop}


@dataclass
class ThriftGateway:
    """A running extra gateway: its ``address`` (host:port), the ``settings`` it was started with, its JVM, and
    its web UI's ``info_address`` (host:port; ``/conf`` shows the configuration it runs with)."""

    address: str
    settings: dict[str, str]
    pid: int
    folder: Path
    info_address: str

    @property
    def log(self) -> Path:
        return self.folder / "thrift.log"

    def settings_of(self, names: Iterable[str], timeout: float = 60.0) -> dict[str, str | None]:
        """The values of the settings ``names`` the running gateway reports on its web UI's ``/conf`` (None:
        not set), read within ``timeout`` seconds (its web UI may come up after its Thrift port)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://{self.info_address}/conf?format=json", timeout=10) as answer:
                    properties = {p["key"]: p["value"] for p in json.load(answer)["properties"]}
                return {name: properties.get(name) for name in names}
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise LauncherError(f"the gateway's /conf at {self.info_address} did not answer: {exc}") from None
                time.sleep(0.5)

    def stop(self, grace: float = 30.0, *, keep_files: bool = False) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; then its folder (configuration, logs) is removed
        unless ``keep_files``."""
        _signal_group(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _pid_alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _pid_alive(self.pid):
            _signal_group(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):  # reap it if it is our child
            os.waitpid(self.pid, os.WNOHANG)
        if not keep_files:
            shutil.rmtree(self.folder, ignore_errors=True)


def start_gateway(
    framed: bool = False,
    compact: bool = False,
    *,
    http: bool = False,
    keystore: Keystore | None = None,
    kerberos: Kdc | None = None,
    qop: str = "auth",
    local: LocalHBase | None = None,
    timeout: float = 180.0,
    java_flags: Sequence[str] = (),
) -> ThriftGateway:
    """Start a gateway serving as :func:`gateway_settings` says on the running local HBase (its ZooKeeper; with
    ``kerberos``, an HBase secured by that KDC) and wait until it accepts connections; LauncherError if the local
    HBase is not running or the gateway does not come up within ``timeout``. Its JVM starts small and quick (C1
    compiler only), as tests want; ``java_flags`` come after those and win (e.g. :data:`FULL_JIT`)."""
    local = local or LocalHBase(progress=lambda _message: None)
    state = read_state(local.paths.state)
    if not state or not local.status().running:
        raise LauncherError("the local HBase is not running: start it first (tms-admin hbase start)")
    folder = Path(tempfile.mkdtemp(prefix="tms-thrift-gateway-", dir=local.paths.run))
    conf = folder / "conf"
    conf.mkdir()
    properties = {
        "hbase.zookeeper.quorum": HOST,
        "hbase.zookeeper.property.clientPort": str(state["zk_port"]),
        "hbase.client.keyvalue.maxsize": str(64 * 1024 * 1024),
        "hbase.thrift.info.bindAddress": HOST,
        **gateway_settings(framed, compact, http=http, keystore=keystore, kerberos=kerberos, qop=qop),
    }
    write_site(conf, properties)
    (conf / "log4j2.properties").write_text(LOG4J2)
    port, info_port = _free_port(), _free_port()
    main = [THRIFT_SERVER_CLASS, "-b", HOST, "-p", str(port), "--infoport", str(info_port), "-threadpool", "start"]
    flags = ["-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Dtms.thrift.gateway={folder}"]
    flags += kerberos.java_flags() if kerberos is not None else []
    flags += java_flags
    pid = spawn_jvm(_find_java(), flags, conf, local.paths.lib, folder / "thrift.log", folder, main)
    gateway = ThriftGateway(f"{HOST}:{port}", properties, pid, folder, f"{HOST}:{info_port}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            raise LauncherError(f"the Thrift gateway exited at start; see {folder / 'thrift.out'}")
        try:
            with socket.create_connection((HOST, port), timeout=1.0):
                return gateway
        except OSError:
            time.sleep(0.5)
    gateway.stop(keep_files=True)
    raise LauncherError(f"the Thrift gateway did not listen on {gateway.address} within {timeout:.0f}s; see {folder}")
