"""What a crawler should do with a site and a page, as values.

Seed 000 (REGP, section 4.2) asks a crawler to take the site's guidance: a sitemap entry's
``<type>`` says whether a page's links lead anywhere (``list``) or not (``data``), its
``<srcloc>`` names the original page a crawler-friendly snapshot stands for, and the fields
of robots.txt shape every request (Cookie, Encoding, Charset, Language) and the revisit
times (Index-page, Change-*). The robots META tags and ``X-Robots-Tag`` of a page have the
last word on what is kept and followed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Literal
from urllib.parse import quote, urljoin, urlsplit

from polite.core.robots.matcher import wildcard_regex
from polite.core.robots.meta import RobotsDirectives
from polite.core.robots.model import AgentRules
from polite.core.urls import split_origin
from polite.errors import InvalidURL

__all__ = [
    "CHANGE_INTERVALS_S",
    "MAX_URL_CHARS",
    "PagePlan",
    "Scope",
    "accept_headers",
    "in_scope",
    "language_refusal",
    "link_key",
    "next_visit_s",
    "page_plan",
    "resolve_link",
    "resolve_links",
    "scope_test",
]

Scope = Literal["host", "site", "any"]

# Longer URLs are almost always traps (session ids appended, calendars); 2,000 characters is
# the length browsers and sitemaps.org ("less than 2,048 characters") keep to.
MAX_URL_CHARS = 2048

# sitemaps.org's changefreq values and REGP's Change-* fields, as revisit intervals. "always"
# cannot mean "continuously" for a polite crawler: ten minutes.
CHANGE_INTERVALS_S: dict[str, float | None] = {
    "always": 600.0,
    "hourly": 3_600.0,
    "daily": 86_400.0,
    "weekly": 7 * 86_400.0,
    "monthly": 30 * 86_400.0,
    "yearly": 365 * 86_400.0,
    "never": None,
}
# REGP 3.2.14: Index-page names pages that "often update their contents".
INDEX_PAGE_INTERVAL_S = 3_600.0
# With no guidance at all: a tenth of the time since the page last changed (the heuristic
# HTTP caches use, RFC 9111 4.2.2), between an hour and thirty days; a week without lastmod.
DEFAULT_REVISIT_S = 7 * 86_400.0
MIN_HEURISTIC_S = 3_600.0
MAX_HEURISTIC_S = 30 * 86_400.0

# Characters kept as they are in a path or query; everything else is percent-encoded.
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
_SPACE = re.compile(r"[\t\n\r]")
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


# Links already in normal form, which most are: a path (and query) of characters kept as
# they are, no dot segment, no escape; relative to the root, or absolute with a plain host.
_PLAIN_TAIL = r"[A-Za-z0-9_~!$&'()*+,=:@./-]*(?:\?[A-Za-z0-9_~!$&'()*+,=:@./?-]+)?"
_PLAIN_ROOTED = re.compile(r"/(?!/)" + _PLAIN_TAIL + r"\Z")
_PLAIN_ABSOLUTE = re.compile(r"(https?://[a-z0-9.-]+(?::[0-9]{1,5})?)(/" + _PLAIN_TAIL
                             + r")?\Z")


def resolve_link(base: str, href: str) -> str:
    """``href`` resolved against ``base``, in the crawler's normal form: http(s) only,
    scheme and host lower-cased, default port and fragment dropped, spaces and non-ASCII
    percent-encoded (as UTF-8), an empty path as ``/``. :class:`InvalidURL` for anything
    that is not such a URL or is longer than :data:`MAX_URL_CHARS`."""
    if "/." not in href and len(href) < MAX_URL_CHARS // 2:
        if _PLAIN_ROOTED.match(href):
            return split_origin(base)[0] + href
        plain = _PLAIN_ABSOLUTE.match(href)
        if plain is not None:
            return split_origin(plain[1])[0] + (plain[2] or "/")
    href = _SPACE.sub("", href).strip()
    if not href:
        raise InvalidURL("an empty link")
    try:
        joined = urljoin(base, href)
        parts = urlsplit(joined)
    except ValueError as exc:
        raise InvalidURL(f"not a URL: {href!r} ({exc})") from exc
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidURL(f"not an http(s) link: {href[:80]!r}")
    host = parts.hostname or ""
    if host and not host.isascii():
        try:
            ascii_host = host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise InvalidURL(f"a host name that cannot be encoded: {host!r}") from exc
        joined = joined.replace(host, ascii_host, 1)
    origin = split_origin(joined)[0]
    parts = urlsplit(joined)
    # A "%" that starts no escape is a literal percent sign: written %25 (RFC 3986, 2.4).
    path = _STRAY_PERCENT.sub("%25", quote(parts.path, safe=_PATH_SAFE)) or "/"
    url = origin + path
    if parts.query:
        url += "?" + _STRAY_PERCENT.sub("%25", quote(parts.query, safe=_QUERY_SAFE))
    if len(url) > MAX_URL_CHARS:
        raise InvalidURL(f"longer than {MAX_URL_CHARS} characters")
    return url


def resolve_links(base: str, hrefs: Iterable[str]) -> list[str]:
    """The ``hrefs`` that :func:`resolve_link` resolves against ``base``, resolved, each
    once, in their order; the others left out. The base's origin is worked out once for the
    page's links relative to its root, which most are."""
    urls: dict[str, None] = {}
    origin: str | None = None
    for href in hrefs:
        if "/." not in href and len(href) < MAX_URL_CHARS // 2 and _PLAIN_ROOTED.match(href):
            if origin is None:
                try:
                    origin = split_origin(base)[0]
                except InvalidURL:
                    origin = ""  # no origin: each link is refused by resolve_link below
            if origin:
                urls[origin + href] = None
                continue
        try:
            urls[resolve_link(base, href)] = None
        except InvalidURL:
            continue
    return list(urls)


def link_key(url: str) -> str:
    """The key two spellings of one URL share in the frontier's seen set."""
    return resolve_link(url, url)


def _site_key(host: str) -> str:
    return host[4:] if host.startswith("www.") else host


def in_scope(scope: Scope, seed_hosts: frozenset[str], host: str) -> bool:
    """Whether ``host`` may be crawled: a seed's own host (``host``), also the same name
    with or without ``www.`` (``site``), or any host (``any``)."""
    return scope_test(scope, seed_hosts)(host)


def scope_test(scope: Scope, seed_hosts: Iterable[str]) -> Callable[[str], bool]:
    """:func:`in_scope` for one scope and one set of seed hosts, the seeds' site names
    worked out once: a crawl asks it of every link of every page."""
    if scope == "any":
        return lambda host: True
    hosts = frozenset(seed_hosts)
    if scope != "site":
        return hosts.__contains__
    sites = frozenset(_site_key(seed) for seed in hosts)
    return lambda host: host in hosts or _site_key(host) in sites


@dataclass(frozen=True, slots=True)
class PagePlan:
    """What to do with a fetched page: keep it (``noindex`` says no) and follow its links
    (``nofollow`` and REGP's ``<type>data</type>`` say no); ``why`` names the reason for a
    no."""

    keep: bool
    follow: bool
    why: str = ""


def page_plan(directives: RobotsDirectives, page_type: str | None) -> PagePlan:
    """Seed 000: ``data`` pages are fetched but their links not followed; ``list`` pages have
    all their links followed. The page's own META / X-Robots-Tag restrictions come first."""
    reasons = []
    follow = True
    if directives.nofollow:
        follow = False
        reasons.append("nofollow")
    elif page_type == "data":
        follow = False
        reasons.append("sitemap type data")
    keep = not directives.noindex
    if not keep:
        reasons.append("noindex")
    return PagePlan(keep, follow, ", ".join(reasons))


def _primary(tag: str) -> str:
    return tag.strip().lower().split("-", 1)[0].split("_", 1)[0]


def language_refusal(site: Sequence[str], crawler: Sequence[str]) -> str | None:
    """Why a site is not crawled for its ``Language`` field, or ``None``: a site that names
    languages none of which the crawler reads (compared by primary subtag, so ``zh-CN``
    matches ``zh``) is left alone (seed 000, section 5). No list on either side: no
    refusal."""
    wanted = {_primary(tag) for tag in site if tag.strip() and tag.strip() != "*"}
    mine = {_primary(tag) for tag in crawler if tag.strip()}
    if not wanted or not mine or "*" in mine or wanted & mine:
        return None
    return (f"the site's Language ({', '.join(site)}) shares nothing with the crawler's "
            f"languages ({', '.join(crawler)})")


# What the crawler can decode: httpx reads gzip and deflate itself (br and zstd only with
# extra packages, so they are not asked for).
DECODABLE = ("gzip", "deflate")


def accept_headers(rules: AgentRules, languages: Sequence[str] = ()) -> dict[str, str]:
    """The request headers REGP's Cookie, Encoding, Charset and Language fields ask for
    (seed 000, 3.2.9-3.2.12); the crawler's own languages when the site names none."""
    headers: dict[str, str] = {}
    if rules.cookies:
        headers["Cookie"] = "; ".join(c.strip() for c in rules.cookies if c.strip())
    encodings = [e.strip().lower() for e in rules.encoding if e.strip().lower() in DECODABLE]
    headers["Accept-Encoding"] = ", ".join(encodings) if encodings else ", ".join(DECODABLE)
    if rules.charset:
        headers["Accept-Charset"] = ", ".join(rules.charset)
    site_languages = [tag for tag in rules.language if tag.strip()]
    if site_languages:
        if languages:
            mine = {_primary(tag) for tag in languages}
            shared = [tag for tag in site_languages if _primary(tag) in mine]
            site_languages = shared or site_languages
        headers["Accept-Language"] = ", ".join(site_languages)
    elif languages:
        headers["Accept-Language"] = ", ".join(languages)
    if not headers.get("Cookie"):
        headers.pop("Cookie", None)
    return headers


@lru_cache(maxsize=1024)
def _path_pattern(pattern: str) -> re.Pattern[str]:
    # REGP 3.2.14 and 3.2.15: case-insensitive paths with * and $, as Allow / Disallow.
    return re.compile(wildcard_regex(pattern.strip()), re.IGNORECASE)


def _path_of(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def next_visit_s(url: str, rules: AgentRules, *, changefreq: str | None = None,
                 lastmod: datetime | None = None, fetched_at: float) -> float | None:
    """When the page at ``url`` is due again (seconds on the caller's clock), or ``None``
    for never: the shortest interval any guidance gives (REGP Change-* and Index-page
    fields whose path matches, the sitemap's changefreq); else a tenth of the page's age by
    its lastmod, between an hour and thirty days; else a week."""
    path = _path_of(url)
    intervals: list[float | None] = []
    for frequency, pattern in rules.change_frequency:
        if frequency in CHANGE_INTERVALS_S and _path_pattern(pattern).match(path):
            intervals.append(CHANGE_INTERVALS_S[frequency])
    if any(_path_pattern(pattern).match(path) for pattern in rules.index_pages):
        intervals.append(INDEX_PAGE_INTERVAL_S)
    if changefreq is not None and changefreq.strip().lower() in CHANGE_INTERVALS_S:
        intervals.append(CHANGE_INTERVALS_S[changefreq.strip().lower()])
    if intervals:
        finite = [value for value in intervals if value is not None]
        return fetched_at + min(finite) if finite else None
    if lastmod is not None:
        age = fetched_at - lastmod.timestamp()
        return fetched_at + min(MAX_HEURISTIC_S, max(MIN_HEURISTIC_S, age / 10))
    return fetched_at + DEFAULT_REVISIT_S
