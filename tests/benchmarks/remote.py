"""The load benchmark's TLS: a CA made for the run (trustme) and a certificate it signs, which
every daemon trusts through SSL_CERT_FILE (Go's crypto/x509 and httpx both read it)."""

from __future__ import annotations

from pathlib import Path

import trustme


def make_certificate(where: Path, hosts: list[str]) -> tuple[Path, Path, Path]:
    """A CA of its own and a server certificate for `hosts` under `where`: the CA bundle
    (what SSL_CERT_FILE names for every daemon), the certificate and its key."""
    ca = trustme.CA()
    server = ca.issue_cert(*hosts)
    bundle, cert, key = where / "ca.pem", where / "server.pem", where / "server.key"
    ca.cert_pem.write_to_path(str(bundle))
    server.private_key_pem.write_to_path(str(key))
    server.cert_chain_pems[0].write_to_path(str(cert))
    for extra in server.cert_chain_pems[1:]:
        extra.write_to_path(str(cert), append=True)
    return bundle, cert, key
