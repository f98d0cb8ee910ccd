"""The ``polite`` command line: parsing, wiring and printing; the work is done by the
product packages. One module per command group; :mod:`polite.cli.common` holds what they
share."""

from __future__ import annotations

from polite.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
