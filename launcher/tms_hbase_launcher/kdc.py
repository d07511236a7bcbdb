"""A Kerberos KDC for testing secured HBase Thrift gateways: Apache Kerby's ``SimpleKdcServer`` in a JVM of its own
(KerberosKdc.java, on the local HBase's jars), the krb5.conf that points clients and servers at it, its keytabs,
and the hbase-site.xml settings that make HBase's processes use them."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tms_hbase.errors import LauncherError
from tms_hbase_launcher.jars import hbase_jars
from tms_hbase_launcher.javac import compile_java
from tms_hbase_launcher.local import HOST, LocalHBase, _find_java, _free_port, _pid_alive, _signal_group

REALM = "TMS.TEST"
SERVER_HOST = "localhost"
"""The host part of the servers' principals: what HBase makes of ``_HOST`` here (the canonical name of this
machine's address, 127.0.0.1), and so the name clients connect to."""
SERVICE = "hbase"
"""The service part of the HBase servers' principals (``hbase/_HOST@REALM``), as on most clusters."""
CLIENT = "tmsclient"
"""The principal (without the realm) of the client identity the KDC makes, in the keytab :attr:`Kdc.client_keytab`."""
KDC_SOURCE = Path(__file__).with_name("KerberosKdc.java")


def krb5_conf(realm: str, port: int) -> str:
    """A krb5.conf for ``realm`` served on 127.0.0.1:``port`` over TCP, with host names taken as given (no DNS
    canonicalization: servers are named ``localhost``)."""
    return (
        "[libdefaults]\n"
        f"  default_realm = {realm}\n"
        "  dns_lookup_kdc = false\n  dns_lookup_realm = false\n"
        "  dns_canonicalize_hostname = false\n  rdns = false\n"
        "  udp_preference_limit = 1\n  forwardable = true\n"
        "[realms]\n"
        f"  {realm} = {{\n    kdc = {HOST}:{port}\n  }}\n"
        "[domain_realm]\n"
        f"  localhost = {realm}\n"
    )


@dataclass
class Kdc:
    """A running KDC: its realm, port, JVM, the ``krb5_conf`` file to give clients (``KRB5_CONFIG``) and servers
    (``-Djava.security.krb5.conf``), and keytabs: ``server_keytab`` (``hbase/localhost`` and ``HTTP/localhost``),
    ``client_keytab`` (:data:`CLIENT`), and one per further user asked for (:meth:`keytab`)."""

    realm: str
    port: int
    pid: int
    folder: Path
    keytabs: dict[str, Path] = field(default_factory=dict)

    @property
    def krb5_conf(self) -> Path:
        return self.folder / "krb5.conf"

    @property
    def server_keytab(self) -> Path:
        return self.keytabs["server"]

    @property
    def client_keytab(self) -> Path:
        return self.keytabs["client"]

    def keytab(self, user: str) -> Path:
        """The keytab of ``user``, one of the users :func:`start_kdc` was asked for."""
        return self.keytabs[user]

    def principal(self, name: str) -> str:
        """``name`` in this KDC's realm."""
        return f"{name}@{self.realm}"

    def java_flags(self) -> list[str]:
        """What a JVM of HBase needs to find this KDC."""
        return [f"-Djava.security.krb5.conf={self.krb5_conf}", "-Dsun.security.krb5.disableReferrals=true"]

    def server_settings(self) -> dict[str, str]:
        """The hbase-site.xml settings of every secured HBase process (master, region servers, Thrift gateways):
        Kerberos for Hadoop and HBase, each server's principal and keytab, and the Thrift gateway's right to act
        for the users it authenticates (HBase's Thrift server runs each call as its caller)."""
        principal, keytab = f"{SERVICE}/_HOST@{self.realm}", str(self.server_keytab)
        return {
            "hadoop.security.authentication": "kerberos",
            "hbase.security.authentication": "kerberos",
            "hbase.master.kerberos.principal": principal,
            "hbase.master.keytab.file": keytab,
            "hbase.regionserver.kerberos.principal": principal,
            "hbase.regionserver.keytab.file": keytab,
            "hbase.thrift.kerberos.principal": principal,
            "hbase.thrift.keytab.file": keytab,
            f"hadoop.proxyuser.{SERVICE}.hosts": "*",
            f"hadoop.proxyuser.{SERVICE}.groups": "*",
        }

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds."""
        _signal_group(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _pid_alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _pid_alive(self.pid):
            _signal_group(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, os.WNOHANG)


def start_kdc(folder: Path, local: LocalHBase | None = None, timeout: float = 120.0, users: Sequence[str] = ()) -> Kdc:
    """Start a KDC for :data:`REALM` writing its files into ``folder`` (created), on the jars of ``local`` (the
    local HBase's, downloaded if need be), with a principal and a keytab of its own for each of ``users`` (client
    identities, e.g. one per role), and wait until it takes connections; LauncherError if it does not."""
    local = local or LocalHBase(progress=lambda _message: None)
    lib = hbase_jars(local.paths, local.progress)
    java = _find_java()
    folder.mkdir(parents=True, exist_ok=True)
    classes = compile_java(java, KDC_SOURCE, folder / "classes", lib)
    port = _free_port()
    keytabs = {"server": folder / "server.keytab", "client": folder / "client.keytab"}
    keytabs |= {user: folder / f"{user}.keytab" for user in users}
    (folder / "krb5.conf").write_text(krb5_conf(REALM, port))
    specs = [
        f"{keytabs['server']}={SERVICE}/{SERVER_HOST},HTTP/{SERVER_HOST}",
        f"{keytabs['client']}={CLIENT}",
        *(f"{keytabs[user]}={user}" for user in users),
    ]
    cmd = [java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Dtms.kdc={folder}"]
    cmd += ["-cp", f"{classes}:{lib}/*", KDC_SOURCE.stem, str(folder), REALM, str(port), *specs]
    with open(folder / "kdc.out", "ab") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=folder
        )
    kdc = Kdc(REALM, port, proc.pid, folder, keytabs)
    pid = proc.pid
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            raise LauncherError(f"the KDC exited at start; see {folder / 'kdc.out'}")
        if all(k.exists() for k in keytabs.values()):
            try:
                with socket.create_connection((HOST, port), timeout=1.0):
                    return kdc
            except OSError:
                pass
        time.sleep(0.3)
    kdc.stop()
    raise LauncherError(f"the KDC did not serve on {HOST}:{port} within {timeout:.0f}s; see {folder / 'kdc.out'}")
