"""TLS to the HBase Thrift gateway (HBase's ``hbase.thrift.ssl.enabled``): the client's SSL context, made
once per pool from a :class:`~tms_hbase.config.ThriftTransport`, and what a failed handshake means."""

from __future__ import annotations

import ssl

from tms_hbase.config import ThriftTransport
from tms_hbase.errors import InvalidArgument


def client_context(transport: ThriftTransport) -> ssl.SSLContext | None:
    """The context every TLS connection of a pool uses (None without TLS): the gateway's certificate is
    verified against ``ca_file`` (else the system's CAs) and must name the host connected to; the client
    certificate is presented if given. A file that cannot be loaded is InvalidArgument, now, rather than
    a failure of every call later."""
    if not transport.tls:
        return None
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=transport.ca_file)
        if transport.cert_file is not None:
            context.load_cert_chain(transport.cert_file, transport.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgument(f"cannot load the Thrift TLS files (CA, certificate, key): {exc}") from None
    return context


def handshake_failure(exc: BaseException) -> str | None:
    """What a failed TLS handshake says to the user (None if ``exc`` is not one): an untrusted or
    mismatched certificate is named as such."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"the gateway's TLS certificate was not accepted ({exc.verify_message}): "
            "give the CA that signed it (--thrift-ca) and connect by a name the certificate holds"
        )
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc}): does the gateway serve TLS (hbase.thrift.ssl.enabled)?"
    return None
