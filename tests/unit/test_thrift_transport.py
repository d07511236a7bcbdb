"""How the client is told what its Thrift gateways serve (framed, compact, TLS, Kerberos): from arguments, the
environment, the command-line options and the gateway's config file, with bad values refused as InvalidArgument."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trustme

from tms_hbase.config import TRANSPORT_ENV, Config, ThriftTransport
from tms_hbase.errors import InvalidArgument
from tms_hbase.ops.cli_options import config_from_options
from tms_hbase.storage.connection import HBaseConnection
from tms_hbase_gateway.config import load, resolve


@pytest.fixture(autouse=True)
def no_transport_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for env in TRANSPORT_ENV.values():
        monkeypatch.delenv(env, raising=False)


def test_the_default_is_what_hbase_serves_by_default() -> None:
    assert Config().transport == Config.resolve().transport == ThriftTransport()
    assert ThriftTransport().describe() == "buffered transport, binary protocol"
    assert ThriftTransport(http=True, tls=True).describe() == "HTTP transport, binary protocol, TLS"


def test_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMS_HBASE_THRIFT_FRAMED", "yes")
    monkeypatch.setenv("TMS_HBASE_THRIFT_COMPACT", "1")
    assert Config.resolve().transport == ThriftTransport(framed=True, compact=True)
    assert ThriftTransport.resolve(framed=False) == ThriftTransport(compact=True)
    assert config_from_options(None, None, 5.0, thrift_compact=False).transport == ThriftTransport(framed=True)
    monkeypatch.setenv("TMS_HBASE_THRIFT_HTTP", "on")
    with pytest.raises(InvalidArgument, match="neither framed nor compact"):
        Config.resolve()
    assert ThriftTransport.resolve(framed=False, compact=False) == ThriftTransport(http=True)


@pytest.mark.parametrize("text", ["maybe", "2", "enabled"])
def test_a_switch_that_is_not_one_is_refused(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("TMS_HBASE_THRIFT_TLS", text)
    with pytest.raises(InvalidArgument, match="TMS_HBASE_THRIFT_TLS"):
        Config.resolve()


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"ca_file": "ca.pem"}, "TLS is off"),
        ({"tls": True, "key_file": "k.pem"}, "without cert_file"),
        ({"tls": True, "ca_file": ""}, "file path"),
        ({"framed": "true"}, "true or false"),
        ({"http": True, "framed": True}, "neither framed nor compact"),
        ({"http": True, "compact": True}, "neither framed nor compact"),
        ({"kerberos_qop": "auth-conf"}, "Kerberos is off"),
        ({"keytab": "client.keytab"}, "Kerberos is off"),
        ({"kerberos": True, "kerberos_qop": "privacy"}, "expected one of auth, auth-int, auth-conf"),
        ({"kerberos": True, "framed": True}, "buffered transport only"),
        ({"kerberos": True, "http": True, "kerberos_qop": "auth-conf"}, "TLS"),
        ({"kerberos": True, "keytab": "client.keytab"}, "without the principal"),
        ({"kerberos": True, "principal": ""}, "non-empty string"),
    ],
)
def test_nonsense_combinations_are_refused(given: dict, says: str) -> None:
    with pytest.raises(InvalidArgument, match=says):
        ThriftTransport(**given)


def test_tls_files_that_cannot_be_loaded_are_refused_when_the_pool_is_made(tmp_path: Path) -> None:
    missing = ThriftTransport(tls=True, ca_file=str(tmp_path / "missing.pem"))
    with pytest.raises(InvalidArgument, match="cannot load the Thrift TLS files"):
        HBaseConnection("127.0.0.1", 9, transport=missing)
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("client").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "client.pem"))
    good = ThriftTransport(tls=True, ca_file=str(tmp_path / "ca.pem"), cert_file=str(tmp_path / "client.pem"))
    HBaseConnection("127.0.0.1", 9, transport=good).close()


def test_the_gateway_file_names_tls_files_relative_to_itself(tmp_path: Path) -> None:
    trustme.CA().cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    path = tmp_path / "gateway.toml"
    path.write_text('thrift_framed = true\nthrift_tls = true\nthrift_ca = "ca.pem"\n')
    settings = resolve(load(path), {"thrift_compact": True, "thrift_framed": None})
    assert settings.thrift_transport() == ThriftTransport(
        framed=True, compact=True, tls=True, ca_file=str(tmp_path / "ca.pem")
    )
    with pytest.raises(InvalidArgument, match="thrift_tls must be of type bool"):
        resolve({"thrift_tls": "yes"}, {})
    with pytest.raises(InvalidArgument, match="TLS is off"):
        resolve({"thrift_ca": "ca.pem"}, {})


def test_kerberos_from_the_environment_the_options_and_the_gateway_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TMS_HBASE_THRIFT_KERBEROS", "1")
    monkeypatch.setenv("TMS_HBASE_THRIFT_QOP", "auth-int")
    assert Config.resolve().transport == ThriftTransport(kerberos=True, kerberos_qop="auth-int")
    assert Config.resolve().transport.describe() == "buffered transport, binary protocol, Kerberos (SASL auth-int)"
    options = config_from_options(None, None, 5.0, thrift_qop="auth-conf", thrift_kerberos_service="thrift")
    assert options.transport == ThriftTransport(kerberos=True, kerberos_qop="auth-conf", kerberos_service="thrift")
    monkeypatch.delenv("TMS_HBASE_THRIFT_QOP")
    path = tmp_path / "gateway.toml"
    path.write_text('thrift_http = true\nthrift_keytab = "me.keytab"\nthrift_principal = "me@EXAMPLE.COM"\n')
    settings = resolve(load(path), {})
    assert settings.thrift_transport() == ThriftTransport(
        http=True, kerberos=True, keytab=str(tmp_path / "me.keytab"), principal="me@EXAMPLE.COM"
    )
    assert settings.thrift_transport().describe() == "HTTP transport, binary protocol, Kerberos (SPNEGO)"


def test_kerberos_without_its_extra_is_a_clear_error_when_the_pool_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)  # as if the kerberos extra were not installed
    with pytest.raises(InvalidArgument, match=r"pip install 'tms-hbase\[kerberos\]'"):
        HBaseConnection("127.0.0.1", 9, transport=ThriftTransport(kerberos=True))
    HBaseConnection("127.0.0.1", 9).close()  # without Kerberos, nothing needs it
