"""Configuration: the Thrift addresses, how to speak to them (:class:`ThriftTransport`), the table prefix,
the timeout and the retry policy, from arguments, the environment or defaults (:class:`Config`)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tms_hbase.errors import InvalidArgument
from tms_hbase.model.retry import Retry

THRIFT_ENV = "TMS_HBASE_THRIFT"
PREFIX_ENV = "TMS_TABLE_PREFIX"
DEFAULT_THRIFT = "127.0.0.1:9090"
DEFAULT_PREFIX = "tms"
TX_ENV = "TMS_TX_SERVER"
DEFAULT_TX_SERVER = "127.0.0.1:15165"
"""Where clients find the transaction server (tms_hbase.tx.client), here so that a command-line tool can
name them in its options without loading the Thrift client."""

TRANSPORT_ENV = {
    "framed": "TMS_HBASE_THRIFT_FRAMED",
    "compact": "TMS_HBASE_THRIFT_COMPACT",
    "http": "TMS_HBASE_THRIFT_HTTP",
    "tls": "TMS_HBASE_THRIFT_TLS",
    "ca_file": "TMS_HBASE_THRIFT_CA",
    "cert_file": "TMS_HBASE_THRIFT_CERT",
    "key_file": "TMS_HBASE_THRIFT_KEY",
    "kerberos": "TMS_HBASE_THRIFT_KERBEROS",
    "kerberos_qop": "TMS_HBASE_THRIFT_QOP",
    "kerberos_service": "TMS_HBASE_THRIFT_KERBEROS_SERVICE",
    "keytab": "TMS_HBASE_THRIFT_KEYTAB",
    "principal": "TMS_HBASE_THRIFT_PRINCIPAL",
}
"""The environment variable of each :class:`ThriftTransport` field."""
_SWITCHES = ("framed", "compact", "http", "tls", "kerberos")
"""The :class:`ThriftTransport` fields that are on or off."""
QOPS = ("auth", "auth-int", "auth-conf")
"""The qualities of protection of SASL on the binary transport, as HBase's ``hbase.thrift.security.qop`` names them:
authentication only, with integrity (each message signed), with confidentiality (each message encrypted)."""
_KERBEROS_TEXTS = ("kerberos_service", "keytab", "principal")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")

# HBase table qualifiers: word characters, '.' and '-', not starting with '.' or '-'.
_PREFIX = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_PORT = re.compile(r"[0-9]{1,5}")  # ASCII digits only: str.isdigit() also accepts '²'


def _setting(explicit: str | None, env: str, default: str) -> str:
    """The argument if given (even empty), else the environment variable if set (even empty), else
    the default: an empty value is a mistake to report, never a silent fall-back to the default."""
    if explicit is not None:
        return explicit
    return os.environ.get(env, default)


def thrift_address(explicit: str | None = None) -> tuple[str, int]:
    """``host:port`` of the HBase Thrift gateway: the argument, ``$TMS_HBASE_THRIFT``, or the default."""
    text = _setting(explicit, THRIFT_ENV, DEFAULT_THRIFT)
    host, sep, port = text.rpartition(":") if isinstance(text, str) else ("", "", "")
    if not sep or not host or not _PORT.fullmatch(port) or not 0 < int(port) < 65536:
        raise InvalidArgument(f"bad HBase Thrift address {text!r}: expected host:port, e.g. 127.0.0.1:9090")
    return host.strip("[]"), int(port)


def table_prefix(explicit: str | None = None) -> str:
    """The table-name prefix: the argument, ``$TMS_TABLE_PREFIX``, or ``tms``. An empty prefix is
    InvalidArgument (it would otherwise mean the shared default installation)."""
    prefix = _setting(explicit, PREFIX_ENV, DEFAULT_PREFIX)
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise InvalidArgument(
            f"bad table prefix {prefix!r}: use 1-64 of the characters A-Z a-z 0-9 _ . -, "
            "starting with a letter, digit or _"
        )
    return prefix


def check_timeout(timeout: object) -> float:
    """A timeout in seconds: a finite number > 0, or InvalidArgument."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise InvalidArgument(f"bad timeout {timeout!r}: expected a finite number of seconds > 0")
    return float(timeout)


@dataclass(frozen=True)
class ThriftTransport:
    """How the client speaks to the HBase Thrift gateways; it must match how they serve.

    ``framed`` is HBase's ``hbase.regionserver.thrift.framed`` (else the buffered transport), ``compact``
    its ``hbase.regionserver.thrift.compact`` (else the binary protocol), ``http`` its
    ``hbase.regionserver.thrift.http`` (the HTTP transport: binary protocol, not framed), ``tls`` TLS to the
    gateway (its ``hbase.thrift.ssl.enabled`` with ``http``: HTTPS; a TLS terminator in front of it without):
    the gateway's certificate is verified against ``ca_file`` (PEM; default:
    the system's trusted CAs) and its host name; ``cert_file`` (PEM, with its key inside or in
    ``key_file``) is a client certificate to present.

    ``kerberos`` is Kerberos to the gateway (HBase's ``hbase.security.authentication=kerberos``; the ``kerberos``
    extra): SASL/GSSAPI of quality of protection ``kerberos_qop`` (:data:`QOPS`, default ``auth``; the gateway's
    ``hbase.thrift.security.qop`` must be the same) on the binary transport, SPNEGO on HTTP. The gateway's
    principal is ``kerberos_service/HOST`` (default service ``hbase``, over HTTP ``HTTP``) with HOST as the client
    names the gateway; the client is ``principal`` from ``keytab`` (tickets renewed from it), else the user's
    ticket cache (``kinit``)."""

    framed: bool = False
    compact: bool = False
    http: bool = False
    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    kerberos: bool = False
    kerberos_qop: str | None = None
    kerberos_service: str | None = None
    keytab: str | None = None
    principal: str | None = None

    def __post_init__(self) -> None:
        for name in _SWITCHES:
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgument(f"thrift {name} must be true or false, not {getattr(self, name)!r}")
        for name in ("ca_file", "cert_file", "key_file"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidArgument(f"thrift {name} must be a file path, not {value!r}")
            if value is not None and not self.tls:
                raise InvalidArgument(f"thrift {name} is given but TLS is off: turn TLS on too (--thrift-tls)")
        if self.key_file is not None and self.cert_file is None:
            raise InvalidArgument("thrift key_file is given without cert_file (the client certificate)")
        self._check_kerberos()
        if self.http and (self.framed or self.compact):
            raise InvalidArgument(
                "the Thrift HTTP transport is neither framed nor compact: HBase's HTTP gateway speaks the binary "
                "protocol in HTTP requests (turn framed and compact off)"
            )

    def _check_kerberos(self) -> None:
        for name in ("kerberos_qop", *_KERBEROS_TEXTS):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidArgument(f"thrift {name} must be a non-empty string, not {value!r}")
            if value is not None and not self.kerberos:
                raise InvalidArgument(f"thrift {name} is given but Kerberos is off: turn it on too (--thrift-kerberos)")
        if self.kerberos_qop is not None and self.kerberos_qop not in QOPS:
            raise InvalidArgument(f"bad thrift kerberos_qop {self.kerberos_qop!r}: expected one of {', '.join(QOPS)}")
        if self.kerberos and self.framed:
            raise InvalidArgument("HBase's Thrift gateway serves Kerberos (SASL) on the buffered transport only")
        if self.http and self.kerberos_qop not in (None, "auth"):
            raise InvalidArgument(
                "over HTTP the gateway authenticates by SPNEGO and protects calls with TLS (HTTPS, --thrift-tls), "
                "not with a SASL quality of protection: leave --thrift-qop out"
            )
        if self.keytab is not None and self.principal is None:
            raise InvalidArgument("thrift keytab is given without the principal to take from it (--thrift-principal)")

    @property
    def qop(self) -> str:
        """The SASL quality of protection in use (``auth`` unless ``kerberos_qop`` says otherwise)."""
        return self.kerberos_qop or "auth"

    @classmethod
    def resolve(cls, **given: Any) -> ThriftTransport:
        """The fields ``given`` (None: not given), else from the environment (:data:`TRANSPORT_ENV`;
        switches as 1/0, true/false, yes/no, on/off), else the defaults."""
        values: dict[str, Any] = {}
        for name, env in TRANSPORT_ENV.items():
            value = given.pop(name, None)
            if value is None and env in os.environ:
                value = os.environ[env]
                if name in _SWITCHES:
                    value = _switch(env, value)
            if value is not None:
                values[name] = value
        if given:
            raise InvalidArgument(f"unknown thrift transport setting(s): {', '.join(sorted(given))}")
        return cls(**values)

    def describe(self) -> str:
        """What the gateway must serve, as a user names it: e.g. ``framed transport, compact protocol, TLS``."""
        return ", ".join(
            [
                "HTTP transport" if self.http else "framed transport" if self.framed else "buffered transport",
                "compact protocol" if self.compact else "binary protocol",
                *(["TLS"] if self.tls else []),
                *([f"Kerberos ({'SPNEGO' if self.http else 'SASL ' + self.qop})"] if self.kerberos else []),
            ]
        )


PLAIN = ThriftTransport()
"""How HBase's Thrift gateway serves by default: buffered transport, binary protocol, no TLS."""


def _switch(env: str, text: str) -> bool:
    if text.strip().lower() in _TRUE:
        return True
    if text.strip().lower() in _FALSE:
        return False
    raise InvalidArgument(f"bad ${env} {text!r}: expected 1 or 0 (true/false, yes/no, on/off)")


@dataclass(frozen=True)
class Config:
    """Where a tms-hbase installation is and how to talk to it: the one configuration object the
    client, both command-line tools, the sweeper, Spark tasks and the gateway take.

    ``thrift`` lists HBase Thrift gateways (``host:port``; a client fails over to the next when one
    cannot be reached), ``prefix`` names the installation's tables, ``timeout_seconds`` is the
    deadline of each operation and ``retry`` the policy for failures worth trying again; ``transport``
    says how the gateways serve (:class:`ThriftTransport`: framed, compact, HTTP, TLS). Build one
    with :meth:`resolve` to fill in the environment and the defaults; it is immutable and picklable
    (ship it to Spark executors as it is).
    """

    thrift: tuple[str, ...] = (DEFAULT_THRIFT,)
    prefix: str = DEFAULT_PREFIX
    timeout_seconds: float = 10.0
    retry: Retry = field(default_factory=Retry)
    pool_size: int = 8
    transport: ThriftTransport = PLAIN

    def __post_init__(self) -> None:
        thrift = (self.thrift,) if isinstance(self.thrift, str) else tuple(self.thrift)
        if not thrift:
            raise InvalidArgument("no HBase Thrift address given")
        for address in thrift:
            thrift_address(address)
        object.__setattr__(self, "thrift", thrift)
        table_prefix(self.prefix)
        check_timeout(self.timeout_seconds)
        if not isinstance(self.retry, Retry):
            raise InvalidArgument(f"retry must be a tms_hbase.model.retry.Retry, not {type(self.retry).__name__}")
        if isinstance(self.pool_size, bool) or not isinstance(self.pool_size, int) or self.pool_size < 1:
            raise InvalidArgument(f"bad pool size {self.pool_size!r}: expected an integer >= 1")
        if not isinstance(self.transport, ThriftTransport):
            raise InvalidArgument(f"transport must be a ThriftTransport, not {type(self.transport).__name__}")

    @classmethod
    def resolve(
        cls,
        thrift: str | Sequence[str] | None = None,
        prefix: str | None = None,
        *,
        timeout_seconds: float | None = None,
        retry: Retry | None = None,
        pool_size: int | None = None,
        transport: ThriftTransport | None = None,
    ) -> Config:
        """A Config from what is given, else the environment (``$TMS_HBASE_THRIFT``, comma-separated
        for several gateways, ``$TMS_TABLE_PREFIX`` and the transport's, :data:`TRANSPORT_ENV`), else
        the defaults."""
        if thrift is None:
            thrift = os.environ.get(THRIFT_ENV, DEFAULT_THRIFT)
        if isinstance(thrift, str):
            thrift = [part.strip() for part in thrift.split(",")]
        given: dict[str, Any] = {"timeout_seconds": timeout_seconds, "retry": retry, "pool_size": pool_size}
        return cls(
            tuple(thrift),
            table_prefix(prefix),
            transport=transport or ThriftTransport.resolve(),
            **{k: v for k, v in given.items() if v is not None},
        )

    @classmethod
    def of_client(
        cls,
        config: Config | None,
        thrift: str | Sequence[str] | None,
        prefix: str | None,
        *,
        timeout_seconds: float | None,
        retry: Retry | None,
        pool_size: int | None,
    ) -> Config:
        """What a client's constructor was given: its ``config``, else one resolved from the loose arguments
        (:meth:`resolve`); both at once is refused, as it is unclear which should win."""
        if config is None:
            return cls.resolve(thrift, prefix, timeout_seconds=timeout_seconds, retry=retry, pool_size=pool_size)
        if any(v is not None for v in (thrift, prefix, timeout_seconds, pool_size, retry)):
            raise InvalidArgument("give a Config or the address, prefix, timeout, pool size and retry, not both")
        return config

    def with_(self, **changes: Any) -> Config:
        """A copy with some fields changed, e.g. ``config.with_(prefix="other")``."""
        return replace(self, **changes)

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """The Thrift gateways as (host, port)."""
        return [thrift_address(a) for a in self.thrift]
