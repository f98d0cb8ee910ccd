"""``polite serve`` and ``polite ca``: the options; the wiring is :mod:`polite.serve`."""

from __future__ import annotations

import argparse
from typing import TextIO

from polite.cli.common import EXIT_OK, add_command, add_group
from polite.config import CA_EXPORT, SERVE

__all__ = ["add_serve_commands"]


def add_serve_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_command(
        commands, SERVE, _serve,
        help="run the politeness service: the polite HTTP proxy and the REST API "
             "on one port",
        description="Listens on loopback by default. Robots.txt of private and loopback "
                    "addresses is not fetched unless --allow-private is given.")
    _, ca_commands = add_group(commands, "ca", help="the local CA of polite serve --intercept-tls")
    add_command(
        ca_commands, CA_EXPORT, _ca_export,
        help="print the CA's certificate (PEM) for clients to trust; the CA is made if there "
             "is none")


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    # Imported here: the service's dependencies are not needed for the robots commands.
    from polite.serve import run_server, settings_from

    return run_server(settings_from(args), out)


def _ca_export(args: argparse.Namespace, out: TextIO) -> int:
    from polite.serve import open_authority

    out.write(open_authority(args.ca_dir).certificate_pem().decode("ascii"))
    return EXIT_OK
