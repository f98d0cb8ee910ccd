"""The one driver the ASGI and WSGI adapters share: it performs what
:mod:`polite.core.site` decides (DNS lookups, the rules in force, the throttle's clock, the
access log)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from polite.clock import Clock, WallClock
from polite.core.identity import SignatureCheck, SignatureOutcome
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
from polite.core.site.ranges import IpNetwork, RangeTable
from polite.core.text import decode_text
from polite.core.usage.statement import Pref
from polite.core.usage.vocab import AIPREF_REVISIONS, CURRENT
from polite.errors import ConfigError
from polite.site.store import SiteStore

if TYPE_CHECKING:  # the identity extra is needed only by a site that checks signatures
    from polite.identity.signatures import KeyDirectory

    DirectoryLookup = Callable[[str], Awaitable[KeyDirectory]]

__all__ = [
    "DNS_TIMEOUT_S",
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
# Nonces of verified signatures, kept until their signature expires (and the verifier's
# clock skew past it); at most this many (the draft's signatures live a minute or so).
_MAX_NONCES = 100_000
_NONCE_SKEW_S = 5.0


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
    to check Web Bot Auth signatures; ``require_signature``: robots (by name) refused
    without a valid one."""

    def __init__(self, store: SiteStore, *, crawlers: CrawlerList | None = None,
                 resolver: Resolver | None = None, clock: Clock | None = None,
                 dns_timeout_s: float = DNS_TIMEOUT_S,
                 trusted_proxies: Sequence[str] = (),
                 signatures: DirectoryLookup | None = None,
                 require_signature: Sequence[str] = ()) -> None:
        if require_signature and signatures is None:
            raise ConfigError("require_signature needs signatures (a DirectoryFetcher) to "
                              "check them with")
        self.signatures = signatures
        self.require_signature = frozenset(require_signature)
        self.store = store
        try:
            self.trusted_proxies = tuple(ipaddress.ip_network(p, strict=False)
                                         for p in trusted_proxies)
        except ValueError as exc:
            raise ConfigError(f"trusted_proxies: {exc}") from exc
        self.crawlers = crawlers if crawlers is not None else load_crawlers()
        self.resolver = resolver if resolver is not None else SystemResolver()
        self.clock = clock if clock is not None else WallClock()
        self.dns_timeout_s = dns_timeout_s
        self._verdicts: dict[tuple[str, str], tuple[Check, float]] = {}
        self._slots: dict[str, float] = {}
        self._in_force: InForce | None = None
        self._ranges: RangeTable | None = None
        self._nonces: dict[tuple[str, str], float] = {}  # (keyid, nonce) -> kept until
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
                files.setdefault(row.crawler, []).extend(
                    ipaddress.ip_network(p, strict=False) for p in row.prefixes)
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
                              headers: Sequence[tuple[str, str]]) -> Check | None:
        """The verdict of the request's Web Bot Auth signature, or ``None`` when it has
        none (or the site does not check them) or it leaves the verdict to the published
        ranges and DNS (see :func:`~polite.core.site.judge_signature`)."""
        if self.signatures is None or not any(n.lower() == "signature-input"
                                              for n, _ in headers):
            return None
        from polite.identity.signatures import verify_signature

        now = self.clock()
        found = await verify_signature(method, url, headers, self.signatures, now=now)
        expires = found.expires
        if found.nonce is not None and expires is not None:
            # A signed request sent again (a replay by whoever saw it) is no longer the
            # signer's word: each nonce is taken once while its signature is valid.
            key = (found.keyid or "", found.nonce)
            if self._nonces.get(key, 0.0) > now:
                found = SignatureCheck(SignatureOutcome.INVALID,
                                       f"nonce already used: a replayed request "
                                       f"signed by {found.keyid}", found.agent, found.keyid)
            else:
                if len(self._nonces) >= _MAX_NONCES:
                    self._nonces = {k: t for k, t in self._nonces.items() if t > now}
                    if len(self._nonces) >= _MAX_NONCES:
                        self._nonces.clear()
                self._nonces[key] = float(expires) + _NONCE_SKEW_S
        return judge_signature(identity.crawler, identity.name, found)

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


def refusal_body(decision: SiteDecision) -> bytes:
    """What a refused or throttled robot reads."""
    if decision.action is Action.THROTTLE:
        return (f"429 Too Many Requests: {decision.reason}. Retry after "
                f"{decision.retry_after_s} s; see /robots.txt.\n").encode()
    return f"403 Forbidden: {decision.reason}. See /robots.txt.\n".encode()
