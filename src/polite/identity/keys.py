"""Ed25519 key files: written owner-only, and refused when anyone else may read them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from polite.errors import ConfigError

__all__ = ["generate_key", "load_signing_key", "public_bytes"]

MAX_KEY_FILE_BYTES = 64 * 1024  # a PEM key is a few hundred bytes


def public_bytes(key: Ed25519PrivateKey) -> bytes:
    """The raw 32 bytes of ``key``'s public half."""
    return key.public_key().public_bytes(serialization.Encoding.Raw,
                                         serialization.PublicFormat.Raw)


def generate_key(path: Path) -> Ed25519PrivateKey:
    """A new Ed25519 key, written to ``path`` as PKCS#8 PEM with mode 0600; an existing
    file is never overwritten (a robot's key is its identity)."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    try:
        # O_EXCL: refuse to follow or replace whatever is there; the mode is set at creation
        # so the key is never readable by others, not even for an instant.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ConfigError(f"{path}: already exists; a key is not overwritten") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be created: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    return key


def load_signing_key(path: Path, option: str = "--sign-with") -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path`` (PKCS#8 PEM); :class:`ConfigError` naming
    ``option`` when the file is missing, readable by its group or others, or no such key."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise ConfigError(f"{option} {str(path)!r}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(file.fileno()).st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(f"{option} {str(path)!r}: readable by others (mode "
                              f"{stat.S_IMODE(mode):04o}); chmod 600 it")
        data = file.read(MAX_KEY_FILE_BYTES + 1)
    if len(data) > MAX_KEY_FILE_BYTES:
        raise ConfigError(f"{option} {str(path)!r}: too large to be a key file")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{option} {str(path)!r}: not an unencrypted PEM private key "
                          f"({exc})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"{option} {str(path)!r}: not an Ed25519 key")
    return key
