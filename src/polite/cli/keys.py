"""``polite keys``: a robot's Ed25519 key for Web Bot Auth, and the key directory document
its operator publishes; the work is :mod:`polite.identity`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from polite.config import FLAGS

if TYPE_CHECKING:
    from starlette.routing import Route

    from polite.identity.signatures import RequestSigner

__all__ = ["add_keys_command", "directory_of", "directory_served", "signer_from"]


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
    from polite.identity.options import require_identity_extra

    require_identity_extra("polite keys")


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


def directory_served(key_file: str) -> Route:
    """The route ``polite serve --key`` serves: the key's directory, each answer signed
    with the key for the authority it was asked at."""
    _identity()
    from polite.api.directory import directory_route
    from polite.core.identity import directory_document
    from polite.identity.keys import load_signing_key, public_bytes
    from polite.identity.signatures import RequestSigner as Signer
    from polite.identity.signatures import sign_directory

    signer = Signer(load_signing_key(Path(key_file), "--key"))
    document = directory_document([public_bytes(signer.key)])
    return directory_route(document, lambda url: sign_directory([signer], url, document))


def _directory(args: argparse.Namespace, out: TextIO) -> int:
    out.write(directory_of(args.files, "polite keys directory").decode("utf-8"))
    return 0


def signer_from(key_file: str | None, agent: str | None) -> RequestSigner | None:
    """The signer ``--sign-with`` and ``--signature-agent`` ask for (None without them)."""
    from polite.identity.options import signer_from as from_settings

    return from_settings(key_file, agent, knobs=FLAGS)
