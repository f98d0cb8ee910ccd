"""URL pieces as robots.txt matching needs them.

Matching works on *octet strings*: ``str`` values whose code points are all below 256, one
per byte, so that a robots.txt body decoded as Latin-1 and a URL encoded as UTF-8 compare
byte for byte (Google's parser compares bytes, RFC 9309 compares octets).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from polite.errors import InvalidURL

__all__ = [
    "PLAIN_ORIGIN",
    "canonical_escapes",
    "canonical_koster",
    "canonical_rfc9309",
    "from_octets",
    "host_name_problem",
    "normal_url",
    "origin_of",
    "path_params_query",
    "split_origin",
    "to_octets",
]

# Everything before the path: an optional "//", an optional scheme up to the first "://" that
# comes before any of "/?;", and the authority. Google's GetPathParamsQuery in one regex.
_BEFORE_PATH = re.compile(r"(?://)?(?:[^/?;#]*?://)?[^/?;#]*")


_HTTP_PATH = re.compile(r"https?://[^/?;#]*(/[^#]*)")


def path_params_query(url: str) -> str:
    """The path, params and query of ``url``, without the fragment; ``/`` when there is none.

    Behaves as Google's ``GetPathParamsQuery``: without a scheme the text before the first
    ``/`` is still taken as the host, and a result starting with ``?`` or ``;`` gets a ``/``.
    """
    http = _HTTP_PATH.match(url)
    if http is not None:
        return http[1]
    match = _BEFORE_PATH.match(url)
    assert match is not None  # every part of the pattern is optional
    start = match.end()
    if start == len(url) or url[start] == "#":
        return "/"
    end = url.find("#", start)
    path = url[start:] if end < 0 else url[start:end]
    return path if path[0] == "/" else "/" + path


def to_octets(text: str) -> str:
    """``text`` as its UTF-8 octets, one code point per byte (see the module docstring)."""
    if text.isascii():
        return text
    return text.encode("utf-8", "surrogatepass").decode("latin-1")


def from_octets(octets: str) -> str:
    """Octets back to text: UTF-8 where valid, invalid bytes replaced."""
    if octets.isascii():
        return octets
    return octets.encode("latin-1").decode("utf-8", "replace")


_HEX = "0123456789ABCDEF"
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# RFC 3986 unreserved and reserved characters stand for themselves; anything else in an
# octet string is percent-encoded before comparison (RFC 9309, section 2.2.2).
_NOT_CANONICAL = re.compile(r"[^A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]")
_RFC9309_TOKEN = re.compile(r"%([0-9A-Fa-f]{2})|[^A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]|%")


def _rfc9309_token(m: re.Match[str]) -> str:
    hex_pair = m.group(1)
    if hex_pair is not None:
        char = chr(int(hex_pair, 16))
        return char if char in _UNRESERVED else "%" + hex_pair.upper()
    code = ord(m.group(0))
    return "%" + _HEX[code >> 4] + _HEX[code & 15]


# Every "%xx" spelling (either case) to its RFC 9309 form, for the common case where the
# escapes are the only thing to fix.
_ESCAPES = {
    f"{hi}{lo}": (chr(byte) if chr(byte) in _UNRESERVED else f"%{byte:02X}")
    for byte in range(256)
    for hi in {f"{byte >> 4:X}", f"{byte >> 4:x}"}
    for lo in {f"{byte & 15:X}", f"{byte & 15:x}"}
}
_NOT_CANONICAL_BUT_ESCAPES = re.compile(r"[^A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]")


def canonical_rfc9309(octets: str) -> str:
    """The RFC 9309 form of a path or pattern given as octets.

    Percent-encoded unreserved characters are decoded (``%62`` is ``b``), other escapes keep
    their byte with upper-case hex (``%2f`` is ``%2F``, never ``/``), and octets that are
    neither unreserved nor reserved (non-ASCII, space, ``"``, a lone ``%``) are encoded.
    """
    if _NOT_CANONICAL.search(octets) is None:
        return octets
    if _NOT_CANONICAL_BUT_ESCAPES.search(octets) is None:
        return canonical_escapes(octets)
    return _RFC9309_TOKEN.sub(_rfc9309_token, octets)


def canonical_escapes(octets: str) -> str:
    """:func:`canonical_rfc9309` for octets whose only flaw can be their ``%`` escapes."""
    pieces = octets.split("%")
    out = [pieces[0]]
    for piece in pieces[1:]:
        fixed = _ESCAPES.get(piece[:2])
        out.append("%25" + piece if fixed is None else fixed + piece[2:])
    return "".join(out)


_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def _koster_token(m: re.Match[str]) -> str:
    value = int(m.group(1), 16)
    return "%2F" if value == 0x2F else chr(value)


def canonical_koster(octets: str) -> str:
    """The 1996 draft's form: ``%XX`` decoded to its byte, except ``%2F`` (seed 002, Table 9-3)."""
    if "%" not in octets:
        return octets
    return _ESCAPE.sub(_koster_token, octets)


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of an http(s) URL, lower-cased; :class:`InvalidURL` else."""
    return split_origin(url)[0]


# The common shape of an origin, lower-case scheme and host (groups: scheme, host, port),
# read without urlsplit; anything else takes the general path. The proxy reads its usual
# request target with it too.
PLAIN_ORIGIN = r"(https?)://([a-z0-9.-]+)(?::([0-9]{1,5}))?"
_PLAIN = re.compile(PLAIN_ORIGIN + r"(?=[/?#]|\Z)")


def split_origin(url: str) -> tuple[str, str]:
    """``(origin, host)`` of an http(s) URL, as :func:`origin_of` and ``urlsplit``'s
    ``hostname`` give them; :class:`InvalidURL` else."""
    m = _PLAIN.match(url)
    if m is not None:  # no "@" in what it matched: no user name, nothing to strip
        port = m[3]
        if port is None:
            return m[0], m[2]  # the match is the origin as written
        number = int(port)
        if number <= 65535:
            if number == (80 if m[1] == "http" else 443):
                return f"{m[1]}://{m[2]}", m[2]
            if port[0] != "0":
                return m[0], m[2]
            return f"{m[1]}://{m[2]}:{number}", m[2]
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(f"not a URL: {url!r} ({exc})") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise InvalidURL(f"unsupported scheme in {url!r}: only http and https")
    host = (parts.hostname or "").lower()
    if not host:
        raise InvalidURL(f"no host in {url!r}")
    default = 80 if scheme == "http" else 443
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != default:
        netloc += f":{port}"
    return f"{scheme}://{netloc}", host


_LABEL = re.compile(r"[a-z0-9_-]{1,63}\Z")
_PLAIN_HOST = re.compile(r"(?:[a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}\.?\Z")


def host_name_problem(host: str) -> str | None:
    """What keeps ``host`` (lower-case, as :func:`split_origin` gives it) from being a host
    a request can go to: an IP address, or DNS labels of 1 to 63 letters, digits, hyphens
    or underscores (an international label counts in its ASCII form) making at most 253
    characters; None when it can be one."""
    if len(host) <= 253 and _PLAIN_HOST.match(host) is not None:
        return None  # the common case (an IPv4 address is of this shape too), at once
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    if not name or len(name) > 253:
        return f"host {host[:80]!r} is not 1 to 253 characters long"
    for label in name.split("."):
        if not label.isascii():
            try:
                label = label.encode("idna").decode("ascii")
            except UnicodeError:
                return f"host {host[:80]!r}: label {label[:80]!r} is not a DNS label"
        if _LABEL.match(label) is None:
            if len(label) > 63:
                return f"host {host[:80]!r}: a label over 63 characters"
            return (f"host {host[:80]!r}: label {label[:80]!r} is not 1 to 63 letters, "
                    "digits, hyphens or underscores")
    return None


def normal_url(url: str) -> str:
    """The form two spellings of one http(s) URL share: scheme and host lower-cased, the
    default port and the fragment dropped (the key of a sitemap read or a page cached);
    :class:`InvalidURL` else."""
    origin = split_origin(url)[0]
    parts = urlsplit(url)
    return origin + (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
