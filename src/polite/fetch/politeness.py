"""The politeness driver: may these URLs be fetched now, and if not, why and when.

It carries out what the cores decide: the robots.txt state comes from
:class:`RobotsFetcher`, the spacing from :mod:`polite.core.politeness.rules`, and the slot
from the store (which may be shared by many nodes). Seed 001's services only *reflect* the
situation; ``reserve=True`` also takes the slot, so that crawlers which fetch on their own
stay polite together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from polite.clock import Clock
from polite.core.politeness.rules import (
    DEFAULT_DELAY_S,
    MAX_CRAWL_DELAY_S,
    Delays,
    delays_for,
    earliest_in_windows,
)
from polite.core.robots.lifecycle import AllowAll, DisallowAll, Parsed
from polite.core.robots.model import AgentRules
from polite.errors import InvalidURL
from polite.fetch.robots import RobotsFetcher, is_public_host, origin_of
from polite.storage.base import Store

__all__ = ["NO_RETRY", "Politeness", "Verdict"]

NO_RETRY = -1  # seed 001: "retryAfter -1 ... a delay does not have to be considered"


@dataclass(frozen=True, slots=True)
class Verdict:
    """One URL's answer, in seed 001's shape (``retry_after_ms`` is ``retryAfter``)."""

    url: str
    allowed: bool
    error: str | None = None
    retry_after_ms: int = NO_RETRY

    def as_json(self) -> dict[str, object]:
        return {"url": self.url, "allowed": self.allowed, "error": self.error,
                "retryAfter": self.retry_after_ms}


def _ms(seconds: float) -> int:
    return max(0, math.ceil(seconds * 1000))


class Politeness:
    """Answers for batches of URLs; one instance per service, shared by all requests."""

    def __init__(
        self,
        robots: RobotsFetcher,
        store: Store,
        clock: Clock,
        *,
        agent: str,
        default_delay_s: float = DEFAULT_DELAY_S,
        max_crawl_delay_s: float = MAX_CRAWL_DELAY_S,
        allow_private: bool = False,
    ) -> None:
        self._robots = robots
        self.allow_private = allow_private
        self._store = store
        self._clock = clock
        self.agent = agent
        self.default_delay_s = default_delay_s
        self.max_crawl_delay_s = max_crawl_delay_s
        self.robots_delays_s: dict[str, float] = {}  # host -> what its robots.txt asks

    @property
    def robots_fetches(self) -> int:
        """How many robots.txt requests have gone out."""
        return self._robots.fetches

    async def delays(self, host: str, rules: AgentRules) -> Delays:
        configured = await self._store.get_delay(host)
        delays = delays_for(rules, configured_s=configured, default_s=self.default_delay_s,
                            max_crawl_delay_s=self.max_crawl_delay_s)
        if delays.robots_s is not None:
            self.robots_delays_s[host] = delays.robots_s
        return delays

    async def check(self, urls: Sequence[str], *, reserve: bool = False,
                    agent: str | None = None) -> list[Verdict]:
        """A verdict per URL, in order; at most one URL per host is allowed per call."""
        agent = agent or self.agent
        granted_hosts: dict[str, float] = {}
        verdicts = []
        for url in urls:
            verdicts.append(await self._check_one(url, agent, reserve, granted_hosts))
        return verdicts

    async def _check_one(self, url: str, agent: str, reserve: bool,
                         granted_hosts: dict[str, float]) -> Verdict:
        try:
            origin_of(url)
        except InvalidURL as exc:
            return Verdict(url, False, str(exc))
        host = (urlsplit(url).hostname or "").lower()
        if not self.allow_private and not await is_public_host(host):
            return Verdict(url, False, f"{host} is a private or loopback address; this server "
                           "does not fetch from those (--allow-private)")
        state = await self._robots.state(url)
        rules = AgentRules()
        match state:
            case DisallowAll():
                return Verdict(url, False, state.reason, _ms(state.retry_at - self._clock()))
            case Parsed():
                decision = state.robots.decide(url, agent)
                if not decision.allowed:
                    return Verdict(url, False, f"Blocked by robots.txt: {decision.reason}")
                rules = state.robots.agent_rules(agent, url=url)
            case AllowAll():
                pass
        delays = await self.delays(host, rules)
        interval_ms = _ms(delays.interval_s)
        if host in granted_hosts:
            return Verdict(url, False, f"There must be a delay of {interval_ms} milliseconds "
                           f"between requests to {host}.", interval_ms)
        now = await self._store.clock()
        if delays.windows or delays.forbidden:
            opens = earliest_in_windows(now, delays.windows, delays.forbidden)
            if opens is None:
                return Verdict(url, False, "robots.txt forbids visits for the foreseeable "
                               "future (Time-forbidden / Visit-time)")
            if opens > now:
                return Verdict(url, False, "robots.txt allows visits only at certain times "
                               "(Visit-time / Time-forbidden)", _ms(opens - now))
        slot = (self._store.claim if reserve else self._store.peek)
        answer = await slot(host, delays.interval_s)  # judged by the store's clock
        if not answer.granted:
            return Verdict(url, False, f"There must be a delay of {interval_ms} milliseconds "
                           f"between requests to {host} ({delays.reason()}).",
                           _ms(answer.at - answer.now))
        granted_hosts[host] = now
        return Verdict(url, True)
