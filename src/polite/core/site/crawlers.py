"""Which robot is this? Known crawlers, told from people by the User-Agent's words.

A known crawler is matched when one of its tokens appears in the User-Agent as a whole word
(``Googlebot`` in ``...compatible; Googlebot/2.1; ...``, not in ``Googlebot-Image/1.0``):
the characters of a token's neighbours must not be letters, digits, ``_``, ``-`` or ``.``.
A User-Agent that names no known crawler but holds a word such as ``FooBot`` or
``ExampleCrawler`` is an unknown robot; anything else is a person's browser.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from polite.core._documents import read_json
from polite.errors import ConfigError, MalformedDocument

__all__ = [
    "Category",
    "Crawler",
    "CrawlerList",
    "Identity",
    "IpNetwork",
    "directory_host",
    "parse_crawlers",
]

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Token characters: a token's neighbours must be none of these to count as a whole word.
_WORD = r"A-Za-z0-9_.\-"
# Words that make an unknown User-Agent a robot's (seed 003, 4.9: the User-Agent is the
# server's only clue); "bot" as a whole word or a suffix, and the usual self-descriptions.
_ROBOT_WORD = re.compile(
    rf"(?<![{_WORD}])([{_WORD}]*(?:bot|crawler|spider|scraper|fetcher|archiver|slurp)"
    rf"[{_WORD}]*)(?![{_WORD}])", re.IGNORECASE)
_VERSION = re.compile(r"/.*")
# A User-Agent longer than this is looked at only up to here (real ones are < 512 bytes).
MAX_USER_AGENT_CHARS = 1024
_MAX_CACHED = 4096


class Category(enum.StrEnum):
    """What a crawler is for."""

    SEARCH = "search"
    AI = "ai"
    SEO = "seo"
    ARCHIVER = "archiver"
    SOCIAL = "social"
    MONITORING = "monitoring"
    FEED = "feed"
    TOOL = "tool"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Crawler:
    """A known crawler: the words of its User-Agent, the token it reads robots.txt under,
    and how an operator lets a site check it (published IP ranges, reverse-DNS suffixes)."""

    name: str
    operator: str
    category: Category
    tokens: tuple[str, ...]
    robots_token: str
    ip_ranges: tuple[IpNetwork, ...] = ()
    host_suffixes: tuple[str, ...] = ()
    url: str = ""
    # the exact hosts whose Web Bot Auth key directories speak for this crawler, as its
    # operator publishes them (a host under its DNS suffix does not: a suffix such as
    # .google.com also holds pages anyone can publish)
    signature_agents: tuple[str, ...] = ()
    # where the operator publishes its IP ranges (JAFAR and earlier files of that shape);
    # polite site ranges update reads them
    ranges_urls: tuple[str, ...] = ()

    @property
    def is_verifiable(self) -> bool:
        """Whether its operator publishes a way to check a visit is really its own."""
        return bool(self.ip_ranges or self.host_suffixes or self.ranges_urls)


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a User-Agent says it is: a person (``is_robot`` false), a known crawler, or an
    unknown robot. ``agent`` is the name robots.txt is read under for it."""

    is_robot: bool
    agent: str
    crawler: Crawler | None = None

    @property
    def name(self) -> str:
        return self.crawler.name if self.crawler else self.agent


PERSON = Identity(False, "")


class CrawlerList:
    """Known crawlers, matched against User-Agents (answers cached per User-Agent)."""

    def __init__(self, crawlers: Iterable[Crawler], *, snapshot: str = "",
                 sources: Sequence[str] = ()) -> None:
        self.crawlers = tuple(crawlers)
        self.snapshot = snapshot
        self.sources = tuple(sources)
        self._by_token: dict[str, Crawler] = {}
        for crawler in self.crawlers:
            for token in crawler.tokens:
                self._by_token.setdefault(token.lower(), crawler)
        # Longest first, so that the alternation prefers "Googlebot-Image" to "Googlebot"
        # wherever both could start (whole-word boundaries already separate most).
        tokens = sorted(self._by_token, key=len, reverse=True)
        alternation = "|".join(re.escape(t) for t in tokens) or "(?!)"
        self._pattern = re.compile(rf"(?<![{_WORD}])(?:{alternation})(?![{_WORD}])",
                                   re.IGNORECASE)
        self._cache: dict[str, Identity] = {}

    def __len__(self) -> int:
        return len(self.crawlers)

    def by_name(self, name: str) -> Crawler | None:
        for crawler in self.crawlers:
            if crawler.name.lower() == name.lower():
                return crawler
        return None

    def identify(self, user_agent: str) -> Identity:
        """A person, a known crawler or an unknown robot, from the User-Agent alone. An
        empty User-Agent is an unknown robot: every browser sends one."""
        known = self._cache.get(user_agent)
        if known is not None:
            return known
        identity = self._identify(user_agent[:MAX_USER_AGENT_CHARS])
        if len(self._cache) >= _MAX_CACHED:
            self._cache.clear()
        self._cache[user_agent] = identity
        return identity

    def _identify(self, user_agent: str) -> Identity:
        if not user_agent.strip():
            return Identity(True, "")
        found = self._pattern.search(user_agent)
        if found is not None:
            crawler = self._by_token[found.group().lower()]
            return Identity(True, crawler.robots_token, crawler)
        word = _ROBOT_WORD.search(user_agent)
        if word is not None:
            return Identity(True, _VERSION.sub("", word.group(1)))
        return PERSON


def directory_host(value: str) -> str:
    """The host a key directory binding names: ``bot.example`` or the directory's URL
    (``https://bot.example/.well-known/...``), lower case, without a final dot."""
    try:
        host = urlsplit(value if "://" in value else "//" + value).hostname
    except ValueError:
        return ""
    return (host or "").lower().rstrip(".")


def _networks(values: object, where: str) -> tuple[IpNetwork, ...]:
    if not isinstance(values, list):
        raise ConfigError(f"{where}: ip_ranges must be a list of CIDR strings")
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(str(value), strict=False))
        except ValueError as exc:
            raise ConfigError(f"{where}: {value!r} is not an IP range: {exc}") from exc
    return tuple(networks)


def _strings(entry: dict[str, object], key: str, where: str) -> tuple[str, ...]:
    values = entry.get(key, [])
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise ConfigError(f"{where}: {key} must be a list of non-empty strings")
    return tuple(str(v) for v in values)


def parse_crawlers(text: str, *, source: str = "crawler list") -> CrawlerList:
    """A :class:`CrawlerList` from JSON: ``{"snapshot": ..., "sources": [...], "crawlers":
    [{"name", "operator", "category", "tokens", "robots_token"?, "ip_ranges"?,
    "host_suffixes"?, "url"?, "signature_agents"?, "ranges_urls"?}, ...]}``. Raises
    :class:`ConfigError` naming the entry."""
    try:
        data = read_json(text)
    except MalformedDocument as exc:
        raise ConfigError(f"{source}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("crawlers"), list):
        raise ConfigError(f"{source}: expected an object with a 'crawlers' list")
    crawlers = []
    for index, entry in enumerate(data["crawlers"]):
        where = f"{source}: crawler {index + 1}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected an object")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: a name is required")
        where = f"{source}: crawler {name!r}"
        try:
            category = Category(str(entry.get("category", "other")).lower())
        except ValueError:
            known = ", ".join(c.value for c in Category)
            raise ConfigError(f"{where}: unknown category {entry.get('category')!r} "
                              f"(one of {known})") from None
        tokens = _strings(entry, "tokens", where) or (name,)
        suffixes = tuple(s.lower() if s.startswith(".") else "." + s.lower()
                         for s in _strings(entry, "host_suffixes", where))
        crawlers.append(Crawler(
            name=name, operator=str(entry.get("operator", "")), category=category,
            tokens=tokens, robots_token=str(entry.get("robots_token") or tokens[0]),
            ip_ranges=_networks(entry.get("ip_ranges", []), where),
            host_suffixes=suffixes, url=str(entry.get("url", "")),
            signature_agents=tuple(directory_host(a) for a in
                                   _strings(entry, "signature_agents", where)),
            ranges_urls=_strings(entry, "ranges_urls", where)))
    sources = data.get("sources", [])
    return CrawlerList(crawlers, snapshot=str(data.get("snapshot", "")),
                       sources=[str(s) for s in sources] if isinstance(sources, list) else [])
