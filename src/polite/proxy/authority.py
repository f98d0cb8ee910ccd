"""The local certificate authority that lets ``polite serve --intercept-tls`` read inside
CONNECT tunnels.

It is made once, in a folder private to its user (0700; the key 0600), and kept: clients
trust its certificate (``polite ca export``) once. For each host a tunnel is opened to, a
short-lived certificate naming that host (or IP address) is signed on the fly and kept in
memory; the key of those certificates is made at start and never written anywhere but a
private temporary file in the folder, read back at once and removed (the ``ssl`` module
loads keys from files only).

Needs ``cryptography`` (the ``tls`` extra).
"""

from __future__ import annotations

import collections
import datetime
import fcntl
import ipaddress
import os
import ssl
import tempfile
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from polite.errors import ConfigError

__all__ = ["CA_CERT_FILE", "CA_KEY_FILE", "CertificateAuthority", "server_context"]

CA_CERT_FILE = "ca.pem"
CA_KEY_FILE = "ca.key"
CA_VALIDITY = datetime.timedelta(days=3 * 365)
# A host's certificate lives two days and is made again once half of that has passed.
LEAF_VALIDITY = datetime.timedelta(days=2)
_LEAF_RENEW = LEAF_VALIDITY / 2
# Clocks of clients run a little behind or ahead: certificates start an hour back.
_BACKDATE = datetime.timedelta(hours=1)
_MAX_CONTEXTS = 4096  # per-host contexts kept, the least recently used dropped first


def server_context() -> ssl.SSLContext:
    """A server-side TLS context as the proxy offers it to clients: TLS 1.2 or later,
    HTTP/1.1 by ALPN (the proxy reads HTTP/1.1 only)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    return context


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class CertificateAuthority:
    """The CA in ``folder``; :meth:`open` makes it the first time."""

    def __init__(self, folder: Path, key: ec.EllipticCurvePrivateKey,
                 certificate: x509.Certificate) -> None:
        self.folder = folder
        self._key = key
        self.certificate = certificate
        self._leaf_key = ec.generate_private_key(ec.SECP256R1())
        self._contexts: collections.OrderedDict[str, tuple[ssl.SSLContext, datetime.datetime]]
        self._contexts = collections.OrderedDict()
        self._lock = threading.Lock()

    # -- the folder -------------------------------------------------------------------------

    @classmethod
    def open(cls, folder: Path) -> CertificateAuthority:
        """The CA kept in ``folder``, made there (with the folder) when there is none.
        Refuses a folder or key that others can read."""
        folder = folder.expanduser()
        key_path, cert_path = folder / CA_KEY_FILE, folder / CA_CERT_FILE
        if not folder.exists():
            folder.parent.mkdir(parents=True, exist_ok=True)
            try:
                folder.mkdir(mode=0o700)
            except FileExistsError:
                pass  # another process made it at the same moment
            else:
                os.chmod(folder, 0o700)  # whatever the umask left
        for path in (folder, key_path):
            if path.exists() and path.stat().st_mode & 0o077:
                raise ConfigError(f"{path} is open to other users; the CA's key must be "
                                  f"private: chmod {'700' if path == folder else '600'} {path}")
        if not key_path.exists():
            # Two processes starting at once (polite ca export, polite serve) make one CA.
            descriptor = os.open(folder / ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
            with os.fdopen(descriptor, "wb") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not key_path.exists():
                    cls._create(folder)
        try:
            key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
            certificate = x509.load_pem_x509_certificate(cert_path.read_bytes())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"the CA in {folder} cannot be read ({exc}); move the folder "
                              "away to make a new one") from exc
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ConfigError(f"{key_path} is not the elliptic-curve key polite makes")
        if certificate.not_valid_after_utc <= _now() + LEAF_VALIDITY:
            raise ConfigError(f"the CA certificate in {folder} expires on "
                              f"{certificate.not_valid_after_utc:%Y-%m-%d}; move the folder "
                              "away to make a new one, and have clients trust that one")
        return cls(folder, key, certificate)

    @staticmethod
    def _create(folder: Path) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "polite"),
                          x509.NameAttribute(NameOID.COMMON_NAME, "polite local CA")])
        now = _now()
        public = key.public_key()
        certificate = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(public).serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE).not_valid_after(now + CA_VALIDITY)
            # RFC 5280, 4.2.1.9: a CA that signs end-entity certificates only.
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public),
                           critical=False)
            .sign(key, hashes.SHA256()))
        key_pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        # The certificate first: a folder with a key has a whole CA. Each file is written
        # under a temporary name and renamed, so a kill leaves no half-written file; the
        # key is made 0600 at its creation, never readable by others for a moment.
        _write_private(folder / CA_CERT_FILE,
                       certificate.public_bytes(serialization.Encoding.PEM), 0o644)
        _write_private(folder / CA_KEY_FILE, key_pem, 0o600)

    def certificate_pem(self) -> bytes:
        """The CA's certificate, for clients to trust (never its key)."""
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    # -- certificates for hosts -------------------------------------------------------------

    def context_for(self, host: str) -> ssl.SSLContext:
        """A server-side TLS context presenting a certificate for ``host`` (a name or an IP
        address), made now or taken from those kept."""
        host = host.lower()
        now = _now()
        with self._lock:
            kept = self._contexts.get(host)
            if kept is not None and kept[1] > now:
                self._contexts.move_to_end(host)
                return kept[0]
        context = server_context()
        pem = self._leaf(host, now)
        with tempfile.NamedTemporaryFile(dir=self.folder, prefix=".leaf-", suffix=".pem") \
                as file:  # made 0600 by mkstemp
            file.write(pem)
            file.flush()
            context.load_cert_chain(file.name)
        with self._lock:
            self._contexts[host] = (context, now + _LEAF_RENEW)
            self._contexts.move_to_end(host)
            while len(self._contexts) > _MAX_CONTEXTS:
                self._contexts.popitem(last=False)
        return context

    def chain_pem(self, host: str) -> bytes:
        """A key and certificate chain for ``host``, in PEM, for a server of one's own (a
        test or benchmark origin)."""
        return self._leaf(host.lower(), _now())

    def _leaf(self, host: str, now: datetime.datetime) -> bytes:
        """The key and certificate chain for ``host``, in PEM."""
        try:
            names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(host))]
        except ValueError:
            names = [x509.DNSName(host)]
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]) \
            if len(host) <= 64 else x509.Name([])  # RFC 5280's upper bound on a CN
        public = self._leaf_key.public_key()
        authority = self.certificate.extensions.get_extension_for_class(
            x509.SubjectKeyIdentifier).value
        expires = min(now + LEAF_VALIDITY, self.certificate.not_valid_after_utc)
        certificate = (
            x509.CertificateBuilder().subject_name(subject)
            .issuer_name(self.certificate.subject).public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE).not_valid_after(expires)
            .add_extension(x509.SubjectAlternativeName(names),
                           critical=not subject)  # RFC 5280, 4.2.1.6
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=False, crl_sign=False,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(
                authority), critical=False)
            .sign(self._key, hashes.SHA256()))
        key_pem = self._leaf_key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption())
        return key_pem + certificate.public_bytes(serialization.Encoding.PEM) \
            + self.certificate_pem()


def _write_private(path: Path, data: bytes, mode: int) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)  # whatever the umask took away
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
