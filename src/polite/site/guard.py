"""The one driver the ASGI and WSGI adapters share: it performs what
:mod:`polite.core.site` decides (DNS lookups, the rules in force, the throttle's clock, the
access log)."""

from __future__ import annotations

import asyncio
import heapq
import ipaddress
import socket
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from polite.clock import Clock, WallClock
from polite.core.identity import (
    CLOCK_SKEW_S,
    MAX_VALIDITY_S,
    SIGNATURE_WINDOW_S,
    SignatureCheck,
    SignatureOutcome,
)
from polite.core.robots import UNNAMED_AGENT, parse
from polite.core.robots.usage import Preferences, from_robots
from polite.core.site import (
    Action,
    Check,
    Crawler,
    CrawlerList,
    Identity,
    InForce,
    LogEntry,
    NeedsDns,
    SiteDecision,
    Verification,
    Visit,
    client_address,
    decide,
    judge_dns,
    judge_signature,
    parse_crawlers,
    throttle_key,
    verify_by_ranges,
)
from polite.core.site.crawlers import directory_host
from polite.core.site.ranges import IpNetwork, RangeTable, prefix_problem
from polite.core.text import decode_text
from polite.core.urls import host_name_problem
from polite.core.usage.statement import Pref
from polite.core.usage.vocab import AIPREF_REVISIONS, CURRENT
from polite.errors import ConfigError
from polite.site.store import SiteStore

if TYPE_CHECKING:  # the identity extra is needed only by a site that checks signatures
    from polite.identity.signatures import KeyDirectory

__all__ = [
    "DNS_TIMEOUT_S",
    "MAX_NONCES",
    "DirectoryLookup",
    "Resolver",
    "RobotsFile",
    "SiteGuard",
    "SystemResolver",
    "load_crawlers",
    "refusal_body",
]

# How long a lookup may take before the visit counts as unverifiable (Google's advice is to
# cache results; one slow resolver must not hold requests up for long).
DNS_TIMEOUT_S = 2.0
# How long a verdict is kept per (crawler, address): a settled one for an hour, a failed
# lookup for five minutes.
_SETTLED_TTL_S = 3600.0
_FAILED_TTL_S = 300.0
_MAX_VERDICTS = 10_000
# The rules in force are looked up again at most this often (another process may save).
_RELOAD_EVERY_S = 1.0
# Paths whose Content-Usage header is remembered (per version of the rules), at most.
_MAX_USAGE_PATHS = 4096
_MAX_SLOTS = 10_000
# Nonces of verified signatures, each kept until its signature expires (and the clock
# skew past it); at most this many: with five-minute windows, 330 signed requests a second.
# Past that a new signature is not taken (the ranges and DNS decide); a nonce is never
# forgotten before its signature expires, or the request could be replayed.
MAX_NONCES = 100_000


class DirectoryLookup(Protocol):
    """How key directories are had (:class:`~polite.identity.directory.DirectoryFetcher`):
    the directory at a URL, ``client`` being the address whose request asks."""

    async def __call__(self, url: str, *, client: str | None = None) -> KeyDirectory: ...


class Resolver(Protocol):
    """DNS, injectable: each returns the names or addresses found ([] when the name does not
    exist) and raises :class:`OSError` when the lookup fails."""

    def reverse(self, ip: str) -> list[str]: ...

    def forward(self, name: str) -> list[str]: ...


class SystemResolver:
    """The operating system's resolver."""

    def reverse(self, ip: str) -> list[str]:
        try:
            name, aliases, _ = socket.gethostbyaddr(ip)
        except socket.herror as exc:
            if exc.errno == 1:  # HOST_NOT_FOUND: there is no PTR record
                return []
            raise
        return [name, *aliases]

    def forward(self, name: str) -> list[str]:
        try:
            infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            if exc.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", -5)):
                return []
            raise
        return sorted({str(info[4][0]) for info in infos})


def load_crawlers(path: str | Path | None = None) -> CrawlerList:
    """The bundled list of known crawlers, or the one in ``path``."""
    if path is None:
        text = resources.files("polite.site").joinpath("crawlers.json").read_text("utf-8")
        return parse_crawlers(text, source="the bundled crawler list")
    try:
        text = decode_text(Path(path).read_bytes(), str(path))
    except OSError as exc:
        raise ConfigError(f"cannot read the crawler list {path}: {exc}") from exc
    return parse_crawlers(text, source=str(path))


@dataclass(frozen=True, slots=True)
class RobotsFile:
    """``/robots.txt`` as served: its body and headers."""

    body: bytes
    headers: tuple[tuple[str, str], ...]


class SiteGuard:
    """Decides and logs for a site's application; build one and wrap the app with
    :class:`~polite.site.middleware.SiteMiddleware` or
    :class:`~polite.site.middleware.SiteWSGIMiddleware`. ``trusted_proxies``: the site's own
    reverse proxies (CIDR), whose ``X-Forwarded-For`` names the visitor. ``signatures``:
    how key directories are had (a :class:`~polite.identity.directory.DirectoryFetcher`),
    to check Web Bot Auth signatures; it needs ``host_names``, the site's own (``name`` for
    any port, ``name:port`` for one): a signature made for any other authority is
    refused. ``signature_agents``: the operator's own bindings, robot name -> the hosts of
    the key directories that speak for it (besides the crawler list's); only directories
    bound to a name are fetched. ``require_signature``: robots (by name) refused without a
    valid signature from a directory bound to them. ``max_signature_validity_s``: the
    longest window (expires - created) taken."""

    def __init__(self, store: SiteStore, *, crawlers: CrawlerList | None = None,
                 resolver: Resolver | None = None, clock: Clock | None = None,
                 dns_timeout_s: float = DNS_TIMEOUT_S,
                 trusted_proxies: Sequence[str] = (),
                 signatures: DirectoryLookup | None = None,
                 host_names: Sequence[str] = (),
                 signature_agents: Mapping[str, Sequence[str]] | None = None,
                 require_signature: Sequence[str] = (),
                 max_signature_validity_s: int = SIGNATURE_WINDOW_S) -> None:
        if require_signature and signatures is None:
            raise ConfigError("require_signature needs signatures (a DirectoryFetcher) to "
                              "check them with")
        if signatures is not None and not host_names:
            raise ConfigError("signatures needs host_names, the site's own host names: a "
                              "signature covers the authority it was made for, and one made "
                              "for another site must not verify here")
        if not 0 < max_signature_validity_s <= MAX_VALIDITY_S:
            raise ConfigError(f"max_signature_validity_s must be from 1 to {MAX_VALIDITY_S} "
                              f"s, not {max_signature_validity_s}")
        self.signatures = signatures
        self.host_names = frozenset(_authority(name) for name in host_names)
        if "" in self.host_names:
            raise ConfigError(f"host_names: {list(host_names)!r} holds one that is not a "
                              "host name")
        self.max_signature_validity_s = max_signature_validity_s
        self.store = store
        try:
            self.trusted_proxies = tuple(ipaddress.ip_network(p, strict=False)
                                         for p in trusted_proxies)
        except ValueError as exc:
            raise ConfigError(f"trusted_proxies: {exc}") from exc
        self.crawlers = crawlers if crawlers is not None else load_crawlers()
        self._bound: dict[str, frozenset[str]] = {}  # robot name (lower case) -> hosts
        for crawler in self.crawlers.crawlers:
            if crawler.signature_agents:
                self._bound[crawler.name.lower()] = frozenset(crawler.signature_agents)
        for name, hosts in (signature_agents or {}).items():
            found = {directory_host(h) for h in hosts}
            if not name or not found or "" in found:
                raise ConfigError(f"signature_agents: {name!r}: {list(hosts)!r} is not a "
                                  "list of key directory hosts")
            self._bound[name.lower()] = self._bound.get(name.lower(), frozenset()) | found
        self._fetchable = frozenset().union(*self._bound.values())
        unbound = [n for n in require_signature if n.lower() not in self._bound]
        if unbound:
            raise ConfigError(f"require_signature: no key directory is bound to "
                              f"{unbound[0]!r}, so no signature could prove it; bind one "
                              f"with signature_agents={{{unbound[0]!r}: [HOST]}}")
        self.require_signature = frozenset(require_signature)
        self.resolver = resolver if resolver is not None else SystemResolver()
        self.clock = clock if clock is not None else WallClock()
        self.dns_timeout_s = dns_timeout_s
        self._verdicts: dict[tuple[str, str], tuple[Check, float]] = {}
        self._slots: dict[str, float] = {}
        self._in_force: InForce | None = None
        self._ranges: RangeTable | None = None
        # (keyid, nonce) -> kept until; a heap of the same by time, to forget the expired in
        # order
        self._nonces: dict[tuple[str, str], float] = {}
        self._nonce_expiry: list[tuple[float, tuple[str, str]]] = []
        # a WSGI server's threads check signatures at once: a nonce is taken by one only
        self._nonce_lock = threading.Lock()
        self._ranges_stamp: tuple[int, float] | None = None
        self._ranges_checked_at = float("-inf")
        self._robots_file: RobotsFile | None = None
        self._checked_at = float("-inf")
        self._usage: dict[tuple[int, str], str | None] = {}

    # -- the rules in force ------------------------------------------------------------

    def in_force(self) -> InForce:
        """The newest saved rules, parsed; looked up again at most once a second."""
        now = self.clock()
        current = self._in_force
        if current is not None and now - self._checked_at < _RELOAD_EVERY_S:
            return current
        self._checked_at = now
        version_id = self.store.current_id()
        if current is not None and current.version == version_id:
            return current
        version = self.store.current()
        text = version.robots_txt
        # The file is parsed as Google reads it (most robots go by Google's reading):
        # merged groups, longest match, Allow over Disallow on a tie.
        current = InForce(parse(text, "google"), tuple(text.split("\n")), version.id,
                          version.rules.ttl_s, version.rules.enforcement)
        ttl = f"max-age={current.ttl_s}" if current.ttl_s > 0 else "no-cache"
        self._robots_file = RobotsFile(text.encode(), (
            ("content-type", "text/plain; charset=utf-8"),
            ("cache-control", ttl),
            ("x-robots-version", str(version.id)),
        ))
        self._in_force = current
        return current

    def robots_file(self) -> RobotsFile:
        self.in_force()
        assert self._robots_file is not None  # set with the rules in force
        return self._robots_file

    def usage_header(self, path: str) -> str | None:
        """The ``Content-Usage`` header for ``path``: the file's Content-Usage preferences
        that apply to it for a crawler no group names, as one dictionary; ``None`` when
        none does."""
        current = self.in_force()
        key = (current.version, path)
        if key in self._usage:
            return self._usage[key]
        if len(self._usage) >= _MAX_USAGE_PATHS:
            self._usage.clear()
        prefs = from_robots(current.robots, path, UNNAMED_AGENT)
        stated = Preferences(tuple(s for s in prefs.sources
                                   if s.mechanism == "robots.txt Content-Usage"))
        vocab = AIPREF_REVISIONS[CURRENT]
        members = []
        for label, purpose in vocab.labels.items():
            pref = stated.pref(purpose)
            if pref is not Pref.UNKNOWN:
                members.append(f"{label}={vocab.allow if pref is Pref.ALLOW else vocab.disallow}")
        value = ", ".join(members) or None
        self._usage[key] = value
        return value

    def reload(self) -> None:
        """Read the rules again on the next request (after a save in this process)."""
        self._checked_at = float("-inf")

    # -- who is asking -----------------------------------------------------------------

    def client_ip(self, peer: str | None, forwarded_for: str | None) -> str | None:
        """The visitor's address, through the site's own reverse proxies (when configured,
        ``X-Forwarded-For`` from them is read; from anyone else it is ignored)."""
        if not self.trusted_proxies:
            return peer
        return client_address(peer, forwarded_for, self.trusted_proxies)

    def identify(self, user_agent: str) -> Identity:
        return self.crawlers.identify(user_agent)

    def range_table(self) -> RangeTable:
        """The operators' published ranges as stored (``polite site ranges update``), read
        again at most once a second when they changed; the verdicts they gave are dropped
        then."""
        now = self.clock()
        if self._ranges is not None and now - self._ranges_checked_at < _RELOAD_EVERY_S:
            return self._ranges
        self._ranges_checked_at = now
        stamp = self.store.ranges_stamp()
        if self._ranges is None or stamp != self._ranges_stamp:
            files: dict[str, list[IpNetwork]] = {}
            for row in self.store.ranges():
                # a prefix wider than any operator publishes, kept before such were
                # refused, is not taken (a test setup's private ranges are)
                files.setdefault(row.crawler, []).extend(
                    n for n in (ipaddress.ip_network(p, strict=False) for p in row.prefixes)
                    if prefix_problem(n, allow_private=True) is None)
            self._ranges = RangeTable(files)
            self._ranges_stamp = stamp
            self._verdicts.clear()
        return self._ranges

    def known_verdict(self, identity: Identity, ip: str | None) -> Check | NeedsDns:
        """A verdict without DNS (ranges or a cached lookup), or the need for DNS."""
        crawler = identity.crawler
        table = self.range_table()
        if crawler is None or ip is None:
            return verify_by_ranges(crawler, ip, table)
        cached = self._verdicts.get((crawler.name, ip))
        if cached is not None and cached[1] > self.clock():
            return cached[0]
        found = verify_by_ranges(crawler, ip, table)
        if isinstance(found, Check):
            self._remember(crawler, ip, found)
        return found

    async def check_signature(self, identity: Identity, method: str, url: str,
                              headers: Sequence[tuple[str, str]], *,
                              client: str | None = None) -> Check | None:
        """The verdict of the request's Web Bot Auth signature, or ``None`` when it has
        none (or the site does not check them) or it leaves the verdict to the published
        ranges and DNS (see :func:`~polite.core.site.judge_signature`). ``url``: as the
        request named it (its ``Host``); ``client``: the visitor's address."""
        signatures = self.signatures
        if signatures is None or not any(n.lower() == "signature-input" for n, _ in headers):
            return None
        from polite.identity.signatures import KeyDirectory, verify_signature

        fetchable = self._fetchable

        async def lookup(agent: str) -> KeyDirectory:
            # Only a directory bound to a name is fetched: any other would be fetched at
            # the bidding of whoever sends a Signature-Agent, before any check.
            if directory_host(agent) not in fetchable:
                return KeyDirectory({}, "not fetched: bound to no robot this site knows "
                                        "(the crawler list's signature_agents, or the "
                                        "site's own)")
            return await signatures(agent, client=client)

        now = self.clock()
        found = await verify_signature(method, url, headers, lookup, now=now,
                                       max_validity_s=self.max_signature_validity_s,
                                       require_nonce=True,
                                       authority_problem=self._authority_problem)
        if found.outcome is SignatureOutcome.VERIFIED:
            with self._nonce_lock:
                found = self._take_nonce(found, now)
        bound = self._bound.get(identity.name.lower(), frozenset())
        return judge_signature(identity.crawler, identity.name, found, bound)

    def _authority_problem(self, authority: str) -> str | None:
        """Why a request for ``authority`` is not for this site (``None``: it is)."""
        named = _authority(authority) if "@" not in authority else ""
        host = named.rsplit(":", 1)[0] if not named.endswith("]") else named
        if named and (named in self.host_names or host in self.host_names):
            return None
        return (f"the request is for {authority!r}, not one of this site's host names: "
                "a signature made for another site")

    def _take_nonce(self, found: SignatureCheck, now: float) -> SignatureCheck:
        """``found`` if its nonce is new (it is then kept until the signature expires), else
        why it is not taken: a replay, or no room to remember one more."""
        expiry = self._nonce_expiry
        while expiry and expiry[0][0] <= now:
            _, old = heapq.heappop(expiry)
            if self._nonces.get(old, now + 1) <= now:
                del self._nonces[old]
        key = (found.keyid or "", found.nonce or "")
        if key in self._nonces:
            # A signed request sent again (a replay by whoever saw it) is no longer the
            # signer's word: each nonce is taken once while its signature is valid.
            return SignatureCheck(SignatureOutcome.INVALID, f"nonce already used: a "
                                  f"replayed request signed by {found.keyid}", found.agent,
                                  found.keyid)
        if len(self._nonces) >= MAX_NONCES:
            return SignatureCheck(SignatureOutcome.UNVERIFIABLE,
                                  f"{MAX_NONCES} nonces of unexpired signatures are kept "
                                  "already: not taken", found.agent, found.keyid)
        until = float(found.expires or now) + CLOCK_SKEW_S
        self._nonces[key] = until
        heapq.heappush(expiry, (until, key))
        return found

    def _remember(self, crawler: Crawler, ip: str, check: Check) -> Check:
        if len(self._verdicts) >= _MAX_VERDICTS:
            self._verdicts.clear()
        settled = check.verdict is not Verification.UNVERIFIABLE
        self._verdicts[(crawler.name, ip)] = (
            check, self.clock() + (_SETTLED_TTL_S if settled else _FAILED_TTL_S))
        return check

    def verify_dns(self, crawler: Crawler, ip: str) -> Check:
        """Forward-confirmed reverse DNS, blocking (the WSGI adapter's way)."""
        ptr: list[str] | None
        forward: dict[str, Sequence[str]] | None = {}
        try:
            ptr = self.resolver.reverse(ip)
        except OSError:
            ptr = None
        if ptr:
            try:
                for name in ptr:
                    if any(name.lower().rstrip(".").endswith(s) for s in crawler.host_suffixes):
                        forward[name] = self.resolver.forward(name)  # type: ignore[index]
            except OSError:
                forward = None
        return self._remember(crawler, ip, judge_dns(crawler, ip, ptr, forward))

    async def verify_dns_async(self, crawler: Crawler, ip: str) -> Check:
        """:meth:`verify_dns` in a worker thread, within :data:`DNS_TIMEOUT_S`."""
        try:
            return await asyncio.wait_for(asyncio.to_thread(self.verify_dns, crawler, ip),
                                          self.dns_timeout_s)
        except TimeoutError:
            return self._remember(crawler, ip, Check(
                Verification.UNVERIFIABLE, f"DNS for {ip} took over {self.dns_timeout_s:g} s"))

    # -- deciding and logging ------------------------------------------------------------

    def decide(self, visit: Visit, identity: Identity, check: Check) -> SiteDecision:
        """The core's decision with this site's rules, clock and throttle state; an allowed
        visit starts the robot's next interval."""
        now = self.clock()
        in_force = self.in_force()
        last = self._slots.get(throttle_key(identity, check, visit.ip)) \
            if in_force.enforcement.throttle else None
        decision = decide(visit, identity, check, in_force, last_start=last, now=now,
                          signature_required=identity.name in self.require_signature)
        if decision.slot_key is not None and in_force.enforcement.throttle:
            if len(self._slots) >= _MAX_SLOTS:
                self._slots.clear()
            self._slots[decision.slot_key] = now
        return decision

    def log(self, entry: LogEntry, status: int | None) -> None:
        self.store.log([(entry, status)])


def _authority(name: str) -> str:
    """A host name or authority as compared: lower case, without a final dot (before any
    port); ``""`` when it is none."""
    try:
        parts = urlsplit("//" + name.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return ""
    if not host or host_name_problem(host) is not None:
        return ""
    host = host.rstrip(".")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    return f"{host}:{port}" if port is not None else host


def refusal_body(decision: SiteDecision) -> bytes:
    """What a refused or throttled robot reads."""
    if decision.action is Action.THROTTLE:
        return (f"429 Too Many Requests: {decision.reason}. Retry after "
                f"{decision.retry_after_s} s; see /robots.txt.\n").encode()
    return f"403 Forbidden: {decision.reason}. See /robots.txt.\n".encode()
