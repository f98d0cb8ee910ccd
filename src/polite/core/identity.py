"""Web Bot Auth, the pure part: key identifiers, the key directory document, and the checks
on a signature's parameters that do not need cryptography.

The protocol (draft-ietf-webbotauth-httpsig-protocol, which took over draft-meunier-web-
bot-auth-architecture-05 and draft-meunier-http-message-signatures-directory; RFC 9421): a
robot signs each request with an Ed25519 key over ``@authority`` (or ``@target-uri``) and,
when it sends one, the ``Signature-Agent`` field naming where its key directory is; the
signature's parameters carry ``created``, ``expires``, ``keyid`` (the key's RFC 7638 JWK
thumbprint) and ``tag="web-bot-auth"``. The directory is a JWK Set served at
:data:`DIRECTORY_PATH` as :data:`DIRECTORY_MEDIA_TYPE`.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from polite.core._documents import read_json
from polite.errors import MalformedDocument

__all__ = [
    "CLOCK_SKEW_S",
    "DIRECTORY_MEDIA_TYPE",
    "DIRECTORY_PATH",
    "MAX_NONCE_CHARS",
    "MAX_VALIDITY_S",
    "SIGNATURE_TAG",
    "SIGNATURE_WINDOW_S",
    "DirectoryError",
    "SignatureCheck",
    "SignatureOutcome",
    "accept_signature_hint",
    "b64url",
    "b64url_decode",
    "directory_document",
    "directory_keys",
    "jwk_thumbprint",
    "okp_jwk",
    "parse_price",
    "window_problem",
]

SIGNATURE_TAG = "web-bot-auth"
DIRECTORY_PATH = "/.well-known/http-message-signatures-directory"
DIRECTORY_MEDIA_TYPE = "application/http-message-signatures-directory+json"
# The drafts (draft-meunier-web-bot-auth-architecture-05, 4.2, and the working group's
# draft-ietf-webbotauth-httpsig-protocol) recommend that expires be no more than 24 hours
# after created: the most a verifier here can be set to take.
MAX_VALIDITY_S = 24 * 3600
# What a site takes by default: five minutes. A signed request can be replayed to the site
# it was made for until it expires, and every nonce must be remembered that long; signers
# use a minute (polite's own) to an hour (some of Cloudflare's examples).
SIGNATURE_WINDOW_S = 300
# The protocol's nonce is 64 random bytes, 88 characters of base64; a longer one is not
# remembered (nor taken).
MAX_NONCE_CHARS = 256
# How far past the verifier's clock ``created`` may be: signers write whole seconds.
CLOCK_SKEW_S = 1.0


class DirectoryError(ValueError):
    """A key directory document that cannot be used."""


class SignatureOutcome(enum.StrEnum):
    """What a request's Web Bot Auth signature turned out to be."""

    VERIFIED = "verified"  # a key from the named directory signed it, in its time window
    INVALID = "invalid"  # a signature is there but does not hold (tampered, expired, ...)
    UNVERIFIABLE = "unverifiable"  # the directory could not be had
    ABSENT = "absent"  # no web-bot-auth signature on the request


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    """A signature's outcome, why, and (when there was one) the directory it named."""

    outcome: SignatureOutcome
    how: str
    agent: str | None = None
    keyid: str | None = None
    nonce: str | None = None  # a verified signature's, for a verifier that refuses replays
    expires: int | None = None


def b64url(data: bytes) -> str:
    """Base64url without padding (RFC 7515, 2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """The bytes of unpadded base64url ``text``; ValueError when it is not that."""
    if not isinstance(text, str) or any(c in text for c in "=+/ \t\r\n"):
        raise ValueError("not unpadded base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# RFC 7638, 3.2: the required members of each key type, in lexicographic order.
_REQUIRED = {"OKP": ("crv", "kty", "x"), "EC": ("crv", "kty", "x", "y"),
             "RSA": ("e", "kty", "n")}


def jwk_thumbprint(jwk: Mapping[str, object]) -> str:
    """The RFC 7638 SHA-256 thumbprint of ``jwk``, base64url: the key's ``keyid``."""
    kty = jwk.get("kty")
    members = _REQUIRED.get(kty) if isinstance(kty, str) else None
    if members is None:
        raise DirectoryError(f"unsupported key type {kty!r}")
    picked: dict[str, str] = {}
    for name in members:
        value = jwk.get(name)
        if not isinstance(value, str):
            raise DirectoryError(f"key lacks its {name!r} member")
        picked[name] = value
    canonical = json.dumps(picked, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return b64url(hashlib.sha256(canonical.encode("utf-8")).digest())


def okp_jwk(public_key: bytes) -> dict[str, str]:
    """The public JWK of a raw 32-byte Ed25519 key, with its thumbprint as ``kid``."""
    if len(public_key) != 32:
        raise DirectoryError("an Ed25519 public key is 32 bytes")
    jwk = {"kty": "OKP", "crv": "Ed25519", "x": b64url(public_key)}
    return {**jwk, "kid": jwk_thumbprint(jwk)}


def directory_document(public_keys: Iterable[bytes]) -> bytes:
    """The JWK Set a robot operator serves at :data:`DIRECTORY_PATH`."""
    keys = [okp_jwk(key) for key in public_keys]
    return (json.dumps({"keys": keys}, indent=2) + "\n").encode("utf-8")


def directory_keys(body: bytes) -> dict[str, bytes]:
    """The Ed25519 keys of a directory document, by thumbprint. Keys of other types are
    passed over (the document may list RSA keys too); a document that is not a JWK Set
    is refused."""
    try:
        document = read_json(body)
    except MalformedDocument as e:
        raise DirectoryError(str(e)) from None
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise DirectoryError('not a JWK Set (no "keys" list)')
    found: dict[str, bytes] = {}
    for jwk in keys:
        if not isinstance(jwk, dict) or jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            continue
        try:
            raw = b64url_decode(str(jwk.get("x", "")))
            thumbprint = jwk_thumbprint(jwk)
        except (ValueError, DirectoryError):
            continue
        if len(raw) == 32:
            found[thumbprint] = raw
    return found


def window_problem(created: object, expires: object, now: float, *,
                   skew_s: float = 5.0, max_validity_s: int = MAX_VALIDITY_S) -> str | None:
    """Why a signature's ``created``/``expires`` do not hold at ``now`` (Unix seconds), or
    ``None`` when they do. Both are required by the draft."""
    if type(created) is not int or type(expires) is not int:
        return "created and expires are both required, as integers"
    if created > now + skew_s:
        return f"created {created} is in the future"
    if expires < now - skew_s:
        return f"expired at {expires}"
    if expires <= created:
        return "expires is not after created"
    if expires - created > max_validity_s:
        return f"valid for {expires - created} s, more than {max_validity_s} s"
    return None


def accept_signature_hint(label: str = "sig1") -> str:
    """The ``Accept-Signature`` value (RFC 9421, 5.1) a site sends with a refusal to tell
    a robot what signature it wants."""
    return f'{label}=("@authority" "signature-agent");tag="{SIGNATURE_TAG}";alg="ed25519"'


_PRICE = re.compile(r"\s*([A-Za-z]{3})\s+(\d{1,12}(?:\.\d{1,12})?)\s*")


def parse_price(value: str | None) -> tuple[str, Decimal] | None:
    """A pay-per-crawl price as Cloudflare's ``crawler-price`` and ``crawler-charged``
    write it (``USD 0.01``): its currency and amount, or ``None`` when it is not one."""
    found = _PRICE.fullmatch(value or "")
    if found is None:
        return None
    try:
        return found.group(1).upper(), Decimal(found.group(2))
    except InvalidOperation:
        return None
