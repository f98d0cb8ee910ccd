"""Who may use a local web service from a browser: the ``Host`` a request names and the
origin it comes from, read from its header fields (no I/O).

A service on loopback is reachable from every page the machine's browser opens. Two things
keep those pages out: the ``Host`` allow-list (DNS rebinding points a name of the attacker's
at 127.0.0.1, and the browser then takes the service for the attacker's own origin; an IP
address written as the host cannot be rebound), and, for anything that changes state, the
browser's own word on where a request comes from (``Origin``, ``Sec-Fetch-Site``), since a
form or an ``<img>`` on any page can send a request without being able to read its answer.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Collection, Mapping
from urllib.parse import urlsplit

__all__ = ["LOOPBACK_NAMES", "SESSION_S", "allowed_host_names", "cross_origin",
           "host_refused", "session_valid", "session_value", "token_matches"]

# Names that mean this machine whatever DNS says: "localhost" and, as browsers resolve them
# themselves (RFC 6761), the names under it.
LOOPBACK_NAMES = frozenset({"localhost"})


def _name(host_header: str) -> str | None:
    """The host of a ``Host`` field (``name``, ``name:port``, ``[v6]:port``), lower-case and
    without a final dot; None when it is not that shape."""
    try:
        name = urlsplit(f"//{host_header.strip()}").hostname
    except ValueError:
        return None
    return name.rstrip(".") if name else None


def allowed_host_names(names: Collection[str]) -> frozenset[str]:
    """``names`` as :func:`host_refused` compares them (lower-case, no final dot)."""
    return frozenset(name.strip().lower().rstrip(".") for name in names if name.strip())


def host_refused(host_header: str | None, allowed: frozenset[str]) -> str | None:
    """Why a request naming ``host_header`` is not one for this service, or None: an IP
    address, a loopback name or one of ``allowed`` (from :func:`allowed_host_names`) is. A
    request with no ``Host`` (HTTP/1.0) comes from no browser and passes."""
    if host_header is None:
        return None
    name = _name(host_header)
    if name is None:
        return f"Host {host_header[:100]!r} is not a host name"
    try:
        ipaddress.ip_address(name)
        return None
    except ValueError:
        pass
    if name in LOOPBACK_NAMES or name.endswith(".localhost") or name in allowed:
        return None
    return (f"Host {name[:100]!r} is not a name this server answers to (a web page may have "
            "pointed it here); the server's operator can add it with --allowed-host")


def cross_origin(headers: Mapping[str, str]) -> str | None:
    """Why a request came from a page of another origin, by what its browser says, or
    None. Clients other than browsers send neither field and pass."""
    site = headers.get("sec-fetch-site")
    if site is not None and site.strip().lower() not in ("same-origin", "none"):
        return f"a request from another site's page ({site.strip()[:40]}) may not change " \
            "anything here"
    origin = headers.get("origin")
    if origin is not None:
        try:
            netloc = urlsplit(origin.strip()).netloc.lower()
        except ValueError:
            netloc = ""
        host = (headers.get("host") or "").strip().lower()
        if not netloc or netloc != host:
            return f"a request from the page of {origin.strip()[:100]!r} may not change " \
                "anything here"
    return None


def token_matches(given: str | bytes, token: str) -> bool:
    """Whether ``given`` is ``token``, compared in constant time as UTF-8 bytes (compared as
    text, anything not ASCII raised a TypeError: a 500 for a token no one has)."""
    if isinstance(given, str):
        given = given.encode("utf-8", "surrogatepass")
    return hmac.compare_digest(given, token.encode("utf-8", "surrogatepass"))


# How long a page's session lasts once its token was given (a working day); the browser is
# told to forget it then too.
SESSION_S = 8 * 3600
_MAX_SESSION_CHARS = 100


def _session_mac(key: bytes, expires_at: int) -> str:
    return hmac.new(key, b"session:%d" % expires_at, hashlib.sha256).hexdigest()


def session_value(key: bytes, now: float) -> str:
    """A session cookie's value, ``expires.mac``: proof the token was given, which is not
    the token and ends :data:`SESSION_S` after ``now``. ``key`` is the server's own secret
    (random per process: a restart ends every session)."""
    expires_at = int(now) + SESSION_S
    return f"{expires_at}.{_session_mac(key, expires_at)}"


def session_valid(value: str, key: bytes, now: float) -> bool:
    """Whether ``value`` is a session :func:`session_value` made with ``key`` that has not
    ended at ``now``."""
    if len(value) > _MAX_SESSION_CHARS:
        return False
    expires, _, mac = value.partition(".")
    if not expires.isascii() or not expires.isdigit() or len(expires) > 12:
        return False
    expires_at = int(expires)
    return token_matches(mac, _session_mac(key, expires_at)) and now < expires_at
