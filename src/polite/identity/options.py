"""Turning signing on from a surface's settings (``--sign-with``, ``sign_with=``,
``POLITE_SIGN_WITH``): the key file and the directory URL checked, errors naming the
setting as that surface spells it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from polite.config import KEYWORDS, Knobs
from polite.errors import ConfigError

if TYPE_CHECKING:
    from polite.identity.signatures import RequestSigner

__all__ = ["require_identity_extra", "signer_from"]


def require_identity_extra(what: str = "signing") -> None:
    """:class:`ConfigError` saying which extra to install when it is not."""
    try:
        import cryptography  # noqa: F401
        import http_message_signatures  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"{what} needs the identity extra: "
                          "pip install 'polite-web[identity]'") from exc


def signer_from(key_file: str | None, agent: str | None, *, knobs: Knobs = KEYWORDS
                ) -> RequestSigner | None:
    """A signer for ``key_file`` (``None`` without one); ``agent``, the key directory's
    URL sent as ``Signature-Agent``, must be an absolute http(s) URL."""
    if not key_file:
        if agent:
            raise ConfigError(f"{knobs.signature_agent.rstrip('=')} needs "
                              f"{knobs.sign_with.rstrip('=')}")
        return None
    require_identity_extra()
    from polite.identity.keys import load_signing_key
    from polite.identity.signatures import RequestSigner as Signer

    if agent:
        parts = urlsplit(agent)
        if parts.scheme not in ("https", "http") or not parts.hostname or '"' in agent \
                or "\\" in agent or not agent.isascii() or any(c <= " " for c in agent):
            raise ConfigError(f"{knobs.signature_agent.rstrip('=')} {agent!r}: not an "
                              "absolute http(s) URL")
    return Signer(load_signing_key(Path(key_file), knobs.sign_with.rstrip("=")), agent or None)
