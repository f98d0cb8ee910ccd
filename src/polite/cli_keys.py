"""``polite keys``: a robot's Ed25519 key for Web Bot Auth, and the key directory document
its operator publishes; the work is :mod:`polite.identity`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from polite.errors import ConfigError

if TYPE_CHECKING:
    from polite.identity.signatures import RequestSigner

__all__ = ["add_keys_command", "directory_of", "signer_from"]


def add_keys_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = commands.add_parser(
        "keys", help="a robot's signing key (Web Bot Auth) and its key directory")
    keys_commands = keys.add_subparsers(title="keys commands", metavar="COMMAND")
    new = keys_commands.add_parser(
        "new", help="make an Ed25519 key, written readable by its owner only",
        description="Write a new Ed25519 private key (PKCS#8 PEM, mode 0600) to FILE, which "
                    "must not exist, and print its keyid (the JWK thumbprint).")
    new.add_argument("file", metavar="FILE")
    new.set_defaults(handler=_new)
    directory = keys_commands.add_parser(
        "directory", help="print the key directory (JWK Set) of one or more keys",
        description="The document to serve at /.well-known/http-message-signatures-directory "
                    "as application/http-message-signatures-directory+json (polite serve "
                    "--key does).")
    directory.add_argument("files", metavar="FILE", nargs="+", help="private key files")
    directory.set_defaults(handler=_directory)


def _identity() -> None:
    try:
        import http_message_signatures  # noqa: F401
    except ImportError as exc:
        raise ConfigError("signing needs the identity extra: "
                          "pip install 'polite[identity]'") from exc


def _new(args: argparse.Namespace, out: TextIO) -> int:
    _identity()
    from polite.core.identity import okp_jwk
    from polite.identity.keys import generate_key, public_bytes

    key = generate_key(Path(args.file))
    out.write(f"{args.file}: keyid {okp_jwk(public_bytes(key))['kid']}\n")
    return 0


def directory_of(files: list[str], option: str) -> bytes:
    """The directory document of the keys in ``files`` (refused as ``option`` says)."""
    _identity()
    from polite.core.identity import directory_document
    from polite.identity.keys import load_signing_key, public_bytes

    return directory_document(public_bytes(load_signing_key(Path(f), option)) for f in files)


def _directory(args: argparse.Namespace, out: TextIO) -> int:
    out.write(directory_of(args.files, "polite keys directory").decode("utf-8"))
    return 0


def signer_from(key_file: str | None, agent: str | None, option: str = "--sign-with",
                agent_option: str = "--signature-agent") -> RequestSigner | None:
    """A :class:`~polite.identity.RequestSigner` for ``key_file`` (None without one);
    ``agent``, the directory's URL, must be an absolute https (or http) URL."""
    if key_file is None:
        if agent is not None:
            raise ConfigError(f"{agent_option} needs {option}")
        return None
    _identity()
    from urllib.parse import urlsplit

    from polite.identity.keys import load_signing_key
    from polite.identity.signatures import RequestSigner as Signer

    if agent is not None:
        parts = urlsplit(agent)
        if parts.scheme not in ("https", "http") or not parts.hostname or '"' in agent \
                or "\\" in agent or not agent.isascii() or any(c <= " " for c in agent):
            raise ConfigError(f"{agent_option} {agent!r}: not an absolute http(s) URL")
    return Signer(load_signing_key(Path(key_file), option), agent)
