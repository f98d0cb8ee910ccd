"""The one error tree of polite: everything raised on purpose derives from PoliteError."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "FetchError",
    "InvalidURL",
    "PoliteError",
    "UnknownDialect",
]


class PoliteError(Exception):
    """Base class of every error polite raises on purpose."""


class ConfigError(PoliteError):
    """A setting or command-line option has a value polite cannot use."""


class UnknownDialect(ConfigError):
    """A robots.txt dialect name that polite does not know."""


class InvalidURL(PoliteError):
    """A URL that cannot be checked (no scheme, unsupported scheme, bad host)."""


class FetchError(PoliteError):
    """A network fetch failed in a way the caller must hear about."""
