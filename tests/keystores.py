"""A Thrift gateway's TLS keystore for tests and benchmarks: a certificate for 127.0.0.1 and localhost, signed by a
test CA (trustme), in the PKCS #12 file HBase's ``hbase.thrift.ssl.keystore.store`` takes."""

from __future__ import annotations

from pathlib import Path

import trustme
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, load_pem_private_key, pkcs12
from cryptography.x509 import load_pem_x509_certificate

from tms_hbase_launcher.gateway import Keystore


def gateway_keystore(ca: trustme.CA, folder: Path) -> Keystore:
    """The gateway's certificate for 127.0.0.1 and localhost, signed by ``ca``, in a PKCS #12 keystore in
    ``folder``."""
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    key = load_pem_private_key(leaf.private_key_pem.bytes(), None)
    cert, *chain = (load_pem_x509_certificate(blob.bytes()) for blob in leaf.cert_chain_pems)
    password = "keystore-secret"
    path = folder / "gateway.p12"
    path.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"gateway",
            key,
            cert,
            chain or None,
            BestAvailableEncryption(password.encode()),  # type: ignore[arg-type]
        )
    )
    return Keystore(path, password)
