"""A KDC and a local HBase secured with it, on a home and ports of their own: what the secured test group
(test_kerberos.py, test_authorization.py) and the SASL benchmark (bench/transports_sasl.py) run on."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tms_hbase_launcher.kdc import Kdc, start_kdc
from tms_hbase_launcher.local import LocalHBase
from tms_hbase_launcher.paths import default_home, default_jars_root

from .tx_server import free_port


@dataclass(frozen=True)
class SecuredHBase:
    """The running KDC and the HBase it secures (its own gateway, ``hbase.thrift_port``, serves without SASL as
    HBase's service principal: its superuser)."""

    kdc: Kdc
    hbase: LocalHBase


@contextmanager
def secured_hbase_running(
    folder: Path, *, users: Sequence[str] = (), site: Mapping[str, str] | None = None, timeout: float = 900
) -> Iterator[SecuredHBase]:
    """Start a KDC (with a principal and keytab for each of ``users`` too) and a local HBase secured with it, with
    the extra hbase-site.xml ``site`` settings, in ``folder``, on the shared download of HBase's jars; this
    process's GSS library finds the KDC through ``KRB5_CONFIG`` meanwhile. Both are stopped at the end, and the
    environment restored."""
    saved = {name: os.environ.get(name) for name in ("TMS_HBASE_JARS", "KRB5_CONFIG")}
    os.environ["TMS_HBASE_JARS"] = str(default_jars_root(default_home()))
    try:
        kdc = start_kdc(folder / "kdc", users=users)
        try:
            os.environ["KRB5_CONFIG"] = str(kdc.krb5_conf)
            (folder / "hbase").mkdir(parents=True, exist_ok=True)
            hbase = LocalHBase(
                home=folder / "hbase",
                thrift_port=free_port(),
                progress=lambda _message: None,
                site=kdc.server_settings() | dict(site or {}),
                java_flags=kdc.java_flags(),
            )
            try:
                hbase.start(timeout=timeout)
                yield SecuredHBase(kdc, hbase)
            finally:
                hbase.stop()
        finally:
            kdc.stop()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
