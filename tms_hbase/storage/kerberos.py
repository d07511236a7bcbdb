"""Kerberos to the HBase Thrift gateway (HBase's ``hbase.security.authentication=kerberos``): SASL/GSSAPI on the
binary transport (``hbase.thrift.security.qop``) and SPNEGO on the HTTP one, through MIT Kerberos's GSS-API
(the ``gssapi`` package: the ``kerberos`` extra).

The client's identity is a keytab (``keytab`` and ``principal``: its tickets are fetched, and fetched again before
they expire, by the GSS library into a memory cache of the pool's own) or the user's ticket cache (``kinit``;
``KRB5CCNAME``), which the user renews. :class:`SaslChannel` sits between the Thrift transport and the connection's
socket, as :class:`~tms_hbase.storage.http.HttpChannel` does, so every byte of the negotiation and of the calls
goes through that socket's reads and writes: the same deadlines, fail-over and error mapping as without Kerberos.
A failure of Kerberos itself (no ticket, an unknown service principal, a mismatched quality of protection, a
refusal by the gateway) is :class:`KerberosFailure`, reported in one line.
"""

from __future__ import annotations

import base64
import itertools
import struct
from types import ModuleType
from typing import Any

from tms_hbase.config import ThriftTransport
from tms_hbase.errors import InvalidArgument
from tms_hbase.storage.http import Socket

QOP_BITS = {"auth": 1, "auth-int": 2, "auth-conf": 4}
"""The SASL security layers (RFC 4752) by HBase's names for them."""
_START, _OK, _BAD, _ERROR, _COMPLETE = 1, 2, 3, 4, 5  # the Thrift SASL transport's negotiation statuses
_HEADER = struct.Struct(">BI")
_LENGTH = struct.Struct(">I")
_MAX_NEGOTIATION = 1 << 20  # a negotiation message longer than this is not a Kerberos token
_RECEIVE_MAX = 0xFFFFFF  # the largest wrapped message this client takes (the SASL field's limit)
_SPNEGO = "1.3.6.1.5.5.2"
_caches = itertools.count(1)


class KerberosFailure(Exception):
    """Kerberos failed: no ticket, no such service, a refused or mismatched negotiation (not a TmsError: the pool
    wraps it, not retried)."""


def _gssapi() -> ModuleType:
    try:
        import gssapi
    except ImportError:
        raise InvalidArgument(
            "Kerberos to the Thrift gateway needs the gssapi package: pip install 'tms-hbase[kerberos]' "
            "(it builds against MIT Kerberos: Debian's libkrb5-dev)"
        ) from None
    return gssapi


class Kerberos:
    """A pool's Kerberos identity (``transport``'s keytab and principal, else the user's ticket cache) and what it
    makes: the SASL negotiation of a connection (:class:`SaslChannel`) and SPNEGO's header for an HTTP request.
    Made once per pool; InvalidArgument now if the ``gssapi`` package is missing."""

    def __init__(self, transport: ThriftTransport) -> None:
        self.gssapi = _gssapi()
        self.transport = transport
        self.qop = transport.qop
        self.service = transport.kerberos_service or ("HTTP" if transport.http else "hbase")
        self._store = None
        if transport.keytab is not None:
            self._store = {"client_keytab": transport.keytab, "ccache": f"MEMORY:tms-hbase-{next(_caches)}"}

    def credentials(self) -> Any:
        """The client's credentials (fetching a ticket from the keytab if the cache has none valid), or
        KerberosFailure naming what is missing."""
        gssapi = self.gssapi
        name = None
        if self.transport.principal is not None:
            name = gssapi.Name(self.transport.principal, gssapi.NameType.kerberos_principal)
        try:
            if self._store is None:
                return gssapi.Credentials(name=name, usage="initiate")
            return gssapi.Credentials(name=name, usage="initiate", store=self._store)
        except gssapi.exceptions.GSSError as exc:
            where = f"keytab {self.transport.keytab}" if self._store else "ticket cache (kinit, or --thrift-keytab)"
            raise KerberosFailure(f"no valid Kerberos ticket from the {where}: {_gss_reason(exc)}") from None

    def context(self, host: str, *, spnego: bool = False) -> Any:
        """A new GSS security context for the gateway at ``host`` (its principal ``service/host``)."""
        gssapi = self.gssapi
        target = gssapi.Name(f"{self.service}@{host}", gssapi.NameType.hostbased_service)
        flags = gssapi.RequirementFlag
        wanted = [] if spnego else [flags.mutual_authentication, flags.integrity, flags.confidentiality]
        mech = gssapi.OID.from_int_seq(_SPNEGO) if spnego else None
        return gssapi.SecurityContext(name=target, creds=self.credentials(), usage="initiate", flags=wanted, mech=mech)

    def step(self, context: Any, token: bytes | None, host: str) -> bytes:
        """The context's next token for ``token`` from the gateway (None: the first), or KerberosFailure."""
        try:
            return context.step(token) or b""
        except self.gssapi.exceptions.GSSError as exc:
            raise KerberosFailure(
                f"Kerberos to the gateway's principal {self.service}/{host} failed: {_gss_reason(exc)}"
            ) from None

    def negotiate_header(self, host: str) -> bytes:
        """The ``Authorization`` header line (CRLF included) of one HTTP request: a SPNEGO token, new for each
        request (HBase's HTTP gateway authenticates every request)."""
        token = self.step(self.context(host, spnego=True), None, host)
        return b"Authorization: Negotiate " + base64.b64encode(token) + b"\r\n"


class SaslChannel:
    """The Thrift SASL transport (as HBase's ``TSaslServerTransport`` speaks it) under the buffered transport: on
    :meth:`open`, a GSSAPI negotiation with the gateway for the quality of protection ``kerberos.qop`` (the
    gateway's must be the same); then each :meth:`flush` sends what was written as one frame (length, then the
    bytes, signed with ``auth-int``, encrypted with ``auth-conf``), and :meth:`read` returns the frames' bytes.
    ``max_frame`` bounds an answer's frame (more is refused)."""

    def __init__(self, socket: Socket, kerberos: Kerberos, max_frame: int) -> None:
        self.socket = socket
        self.kerberos = kerberos
        self.max_frame = max_frame
        self._context: Any = None
        self._wrap = False
        self._encrypt = False
        self._request = bytearray()
        self._reply = bytearray()

    def is_open(self) -> bool:
        return self.socket.is_open()

    def open(self) -> None:
        self.socket.open()
        self._negotiate()

    def close(self) -> None:
        self._request.clear()
        self._reply.clear()
        self._context = None
        self.socket.close()

    def write(self, buf: bytes) -> None:
        self._request += buf

    def flush(self) -> None:
        if not self._request:
            return
        data = bytes(self._request)
        self._request.clear()
        if self._wrap:
            data = self._protect(self._context, data, encrypt=self._encrypt)
        self.socket.write(_LENGTH.pack(len(data)) + data)

    def read(self, sz: int) -> bytes:
        if not self._reply:
            (size,) = _LENGTH.unpack(self._read_exactly(_LENGTH.size))
            if size > self.max_frame:
                raise KerberosFailure(f"the gateway announced a SASL frame of {size} bytes")
            frame = self._read_exactly(size)
            self._reply += self._protect(self._context, frame) if self._wrap else frame
        data = bytes(self._reply[:sz])
        del self._reply[:sz]
        return data

    def _protect(self, context: Any, data: bytes, *, encrypt: bool | None = None) -> bytes:
        """``data`` wrapped by ``context`` (encrypted if ``encrypt``), or unwrapped (``encrypt`` None); a message
        that fails its check is KerberosFailure."""
        try:
            return (context.unwrap(data) if encrypt is None else context.wrap(data, encrypt)).message
        except self.kerberos.gssapi.exceptions.GSSError as exc:
            raise KerberosFailure(f"a SASL message failed its Kerberos check: {_gss_reason(exc)}") from None

    def _read_exactly(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            data += self.socket.read(size - len(data))
        return bytes(data)

    def _send(self, status: int, payload: bytes) -> None:
        self.socket.write(_HEADER.pack(status, len(payload)) + payload)

    def _receive(self) -> tuple[int, bytes]:
        status, size = _HEADER.unpack(self._read_exactly(_HEADER.size))
        if status not in (_OK, _COMPLETE, _BAD, _ERROR) or size > _MAX_NEGOTIATION:
            raise KerberosFailure(
                "the gateway does not speak SASL: does it serve Kerberos (hbase.thrift.security.qop)?"
            )
        payload = self._read_exactly(size)
        if status in (_BAD, _ERROR):
            said = payload.decode("utf-8", "replace").strip().splitlines()
            raise KerberosFailure(f"the gateway refused the SASL negotiation: {said[0] if said else 'no reason'}")
        return status, payload

    def _negotiate(self) -> None:
        """RFC 4752's GSSAPI exchange in the Thrift SASL transport's messages: the security context, then the
        security layer the gateway offers, answered with :attr:`Kerberos.qop`."""
        kerberos, host = self.kerberos, self.socket.host
        context = kerberos.context(host)
        self._send(_START, b"GSSAPI")
        self._send(_OK, kerberos.step(context, None, host))
        while True:
            status, payload = self._receive()
            if not context.complete:
                token = kerberos.step(context, payload, host)
                if status == _COMPLETE:
                    raise KerberosFailure("the gateway ended the SASL negotiation before the security context")
                self._send(_OK, token)
                continue
            offer = self._protect(context, payload)
            if len(offer) != 4:
                raise KerberosFailure("the gateway's SASL security layer offer is not 4 bytes")
            offered = [name for name, bit in QOP_BITS.items() if offer[0] & bit]
            bit = QOP_BITS[kerberos.qop]
            if not offer[0] & bit:
                raise KerberosFailure(
                    f"the gateway's quality of protection is {', '.join(offered) or 'none'} "
                    f"(hbase.thrift.security.qop), this client's {kerberos.qop} (--thrift-qop): make them the same"
                )
            size = 0 if kerberos.qop == "auth" else _RECEIVE_MAX
            self._send(_COMPLETE, self._protect(context, bytes([bit]) + size.to_bytes(3, "big"), encrypt=False))
            status, _ = self._receive()
            if status != _COMPLETE:
                raise KerberosFailure("the gateway did not complete the SASL negotiation")
            self._context = context
            self._wrap = kerberos.qop != "auth"
            self._encrypt = kerberos.qop == "auth-conf"
            return


def _gss_reason(exc: Any) -> str:
    """What a GSSError says is wrong, on one line: MIT's minor message (e.g. "Server hbase/gw@REALM not found in
    Kerberos database"), else the major one ("Unspecified GSS failure" says nothing)."""
    try:
        said = exc.get_all_statuses(exc.min_code, False) if exc.min_code else []
        said = said or exc.get_all_statuses(exc.maj_code, True)
    except Exception:  # (a message that cannot be looked up: the exception's own text)
        said = [str(exc)]
    return " ".join(" ".join(str(s) for s in said).split())[:300]
