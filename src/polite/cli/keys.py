"""``polite keys``: a robot's Ed25519 key for Web Bot Auth, and the key directory document
its operator publishes; the work is :mod:`polite.identity`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from polite.cli.common import add_command
from polite.config import KEYS_DIRECTORY, KEYS_NEW

__all__ = ["add_keys_command", "directory_of"]


def add_keys_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Not add_group: a plain argparse parser may take these commands too.
    keys = commands.add_parser(
        "keys", help="a robot's signing key (Web Bot Auth) and its key directory")
    keys_commands = keys.add_subparsers(title="keys commands", metavar="COMMAND")
    add_command(
        keys_commands, KEYS_NEW, _new,
        help="make an Ed25519 key, written readable by its owner only",
        description="Write a new Ed25519 private key (PKCS#8 PEM, mode 0600) to FILE, which "
                    "must not exist, and print its keyid (the JWK thumbprint).")
    add_command(
        keys_commands, KEYS_DIRECTORY, _directory,
        help="print the key directory (JWK Set) of one or more keys",
        description="The document to serve at /.well-known/http-message-signatures-directory "
                    "as application/http-message-signatures-directory+json (polite serve "
                    "--key does).")


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


def _directory(args: argparse.Namespace, out: TextIO) -> int:
    out.write(directory_of(args.files, "polite keys directory").decode("utf-8"))
    return 0
