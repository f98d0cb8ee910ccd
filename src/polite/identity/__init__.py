"""Web Bot Auth: robots' keys, signed requests, and their verification at a site.

The cryptography and RFC 9421 canonicalisation come from ``cryptography`` and
``http-message-signatures`` (the ``identity`` extra); the pure checks are in
:mod:`polite.core.identity`.
"""

from __future__ import annotations

from polite.identity.keys import generate_key, load_signing_key, public_bytes
from polite.identity.signatures import RequestSigner, verify_signature

__all__ = ["RequestSigner", "generate_key", "load_signing_key", "public_bytes",
           "verify_signature"]
