"""The politeness driver: may these URLs be fetched now, and if not, why and when.

It carries out what the cores decide: the robots.txt state comes from
:class:`RobotsFetcher`, the spacing from :mod:`polite.core.politeness.rules`, and the slot
from the store (which may be shared by many nodes). Seed 001's services only *reflect* the
situation; ``reserve=True`` also takes the slot, so that crawlers which fetch on their own
stay polite together.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from polite.clock import Clock
from polite.config import AT_LEAST_ONE, NON_NEGATIVE, check_float, check_int
from polite.core.politeness.rules import (
    ADAPTIVE_FACTOR,
    DEFAULT_DELAY_S,
    MAX_CRAWL_DELAY_S,
    Delays,
    HostClaim,
    backoff_until,
    delays_for,
    earliest_in_windows,
)
from polite.core.robots.lifecycle import (
    AllowAll,
    DisallowAll,
    Parsed,
    RobotsState,
    parse_retry_after,
)
from polite.core.robots.model import AgentRules
from polite.errors import InvalidURL
from polite.fetch.activity import Activity, robots_code
from polite.fetch.robots import PublicHosts, RobotsFetcher, split_origin
from polite.storage.base import Store

__all__ = ["NO_RETRY", "Politeness", "Standing", "Verdict"]

NO_RETRY = -1  # seed 001: "retryAfter -1 ... a delay does not have to be considered"
NO_RULES = AgentRules()  # no robots.txt in force: no fields from the site
# Matching costs rules x URL length (12,000 wildcard rules against a 5,000-character URL:
# 23 ms); a batch gives the event loop back after this much of it, so that the proxy and
# /health go on being answered while a long one is decided.
MATCH_SLICE_S = 0.01


class Verdict(NamedTuple):
    """One URL's answer, in seed 001's shape (``retry_after_ms`` is ``retryAfter``)."""

    url: str
    allowed: bool
    error: str | None = None
    retry_after_ms: int = NO_RETRY
    warning: str | None = None  # e.g. the robots.txt in force was cut at the size cap
    # allowed; refused by "robots" (rules, robots.txt unavailable, Time-forbidden), for the
    # "delay" (spacing, back-off, Visit-time), or "invalid" (a bad URL, a private address)
    cause: str = "allowed"

    def as_json(self) -> dict[str, object]:
        answer: dict[str, object] = {"url": self.url, "allowed": self.allowed,
                                     "error": self.error, "retryAfter": self.retry_after_ms}
        if self.warning is not None:
            answer["warning"] = self.warning
        return answer


class Standing(NamedTuple):
    """A host as :meth:`Politeness.standing` sees it."""

    robots: RobotsState | None  # None: never fetched
    robots_bytes: int
    delays: Delays
    slot: HostClaim  # ats[0]: when its next request may go; held_until: a back-off's end


def _ms(seconds: float) -> int:
    return max(0, math.ceil(seconds * 1000))


@dataclass(slots=True)
class _Ask:
    """One URL on its way through a batch."""

    index: int
    url: str
    host: str
    delays: Delays
    interval_s: float


def _warn_if_cut(verdict: Verdict, cut: list[str]) -> Verdict:
    """A verdict from a robots.txt cut at the size cap says so: rules past the cut were not
    read, so the answer may not be the site's."""
    try:
        origin = split_origin(verdict.url)[0]
    except InvalidURL:
        return verdict
    if origin in cut:
        return verdict._replace(
            warning=f"{origin}/robots.txt is longer than the size cap and was read only that "
                    "far; rules after it are not applied (--max-bytes)")
    return verdict


def _wait_reason(host: str, ask: _Ask, claim: HostClaim, position: int) -> str:
    """Why a URL must wait: a back-off in force (429 / 503), another URL of the host taken
    in the same call, or the spacing and the source that set it."""
    source = ask.delays.reason()
    held = claim.held_until
    if held is not None and (claim.granted < 0 or claim.granted > position) \
            and claim.ats[position] <= held:
        return (f"{host} asked for a pause (429 or 503, Retry-After honoured): no request "
                f"before {_ms(held - claim.now)} milliseconds from now (back-off).")
    if 0 <= claim.granted < position:
        return (f"There must be a delay of {_ms(ask.interval_s)} milliseconds between "
                f"requests to {host} ({source}); another URL of {host} in this call takes "
                "the slot.")
    return (f"There must be a delay of {_ms(ask.interval_s)} milliseconds between requests "
            f"to {host} ({source}).")


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
        robots_concurrency: int = 64,
        adaptive_factor: float = ADAPTIVE_FACTOR,
        backoff: bool = True,
        activity: Activity | None = None,
        send_slack_s: float = 0.0,
        public_hosts: PublicHosts | None = None,
        private_hint: str = "allow_private=True",
    ) -> None:
        # The last check of what every surface checked already: a NaN slips through every
        # comparison the spacing makes, and politeness is off (polite serve with
        # --adaptive-factor nan let every request through).
        for knob, value in (("default_delay_s=", default_delay_s),
                            ("max_crawl_delay_s=", max_crawl_delay_s),
                            ("adaptive_factor=", adaptive_factor),
                            ("send_slack_s=", send_slack_s)):
            check_float(value, NON_NEGATIVE, knob=knob)
        check_int(robots_concurrency, AT_LEAST_ONE, knob="robots_concurrency=")
        self._robots = robots
        # A request given a slot may leave up to this late (a busy process, a connection to
        # open) and the spacing still holds at the site: a host's delay is claimed this much
        # longer. Processes sharing a store need it, for another's claim may come while this
        # one's request is still on its way out (one process notes its own late starts).
        self.send_slack_s = send_slack_s
        self.allow_private = allow_private
        # How the caller's surface says to allow them (--allow-private, POLITE_ALLOW_PRIVATE)
        self.private_hint = private_hint
        # Asked on every check when private addresses are refused: kept a minute per host.
        self._public_hosts = public_hosts if public_hosts is not None else PublicHosts(clock)
        self._store = store
        self._clock = clock
        self.agent = agent
        self.default_delay_s = default_delay_s
        self.max_crawl_delay_s = max_crawl_delay_s
        self.adaptive_factor = adaptive_factor  # x the host's response time; 0: off
        self.backoff = backoff  # 429 and 503 pause the host
        self.robots_delays_s: dict[str, float] = {}  # host -> what its robots.txt asks
        self._robots_slots = asyncio.Semaphore(robots_concurrency)
        # what this node sees, for the dashboard (the proxy and the API count into it too)
        self.activity = activity if activity is not None else Activity()
        self._noted_states: dict[str, RobotsState] = {}

    @property
    def robots_fetches(self) -> int:
        """How many robots.txt requests have gone out."""
        return self._robots.fetches

    async def robots_state(self, url: str) -> RobotsState:
        """The robots.txt state in force for ``url``'s origin (fetched when needed)."""
        async with self._robots_slots:
            return await self._robots.state(url)

    async def check(self, urls: Sequence[str], *, reserve: bool = False,
                    agent: str | None = None, ip: str | None = None) -> list[Verdict]:
        """A verdict per URL, in order; at most one URL per host is allowed per call.

        The robots.txt of every origin in the batch is loaded concurrently; then the store
        is asked twice whatever the batch's size: once for what it knows of the hosts, once
        to claim (``reserve``) or look at their slots.
        """
        agent = agent or self.agent
        verdicts: list[Verdict | None] = [None] * len(urls)
        hosts: list[tuple[int, str, str, str]] = []
        public: dict[str, bool] = {}
        for index, url in enumerate(urls):
            try:
                origin, host = split_origin(url)
            except InvalidURL as exc:
                verdicts[index] = Verdict(url, False, str(exc), cause="invalid")
                continue
            if not self.allow_private:
                if host not in public:
                    public[host] = await self._public_hosts.is_public(host)
                if not public[host]:
                    verdicts[index] = Verdict(
                        url, False, f"{host} is a private or loopback address; this server "
                        f"does not fetch from those ({self.private_hint})", cause="invalid")
                    continue
            hosts.append((index, url, origin, host))
        states: dict[str, RobotsState] = {}
        missing: dict[str, str] = {}  # origin -> a URL of it
        for _, url, origin, _ in hosts:
            if origin not in states and origin not in missing:
                state = self._robots.fresh(origin)
                if state is None:
                    missing[origin] = url
                else:
                    states[origin] = state
        if missing:
            loaded = await asyncio.gather(*(self.robots_state(u) for u in missing.values()))
            states.update(zip(missing, loaded, strict=True))

        now = self._clock()
        activity = self.activity
        noted = self._noted_states
        for origin, state in states.items():
            if noted.get(origin) is not state:  # told once per robots.txt state
                noted[origin] = state
                if len(noted) > 100_000:
                    del noted[next(iter(noted))]
                activity.note(split_origin(origin)[1], origin=origin,
                              robots_status=robots_code(state))
        asks: list[tuple[int, str, str, AgentRules]] = []
        slice_ends = time.perf_counter() + MATCH_SLICE_S
        for index, url, origin, host in hosts:
            if time.perf_counter() > slice_ends:
                await asyncio.sleep(0)
                slice_ends = time.perf_counter() + MATCH_SLICE_S
            state = states[origin]
            rules = NO_RULES
            match state:
                case DisallowAll():
                    verdicts[index] = Verdict(url, False, state.reason,
                                              _ms(state.retry_at - now), cause="robots")
                    continue
                case Parsed():
                    if not state.robots.allowed(url, agent, ip=ip):
                        # The deciding rule and its line only for the refusal's message.
                        decision = state.robots.decide(url, agent, ip=ip)
                        verdicts[index] = Verdict(url, False,
                                                  f"Blocked by robots.txt: {decision.reason}",
                                                  cause="robots")
                        continue
                    rules = state.robots.agent_rules(agent, ip=ip, url=url)
                case AllowAll():
                    pass
            asks.append((index, url, host, rules))

        distinct = list(dict.fromkeys(host for _, _, host, _ in asks))
        facts = dict(zip(distinct, await self._store.host_facts(distinct), strict=True))
        candidates: dict[str, list[_Ask]] = {}
        for index, url, host, rules in asks:
            configured, response_time = facts[host]
            delays = delays_for(rules, configured_s=configured,
                                default_s=self.default_delay_s,
                                max_crawl_delay_s=self.max_crawl_delay_s,
                                response_time_s=response_time,
                                adaptive_factor=self.adaptive_factor)
            robots_s = delays.robots_s
            if robots_s is not None and self.robots_delays_s.get(host) != robots_s:
                self.robots_delays_s[host] = robots_s
                # Kept in the store too (only when it changes): GET /delays shows it after
                # a restart, before the host is asked about again.
                await self._store.set_robots_delay(host, robots_s)
            if delays.windows or delays.forbidden:
                opens = earliest_in_windows(now, delays.windows, delays.forbidden)
                if opens is None:
                    verdicts[index] = Verdict(url, False, "robots.txt forbids visits for the "
                                              "foreseeable future (Time-forbidden / "
                                              "Visit-time)", cause="robots")
                    continue
                if opens > now:
                    verdicts[index] = Verdict(url, False, "robots.txt allows visits only at "
                                              "certain times (Visit-time / Time-forbidden)",
                                              _ms(opens - now), cause="delay")
                    activity.note(host, delay_s=delays.interval_s,
                                  delay_source="Visit-time window", next_at=opens)
                    continue
            candidates.setdefault(host, []).append(
                _Ask(index, url, host, delays, delays.interval_s
                     + (self.send_slack_s if delays.interval_s > 0 else 0.0)))

        requests = [(host, tuple(a.interval_s for a in group))
                    for host, group in candidates.items()]
        claims = await self._store.claim_batch(requests, take=reserve)
        for (host, group), claim in zip(candidates.items(), claims, strict=True):
            first = group[0]
            held = claim.held_until
            if held is None:
                activity.note(host, delays=first.delays, delay_source=None,
                              next_at=claim.now + first.interval_s if claim.granted >= 0
                              else claim.ats[0])
            else:
                activity.note(host, delays=first.delays, delay_source="back-off",
                              next_at=claim.ats[0], backoff_until=held)
            for position, ask in enumerate(group):
                if position == claim.granted:
                    verdicts[ask.index] = Verdict(ask.url, True)
                    continue
                wait_ms = _ms(claim.ats[position] - claim.now)
                verdicts[ask.index] = Verdict(ask.url, False,
                                              _wait_reason(host, ask, claim, position), wait_ms,
                                              cause="delay")
        done = [v for v in verdicts if v is not None]
        assert len(done) == len(urls)
        cut = [origin for origin, state in states.items()
               if isinstance(state, Parsed) and state.robots.truncated]
        if cut:
            done = [_warn_if_cut(verdict, cut) for verdict in done]
        return done

    async def standing(self, origins: Sequence[str]) -> list[Standing]:
        """Where each origin's host stands now, for the dashboard: its robots.txt as known
        (never fetched for this), the delays in force for the service's agent, and its slot
        looked at (not taken); two steps of the store for the lot."""
        known = [await self._robots.known(origin) for origin in origins]
        hosts = [split_origin(origin)[1] for origin in origins]
        facts = await self._store.host_facts(hosts)
        all_delays = []
        for entry, (configured, response_time) in zip(known, facts, strict=True):
            state = None if entry is None else entry[0]
            rules = state.robots.agent_rules(self.agent) if isinstance(state, Parsed) \
                else NO_RULES
            all_delays.append(delays_for(rules, configured_s=configured,
                                         default_s=self.default_delay_s,
                                         max_crawl_delay_s=self.max_crawl_delay_s,
                                         response_time_s=response_time,
                                         adaptive_factor=self.adaptive_factor))
        claims = await self._store.claim_batch(
            [(host, (d.interval_s,)) for host, d in zip(hosts, all_delays, strict=True)],
            take=False)
        return [Standing(None if entry is None else entry[0],
                         0 if entry is None else len(entry[1]), delays, claim)
                for entry, delays, claim in zip(known, all_delays, claims, strict=True)]

    async def note_late_start(self, url: str, late_s: float) -> None:
        """The request given ``url``'s slot went out ``late_s`` after it (it had a connection
        to open): the host's next slot counts from when it really went (what the slack
        claimed with the slot did not cover)."""
        late_s -= self.send_slack_s
        if late_s > 0:
            await self._store.shift_start(split_origin(url)[1], late_s)

    async def note_response(self, url: str, status: int, *, elapsed_s: float | None = None,
                            retry_after: str | None = None) -> float | None:
        """What a fetch of ``url`` got: its time feeds the adaptive delay, a 429 or 503 holds
        the host (``Retry-After`` honoured). Returns the pause in seconds, if any."""
        host = split_origin(url)[1]
        now = self._clock()
        until = backoff_until(status, parse_retry_after(retry_after, now), now) \
            if self.backoff else None
        pause = None if until is None else until - now
        await self._store.note_response(host, elapsed_s, pause)
        if until is not None:
            told = f"Retry-After: {retry_after}" if retry_after else "no Retry-After"
            self.activity.note(host, backoff_until=until, next_at=until,
                               delay_source="back-off",
                               backoff_reason=f"the origin answered {status} ({told})")
        return pause
