"""The gateway's settings: defaults, a TOML file, then flags and environment variables, checked once.

The CLI resolves them in the parent process and hands them to every worker as JSON in an environment
variable (:data:`SETTINGS_ENV`), so all workers serve exactly the same configuration.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import ssl
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from tms_hbase import config as library_config
from tms_hbase.consume.lease import MIN_LEASE_SECONDS
from tms_hbase.errors import InvalidArgument
from tms_hbase.ops import log_options
from tms_hbase.storage.tls import client_context

SETTINGS_ENV = "TMS_GATEWAY_SETTINGS"  # set by tms-gateway for its workers; not for users
CONFIG_ENV = "TMS_GATEWAY_CONFIG"
ACTIONS = frozenset({"admin", "publish", "consume"})
ANY_PRINCIPAL = "*"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,128}")


@dataclass(frozen=True)
class Token:
    """A bearer token, known by the SHA-256 (hex) of its text; ``name`` is the principal rules refer to."""

    name: str
    sha256: str


@dataclass(frozen=True)
class Rule:
    """Allows ``principal`` (a token name, or ``*``) the ``actions`` on topics matching two globs."""

    principal: str
    namespace: str
    topics: str
    actions: tuple[str, ...]


@dataclass(frozen=True)
class Tls:
    """Server certificate and key (PEM); with ``client_ca``, clients must present a certificate it signed."""

    cert: str
    key: str
    client_ca: str | None = None


@dataclass(frozen=True)
class Settings:
    """Everything one gateway serves with. Sizes in bytes, times in seconds."""

    host: str = "127.0.0.1"
    port: int = 8080
    thrift: str = library_config.DEFAULT_THRIFT
    prefix: str = library_config.DEFAULT_PREFIX
    workers: int = 1
    threads: int = 16  # library calls at once per worker (and HBase connections per worker)
    timeout: float = 10.0  # any one HBase call
    max_batch_bytes: int | None = None  # None: the library's default (MessagingClient.max_batch_bytes)
    max_poll_messages: int = 1000  # the hard limit of one poll (CDAP's API leaves it to the server)
    max_poll_bytes: int = 8 * 1024 * 1024  # a poll stops after the message that reaches this many bytes
    keep_alive: float = 30.0  # idle HTTP connections are closed after this
    consumer_lease: float = 30.0  # a session keeps its lease this long after its last call (a third longer at most)
    max_wait: float = 30.0  # the longest long-poll (a longer ?wait= is cut to this)
    long_polls: int = 64  # long-polls waiting at once per worker (more wait for a slot)
    consumer_sessions: int = 256  # consumer sessions kept open per worker between their calls
    shutdown_grace: float = 30.0  # on SIGTERM, requests in flight get this long to finish
    json_logs: bool = False  # the same as log_format = "json"
    log_format: str = "text"  # text or json (tms_hbase.ops.log_options)
    log_level: str = "info"
    open_network: bool = False  # let an open gateway (no tokens) listen on an address other than loopback
    header_timeout: float = 10.0  # a request's line and headers must arrive within this
    body_timeout: float = 60.0  # a request's body must arrive within this after its headers
    max_client_connections: int = 256  # connections at once from one client address, per worker
    allowed_hosts: tuple[str, ...] = ()  # Host names (globs) served besides IP addresses and localhost
    # how the HBase Thrift gateway serves (None: as the environment says, else buffered, binary, no TLS)
    thrift_framed: bool | None = None
    thrift_compact: bool | None = None
    thrift_http: bool | None = None
    thrift_tls: bool | None = None
    thrift_ca: str | None = None
    thrift_cert: str | None = None
    thrift_key: str | None = None
    thrift_kerberos: bool | None = None
    thrift_qop: str | None = None
    thrift_kerberos_service: str | None = None
    thrift_keytab: str | None = None
    thrift_principal: str | None = None
    tls: Tls | None = None
    tokens: tuple[Token, ...] = ()
    rules: tuple[Rule, ...] = ()

    def thrift_transport(self) -> library_config.ThriftTransport:
        """How the HBase Thrift gateway serves: these settings, else the environment, else the defaults."""
        return library_config.ThriftTransport.resolve(
            framed=self.thrift_framed,
            compact=self.thrift_compact,
            http=self.thrift_http,
            tls=self.thrift_tls,
            ca_file=self.thrift_ca,
            cert_file=self.thrift_cert,
            key_file=self.thrift_key,
            kerberos=self.thrift_kerberos,
            kerberos_qop=self.thrift_qop,
            kerberos_service=self.thrift_kerberos_service,
            keytab=self.thrift_keytab,
            principal=self.thrift_principal,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Settings:
        data = json.loads(text)
        data["tls"] = Tls(**data["tls"]) if data["tls"] else None
        data["allowed_hosts"] = tuple(data["allowed_hosts"])
        data["tokens"] = tuple(Token(**t) for t in data["tokens"])
        data["rules"] = tuple(Rule(**{**r, "actions": tuple(r["actions"])}) for r in data["rules"])
        return cls(**data)


_TYPES: dict[str, type[Any]] = {
    "host": str,
    "port": int,
    "thrift": str,
    "prefix": str,
    "workers": int,
    "threads": int,
    "timeout": float,
    "max_batch_bytes": int,
    "max_poll_messages": int,
    "max_poll_bytes": int,
    "keep_alive": float,
    "consumer_lease": float,
    "max_wait": float,
    "long_polls": int,
    "consumer_sessions": int,
    "shutdown_grace": float,
    "json_logs": bool,
    "log_format": str,
    "log_level": str,
    "open_network": bool,
    "header_timeout": float,
    "body_timeout": float,
    "max_client_connections": int,
    "thrift_framed": bool,
    "thrift_compact": bool,
    "thrift_http": bool,
    "thrift_tls": bool,
    "thrift_ca": str,
    "thrift_cert": str,
    "thrift_key": str,
    "thrift_kerberos": bool,
    "thrift_qop": str,
    "thrift_kerberos_service": str,
    "thrift_keytab": str,
    "thrift_principal": str,
}
_LISTS = {"tls", "tokens", "rules", "allowed_hosts"}
_PATHS = ("thrift_ca", "thrift_cert", "thrift_key", "thrift_keytab")  # relative to the config file, as [tls]'s are
assert set(_TYPES) == {f.name for f in fields(Settings)} - _LISTS


def load(path: str | os.PathLike[str] | None) -> dict[str, Any]:
    """The values of a TOML config file (keys as the long options, ``-`` or ``_``); {} without a file."""
    if path is None:
        return {}
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidArgument(f"cannot read config file {path}: {exc}") from None
    data = {key.replace("-", "_"): value for key, value in data.items()}
    base = Path(path).resolve().parent
    if isinstance(data.get("tls"), dict):  # certificate paths are relative to the config file
        data["tls"] = {k: str(base / v) if isinstance(v, str) else v for k, v in data["tls"].items()}
    for key in _PATHS:
        if isinstance(data.get(key), str):
            data[key] = str(base / data[key])
    return data


def resolve(values: dict[str, Any], overrides: dict[str, Any]) -> Settings:
    """Settings from file ``values`` with ``overrides`` (flags, env; None = not given), all checked."""
    merged = {**values, **{k: v for k, v in overrides.items() if v is not None}}
    unknown = set(merged) - set(_TYPES) - _LISTS
    if unknown:
        raise InvalidArgument(f"unknown setting(s) {', '.join(sorted(unknown))} in the config file")
    scalars = {k: _scalar(k, v) for k, v in merged.items() if k in _TYPES}
    settings = replace(
        Settings(),
        **scalars,
        tls=_tls(merged.get("tls")),
        tokens=_tokens(merged.get("tokens", [])),
        rules=_rules(merged.get("rules", [])),
        allowed_hosts=_allowed_hosts(merged.get("allowed_hosts", [])),
    )
    if settings.consumer_lease < MIN_LEASE_SECONDS:
        raise InvalidArgument(f"setting consumer_lease must be at least {MIN_LEASE_SECONDS} s")
    library_config.thrift_address(settings.thrift)
    library_config.table_prefix(settings.prefix)
    client_context(settings.thrift_transport())  # a bad combination or an unreadable file: an error now
    if settings.rules and not settings.tokens:
        raise InvalidArgument("[[rules]] need [[tokens]]: without tokens no caller could ever match a rule")
    if not settings.tokens and not settings.open_network and not is_loopback(settings.host):
        raise InvalidArgument(
            f"no [[tokens]]: an open gateway listens on loopback only, not on {settings.host}; give it tokens, "
            "or --open-network (open_network = true) to let anyone who reaches that address do anything"
        )
    names = {t.name for t in settings.tokens}
    for rule in settings.rules:
        if rule.principal != ANY_PRINCIPAL and rule.principal not in names:
            raise InvalidArgument(f"rule for principal {rule.principal!r}: no [[tokens]] entry has that name")
    return settings


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address to listen on) is this machine's loopback (``localhost``, 127.0.0.0/8, ::1)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _allowed_hosts(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InvalidArgument('allowed_hosts must be a list of host names or globs, e.g. ["gateway.example.com"]')
    return tuple(v.strip().lower() for v in value)


def _scalar(key: str, value: Any) -> Any:
    kind = _TYPES[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidArgument(f"setting {key} must be of type {kind.__name__}, not {value!r}")
    if kind in (int, float) and value <= 0:
        raise InvalidArgument(f"setting {key} must be positive, not {value!r}")
    if key == "port" and not 0 < value < 65536:
        raise InvalidArgument(f"port must be between 1 and 65535, not {value}")
    if key == "log_format" and value not in log_options.FORMATS:
        raise InvalidArgument(f"log_format must be one of {', '.join(log_options.FORMATS)}, not {value!r}")
    if key == "log_level":
        if value.lower() not in log_options.LEVELS:
            raise InvalidArgument(f"log_level must be one of {', '.join(log_options.LEVELS)}, not {value!r}")
        value = value.lower()
    return value


def _tls(value: Any) -> Tls | None:
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or not {"cert", "key"} <= value.keys()
        or value.keys() - {"cert", "key", "client_ca"}
    ):
        raise InvalidArgument("[tls] takes cert and key (PEM files) and optionally client_ca")
    tls = Tls(**value)
    try:  # a bad file is a clear error now, not a worker that fails to start
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls.cert, tls.key)
        if tls.client_ca:
            context.load_verify_locations(tls.client_ca)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgument(f"[tls]: cannot load the certificate files: {exc}") from None
    return tls


def _tokens(value: Any) -> tuple[Token, ...]:
    if not isinstance(value, list):
        raise InvalidArgument("[[tokens]] must be an array of tables")
    tokens = []
    for entry in value:
        if not isinstance(entry, dict) or set(entry) != {"name", "sha256"}:
            raise InvalidArgument('each [[tokens]] entry takes name and sha256 (e.g. name = "svc", sha256 = "9f86...")')
        name, digest = entry["name"], entry["sha256"]
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name == ANY_PRINCIPAL:
            raise InvalidArgument(f"bad token name {name!r}: 1-128 of A-Z a-z 0-9 _ . @ -")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise InvalidArgument(f"token {name}: sha256 must be 64 lowercase hex digits (tms-gateway --new-token)")
        tokens.append(Token(name, digest))
    if len({t.name for t in tokens}) != len(tokens) or len({t.sha256 for t in tokens}) != len(tokens):
        raise InvalidArgument("[[tokens]]: names and hashes must be unique")
    return tuple(tokens)


def _rules(value: Any) -> tuple[Rule, ...]:
    if not isinstance(value, list):
        raise InvalidArgument("[[rules]] must be an array of tables")
    rules = []
    for entry in value:
        if not isinstance(entry, dict) or set(entry) != {"principal", "namespace", "topics", "actions"}:
            raise InvalidArgument("each [[rules]] entry takes principal, namespace, topics and actions")
        strings: tuple[Any, Any, Any] = (entry["principal"], entry["namespace"], entry["topics"])
        if not all(isinstance(s, str) and s for s in strings):
            raise InvalidArgument(f"rule {entry}: principal, namespace and topics must be non-empty strings")
        actions = entry["actions"]
        if not isinstance(actions, list) or not actions or not set(actions) <= ACTIONS:
            raise InvalidArgument(f"rule {entry}: actions must be a non-empty list of {', '.join(sorted(ACTIONS))}")
        rules.append(Rule(*strings, tuple(sorted(set(actions)))))
    return tuple(rules)
