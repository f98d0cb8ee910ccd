"""The local CA of ``--intercept-tls``: its certificates, checked as strict clients check
them, through real TLS handshakes in memory."""

from __future__ import annotations

import argparse
import datetime
import ssl
from pathlib import Path

import pytest

pytest.importorskip("cryptography", reason="the tls extra is not installed")

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from polite.errors import ConfigError
from polite.proxy.authority import LEAF_VALIDITY, CertificateAuthority
from polite.serve import settings_from


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str) -> bytes:
    """A TLS handshake between the two contexts over memory; the certificate the client
    got (DER). Raises what the client raises."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    server_side = server.wrap_bio(to_server, to_client, server_side=True)
    inbound, outbound = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(inbound, outbound, server_hostname=hostname)
    for _ in range(10):
        try:
            client_side.do_handshake()
            return client_side.getpeercert(True) or b""
        except ssl.SSLWantReadError:
            pass
        to_server.write(outbound.read())
        try:
            server_side.do_handshake()
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError:
            pass  # the client's alert: it raises on its side next
        inbound.write(to_client.read())
    raise AssertionError("the handshake did not finish")


def strict_client(authority: CertificateAuthority, folder: Path) -> ssl.SSLContext:
    ca = folder / "trusted.pem"
    ca.write_bytes(authority.certificate_pem())
    context = ssl.create_default_context(cafile=ca)
    context.verify_flags |= ssl.VERIFY_X509_STRICT  # as Python 3.13's default contexts do
    return context


@pytest.mark.parametrize("host", ["example.com", "127.0.25.9", "::1",
                                  "a" * 63 + "." + "b" * 10 + ".example"])
def test_a_hosts_certificate_verifies_for_that_host_only(tmp_path: Path, host: str) -> None:
    authority = CertificateAuthority.open(tmp_path / "ca")
    client = strict_client(authority, tmp_path)
    context = authority.context_for(host)
    assert authority.context_for(host.upper()) is context  # kept, by the host's name
    leaf = x509.load_der_x509_certificate(handshake(context, client, host))
    leaf.verify_directly_issued_by(authority.certificate)
    assert leaf.not_valid_after_utc - datetime.datetime.now(datetime.UTC) <= LEAF_VALIDITY
    usage = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(context, client, "other.example")


def test_the_ca_is_made_once_and_kept(tmp_path: Path) -> None:
    first = CertificateAuthority.open(tmp_path / "ca")
    again = CertificateAuthority.open(tmp_path / "ca")
    assert again.certificate_pem() == first.certificate_pem()
    # A certificate made by one process verifies against the CA another one loaded.
    handshake(first.context_for("example.com"), strict_client(again, tmp_path), "example.com")


def test_a_damaged_ca_is_reported(tmp_path: Path) -> None:
    CertificateAuthority.open(tmp_path / "ca")
    (tmp_path / "ca" / "ca.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match="cannot be read"):
        CertificateAuthority.open(tmp_path / "ca")


def test_the_tls_options_come_from_the_config_file_too(tmp_path: Path) -> None:
    config = tmp_path / "polite.toml"
    config.write_text('intercept_tls = true\nca_dir = "ca"\nno_intercept = ["pinned.example"]\n')
    settings = settings_from(argparse.Namespace(config=str(config)))
    assert (settings.intercept_tls, settings.ca_dir, settings.no_intercept) \
        == (True, "ca", ["pinned.example"])
    config.write_text("no_intercept = [443]\n")
    with pytest.raises(ConfigError, match=r"no_intercept \[443\]: must be a list of text"):
        settings_from(argparse.Namespace(config=str(config)))
