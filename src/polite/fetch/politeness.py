"""The politeness driver: may these URLs be fetched now, and if not, why and when.

It gathers what the core's decision needs and carries it out: the private-address guard
(a lookup), the robots.txt state from :class:`RobotsFetcher`, what the store knows of the
hosts; :func:`polite.core.politeness.decision.decide` decides each URL, and the slot of
an allowed one is claimed from the store (which may be shared by many nodes). The answers
are typed values (:class:`Answer`); each surface words them its own way. Seed 001's
services only *reflect* the situation; ``reserve=True`` also takes the slot, so that
crawlers which fetch on their own stay polite together.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from polite.clock import Clock
from polite.config import DELAY, FACTOR, Bounds, check_float, check_int
from polite.core._steps import Steps
from polite.core.politeness import (
    DEFAULT_DELAY_S,
    MAX_CRAWL_DELAY_S,
    Allowed,
    Decision,
    Delays,
    Disallowed,
    HostClaim,
    Policy,
    RefusalReason,
    Refused,
    WaitSource,
    WaitUntil,
    backoff_until,
    claimed,
    decide,
    delays_for,
)
from polite.core.politeness.rules import ADAPTIVE_FACTOR, BACKOFF_STATUSES
from polite.core.robots.lifecycle import AllowAll, Parsed, RobotsState, parse_retry_after
from polite.core.robots.model import AgentRules
from polite.errors import InvalidURL
from polite.fetch._steps import stepped
from polite.fetch.activity import Activity, robots_code
from polite.fetch.robots import (
    DECISION_BYTES,
    DECISIONS_BYTES,
    STEPPED_BYTES,
    PublicHosts,
    RobotsFetcher,
    split_origin,
)
from polite.storage.base import Store

NO_RULES = AgentRules()  # no robots.txt in force: no fields from the site
# A host's robots.txt not read yet, as a decision takes it: no rules, the default delays.
NOT_READ = AllowAll("robots.txt not read yet", 0.0, 0.0)
# A robots.txt redirect's hop waits this long at most for its turn: twice the longest
# Crawl-delay honoured, so that a slot a page took just before is always waited for; a
# longer wait (a back-off, a Visit-time window) leaves robots.txt unread for now
# (unreachable, tried again later) rather than holding its callers.
MAX_HOP_WAIT_S = 2 * MAX_CRAWL_DELAY_S
__all__ = ["LEASE_S", "Answer", "Grants", "HostLease", "LateStart", "Politeness", "Standing",
           "lease_length_s", "message", "warning"]


# A request that leaves this little after its slot is not noted (noting is a store write, and
# most requests leave within it); so that such lateness never brings two requests closer than
# the delay at the site, a process that notes lateness claims every slot this much longer
# (``send_slack_s``, at least this).
LATE_UNNOTED_S = 0.001
# How long a slot's lease (``check``'s ``lease_s``) holds its host when its holder never
# says the request is over (it died): a minute, longer than most requests take, and short
# enough that a killed process does not stop a crawl sharing its store for long.
LEASE_S = 60.0
# An end of a host's lease the store could not take (it did not answer) is tried again this
# long after, the pause doubling up to the second figure, until it is taken or the lease has
# run out; given up this much before it does (the store began it a little before the driver
# was told), so that a late end never ends a lease another process took since.
KEPT_RETRY_S = 0.25
KEPT_RETRY_MAX_S = 4.0
KEPT_MARGIN_S = 5.0
# Hosts whose latest slot given is remembered (the oldest forgotten past it): a request
# leaves at most the host's delay after its slot unless the process is swamped, so only the
# last few thousand matter.
MAX_GRANTS = 100_000


class Answer(NamedTuple):
    """One URL's decision as the driver made it: ``now`` is the time it was judged by (the
    store's clock for a slot, which may be another machine's), so a wait is ``at - now``
    whoever renders it; ``cut``: the robots.txt in force was read only to the size cap."""

    url: str
    decision: Decision
    now: float
    cut: bool = False
    # The slot given (``reserve``), numbered: the request that uses it carries the number to
    # the client (:meth:`Politeness.late_start`), which holds it back when the host's slot
    # has been given again before it could leave. 0: none given, or no spacing to keep.
    grant: int = 0
    # The robots.txt state the URL was judged under (``reserve`` only): what the caller
    # may read of the file for the request it makes without asking for the state again.
    robots: RobotsState | None = None

    @property
    def allowed(self) -> bool:
        return type(self.decision) is Allowed

    @property
    def wait_s(self) -> float | None:
        """How long until asking again may be answered otherwise; ``None``: waiting will not
        change the answer."""
        decision = self.decision
        if type(decision) is WaitUntil:
            return max(0.0, decision.at - self.now)
        if type(decision) is Refused and decision.retry_at is not None:
            return max(0.0, decision.retry_at - self.now)
        return None

    @property
    def cause(self) -> str:
        """The family the dashboard counts it in: ``allowed``; ``robots`` (rules, robots.txt
        unavailable, Time-forbidden); ``delay`` (spacing, back-off, Visit-time); ``invalid``
        (a bad URL, a private address)."""
        decision = self.decision
        if type(decision) is Allowed:
            return "allowed"
        if type(decision) is WaitUntil:
            return "delay"
        if type(decision) is Refused and decision.reason in _INVALID:
            return "invalid"
        return "robots"


_INVALID = (RefusalReason.INVALID_URL, RefusalReason.PRIVATE_ADDRESS)


def lease_length_s(deadline_s: float, at_most: float | None = None) -> float:
    """How long a request's lease of its host (:meth:`Politeness.check`'s ``lease_s``) holds
    at most: :data:`LEASE_S` past the request's ``deadline_s``, so that it never lapses while
    the request is out, but no longer than ``at_most`` when that is shorter (a crawl worker's
    URLs are held that long: one killed mid-request keeps its host from the others no longer
    than its URLs)."""
    length = deadline_s + LEASE_S
    return length if at_most is None or at_most >= length else at_most


class Standing(NamedTuple):
    """A host as :meth:`Politeness.standing` sees it."""

    robots: RobotsState | None  # None: never fetched
    robots_bytes: int
    delays: Delays
    slot: HostClaim  # ats[0]: when its next request may go; held_until: a back-off's end


def _ms(seconds: float) -> int:
    return max(0, math.ceil(seconds * 1000))


def message(answer: Answer) -> str | None:
    """Why ``answer`` is not a yes, in words (``None`` for a yes): what the REST API sends as
    ``error``, the proxy as its refusal's body, the drop-ins as their exceptions' reason."""
    decision = answer.decision
    if type(decision) is Allowed:
        return None
    if type(decision) is Disallowed:
        return f"Blocked by robots.txt: {decision.explanation}"
    if type(decision) is Refused:
        if decision.reason is RefusalReason.NO_VISIT_TIME:
            return ("robots.txt forbids visits for the foreseeable future (Time-forbidden / "
                    "Visit-time)")
        return decision.detail
    assert type(decision) is WaitUntil
    host = split_origin(answer.url)[1]
    match decision.source:
        case WaitSource.VISIT_TIME:
            return "robots.txt allows visits only at certain times (Visit-time / Time-forbidden)"
        case WaitSource.IN_FLIGHT:
            return (f"another request to {host} is in flight; one at a time (ask again in "
                    f"{_ms(decision.at - answer.now)} milliseconds).")
        case WaitSource.BACKOFF:
            return (f"{host} asked for a pause (429 or 503, Retry-After honoured): no request "
                    f"before {_ms(decision.at - answer.now)} milliseconds from now (back-off).")
    said = (f"There must be a delay of {_ms(decision.interval_s)} milliseconds between "
            f"requests to {host} ({decision.field or decision.source})")
    if decision.behind:
        return f"{said}; another URL of {host} in this call takes the slot."
    return said + "."


def warning(answer: Answer) -> str | None:
    """What to add to ``answer``: rules past the size cap of its robots.txt were not read,
    so the answer may not be the site's."""
    if not answer.cut:
        return None
    origin = split_origin(answer.url)[0]
    return (f"{origin}/robots.txt is longer than the size cap and was read only that far; "
            "rules after it are not applied (--max-bytes)")


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
        robots_uses_slot: bool = False,
        grants: Grants | None = None,
    ) -> None:
        # The last check of what every surface checked already: a NaN slips through every
        # comparison the spacing makes, and politeness is off (polite serve with
        # --adaptive-factor nan let every request through).
        for knob, value, bounds in (("default_delay_s=", default_delay_s, DELAY),
                                    ("max_crawl_delay_s=", max_crawl_delay_s, DELAY),
                                    ("adaptive_factor=", adaptive_factor, FACTOR),
                                    ("send_slack_s=", send_slack_s, DELAY)):
            check_float(value, bounds, knob=knob)
        check_int(robots_concurrency, Bounds(minimum=1, maximum=10_000),
                  knob="robots_concurrency=")
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
        self.policy = Policy(default_delay_s, max_crawl_delay_s, adaptive_factor,
                             robots_uses_slot)
        self.backoff = backoff  # 429 and 503 pause the host
        self.robots_delays_s: dict[str, float] = {}  # host -> what its robots.txt asks
        self._robots_slots = asyncio.Semaphore(robots_concurrency)
        # what this node sees, for the dashboard (the proxy and the API count into it too)
        self.activity = activity if activity is not None else Activity()
        self._noted_states: dict[str, tuple[type, float, str]] = {}
        self.grants = grants if grants is not None else Grants()
        # host -> until when: ends of its lease the store could not take (HostLease), to be
        # done once it answers again (end_kept), tried again meanwhile by one task
        self._kept: dict[str, float] = {}
        self._retrying: asyncio.Future[None] | None = None
        # origin -> the slot its robots.txt was last read in (robots_uses_slot), numbered as
        # Grants numbers it, and until when a stale copy waits for a page (robots_state)
        self._robots_turns: dict[str, tuple[int, float]] = {}

    @property
    def default_delay_s(self) -> float:
        return self.policy.default_delay_s

    @property
    def max_crawl_delay_s(self) -> float:
        return self.policy.max_crawl_delay_s

    @property
    def adaptive_factor(self) -> float:
        return self.policy.adaptive_factor

    @property
    def robots_fetches(self) -> int:
        """How many robots.txt requests have gone out."""
        return self._robots.fetches

    async def robots_state(self, url: str) -> RobotsState:
        """The robots.txt state in force for ``url``'s origin (fetched when needed). Each
        redirect's hop of its request waits for its turn at its host as a page does
        (:meth:`hop_turn`). With the policy's ``robots_uses_slot``, fetching it takes the
        host's slot, as a page would: the spacing runs from that request too, or the first
        page would follow it at once (seed 000, 5); read again once stale, it waits for the
        slot as a page does (the copy known meanwhile in force), and never takes two of the
        host's slots in a row: a page has the next one after it."""
        if not self.policy.robots_uses_slot:
            async with self._robots_slots:
                return await self._robots.state(url, self.hop_turn)
        origin, host = split_origin(url)
        before = self._robots.fresh(origin)
        if before is not None:
            return before
        known = await self._robots.known(origin)  # memory or the store: never a request
        if known is not None and self._robots.fresh(origin) is not None:
            return known[0]  # the store's copy, in force
        # Read for the first time, or again once stale: the file is asked for in a slot of
        # its own, as any request (the host's slot may be running from a page that just
        # went). A stale copy stays in force until the slot is free; so does it when the
        # host's last slot was robots.txt's own: a copy that goes stale within one delay
        # of its read (no-cache, read again after a minute, and a Crawl-delay of a minute)
        # would otherwise be read again in every slot, and no page ever go. A first read
        # goes whether the slot is free or not: nothing of the host can be decided before.
        if known is not None and self._page_owed(origin, host):
            return known[0]
        target = origin + "/robots.txt"
        asked = time.monotonic()
        (turn,) = await self._answer([target], True, self.agent, None,
                                     {origin: NOT_READ if known is None else known[0]},
                                     obey_rules=False)
        if known is not None and not turn.allowed:
            return known[0]
        noted = not turn.allowed

        async def hop_turn(redirected: str, hop: str) -> LateStart | str:
            # A redirect's hop is spaced from when robots.txt's answer came, not from its
            # slot: a request that left late (a busy machine) would otherwise have its hop
            # reach the site that much less than the delay after it.
            nonlocal noted
            if not noted:
                noted = True
                await self.note_late_start(target, time.monotonic() - asked)
            return await self.hop_turn(redirected, hop)

        async with self._robots_slots:
            state = await self._robots.state(url, hop_turn)
        if turn.allowed:
            # the spacing runs from when its answer was in
            await self.note_late_start(target, time.monotonic() - asked)
            if type(turn.decision) is Allowed:
                self._robots_turn(origin, host, turn.decision.interval_s)
        return state

    async def hop_turn(self, asked: str, target: str) -> LateStart | str:
        """The turn of a robots.txt redirect's hop to ``target`` (``asked``: the URL whose
        answer redirected), taken as a page's is, waiting for it: a hop is a request like
        any other to its host (one to the same host would otherwise reach it moments after
        the last). The request redirected, when it took no slot (robots.txt takes none but
        in the crawler) and went to the same host, takes it now that its answer is in, so
        that the hop is spaced from it. Judged by the delays of the copy known of the
        target's robots.txt (none read: the default); its rules are not read for this (the
        file being fetched may be the one it would need). Why it may not go, when the host
        asks to wait longer than :data:`MAX_HOP_WAIT_S`, or refuses it (a private
        address)."""
        try:
            origin, host = split_origin(target)
            asked_origin, asked_host = split_origin(asked)
        except InvalidURL as exc:
            return str(exc)
        if not self.policy.robots_uses_slot and asked_host == host:
            await self._answer([asked], True, self.agent, None,
                               {asked_origin: await self._known_state(asked_origin)},
                               obey_rules=False)
        waited = 0.0
        while True:
            (found,) = await self._answer([target], True, self.agent, None,
                                          {origin: await self._known_state(origin)},
                                          obey_rules=False)
            if found.allowed:
                return self.late_start(target, grant=found.grant)
            pause = found.wait_s
            if pause is None:
                return message(found) or "not allowed"
            if waited + pause > MAX_HOP_WAIT_S:
                return (f"{host} asks to wait {pause:.0f} s; more than {MAX_HOP_WAIT_S:.0f} "
                        "s for a redirect of robots.txt")
            await asyncio.sleep(pause)
            waited += pause

    async def _known_state(self, origin: str) -> RobotsState:
        """The copy known of ``origin``'s robots.txt, fresh or not (never fetched); none
        read: no rules, the default delays."""
        known = await self._robots.known(origin)
        return NOT_READ if known is None else known[0]

    def _robots_turn(self, origin: str, host: str, interval_s: float) -> None:
        """``origin``'s robots.txt was just read in a slot of ``host`` (robots_uses_slot),
        the last slot given (a hop of its redirects may have had it): the next slot of the
        host goes to a page, its copy in force meanwhile however stale, until two of the
        host's delays have passed (a page refused by the copy takes no slot, and must not
        keep the copy in force for ever)."""
        grant = self.grants.latest(host)
        if not grant or interval_s <= 0:
            return  # no spacing to keep: no slot for a page to be starved of
        turns = self._robots_turns
        turns.pop(origin, None)
        turns[origin] = (grant, self._clock() + 2 * interval_s)
        if len(turns) > MAX_GRANTS:
            del turns[next(iter(turns))]

    def _page_owed(self, origin: str, host: str) -> bool:
        """Whether the last slot of ``host`` went to ``origin``'s robots.txt, no page has
        had one since, and not so long ago that none will (:meth:`_robots_turn`)."""
        turn = self._robots_turns.get(origin)
        if turn is None:
            return False
        grant, until = turn
        if self.grants.asked_at(host, grant) is not None and self._clock() < until:
            return True
        del self._robots_turns[origin]
        return False

    async def check(self, urls: Sequence[str], *, reserve: bool = False,
                    agent: str | None = None, ip: str | None = None,
                    obey_rules: bool = True, lease_s: float | None = None) -> list[Answer]:
        """An answer per URL, in order; at most one URL per host is allowed per call.

        What the decisions need is gathered first: the private-address guard, the robots.txt
        of every origin in the batch (loaded concurrently) and, in one step of the store,
        what it knows of the hosts; then each URL is decided once
        (:func:`~polite.core.politeness.decision.decide`) and the slots of those allowed
        are claimed (``reserve``) or looked at, in one more step of the store.
        ``obey_rules`` off: robots.txt's rules, or its being unavailable, refuse nothing (a
        person's own request); its delays are kept all the same. ``lease_s`` (with
        ``reserve``): a slot granted also holds its host until the response is noted
        (:meth:`note_response` with ``ends_lease``, or :meth:`end_lease`) or ``lease_s``
        has passed: no other request of the host is granted meanwhile, in any process
        sharing the store (:meth:`~polite.storage.base.SlotStore.claim_batch`).
        """
        if len(urls) == 1:
            return [await self.check_one(urls[0], reserve=reserve, agent=agent, ip=ip,
                                         obey_rules=obey_rules, lease_s=lease_s)]
        return await self._answer(urls, reserve, agent or self.agent, ip, {}, obey_rules,
                                  lease_s if reserve else None)

    async def _answer(self, urls: Sequence[str], reserve: bool, agent: str, ip: str | None,
                      states: dict[str, RobotsState], obey_rules: bool = True,
                      lease_s: float | None = None) -> list[Answer]:
        """:meth:`check`, with the robots.txt ``states`` already known (by origin)."""
        answers: list[Answer | None] = [None] * len(urls)
        hosts: list[tuple[int, str, str, str]] = []
        public: dict[str, bool] = {}
        for index, url in enumerate(urls):
            try:
                origin, host = split_origin(url)
            except InvalidURL as exc:
                answers[index] = Answer(url, Refused(RefusalReason.INVALID_URL, str(exc)),
                                        self._clock())
                continue
            if not self.allow_private:
                if host not in public:
                    public[host] = await self._public_hosts.is_public(host)
                if not public[host]:
                    answers[index] = Answer(url, Refused(
                        RefusalReason.PRIVATE_ADDRESS,
                        f"{host} is a private or loopback address; this server does not "
                        f"fetch from those ({self.private_hint})"), self._clock())
                    continue
            hosts.append((index, url, origin, host))
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
        distinct = [hosts[0][3]] if len(hosts) == 1 else \
            list(dict.fromkeys(host for _, _, _, host in hosts))
        facts = dict(zip(distinct, await self._store.host_facts(distinct), strict=True))

        now = self._clock()
        cut: set[str] = set()
        for origin, state in states.items():
            self._note_state(origin, state)
            if isinstance(state, Parsed) and state.robots.truncated:
                cut.add(origin)
            preparing = self._preparing(state, agent, ip)
            if preparing is not None:
                await stepped(preparing)
        policy = self.policy
        slack = self.send_slack_s
        candidates: dict[str, list[tuple[int, str, str, Allowed]]] = {}
        spent = 0  # the bytes of the files decided in since the loop's last turn
        for index, url, origin, host in hosts:
            if spent >= DECISIONS_BYTES:
                await asyncio.sleep(0)
                spent = 0
            state = states[origin]
            spent += max(DECISION_BYTES,
                         state.robots.size if isinstance(state, Parsed) else 0)
            decision = decide(url, state, facts[host], policy, now, agent=agent,
                              ip=ip, obey_rules=obey_rules)
            if type(decision) is not Allowed:
                answers[index] = Answer(url, decision, now, origin in cut, 0,
                                        state if reserve else None)
                if type(decision) is WaitUntil:
                    await self._note_window(url, host, states[origin], decision, agent, ip)
                continue
            robots_s = decision.delays.robots_s
            if robots_s is not None:
                await self._note_robots_delay(host, robots_s)
            if slack > 0 and decision.interval_s > 0:
                # the slot claimed is longer by the slack (see send_slack_s)
                decision = Allowed(decision.interval_s + slack, decision.delays)
            candidates.setdefault(host, []).append((index, url, origin, decision))

        requests = [(host, (group[0][3].interval_s,) if len(group) == 1
                     else tuple([c[3].interval_s for c in group]))
                    for host, group in candidates.items()]
        asked = 0.0
        if reserve:
            # A request of the host that left late is noted first: the slot then counts from
            # when it really went.
            landing = self.grants.landing(candidates)
            if landing:
                await asyncio.wait(landing)
            # Read before the store reads its clock for the slot: a request's lateness
            # counts from here (LateStart), never from later, whatever holds the answer up
            # on its way to the client (a busy core, a garbage collection, the store's
            # write).
            asked = time.monotonic()
        claims = await self._store.claim_batch(requests, take=reserve, lease_s=lease_s)
        for (host, group), claim in zip(candidates.items(), claims, strict=True):
            self._note_claim(host, group[0][3], claim)
            for position, (index, url, origin, allowed) in enumerate(group):
                decision = claimed(allowed, claim, position)
                grant = self.grants.give(host, asked) if reserve \
                    and type(decision) is Allowed and decision.interval_s > 0 else 0
                answers[index] = Answer(url, decision, claim.now, origin in cut, grant,
                                        states[origin] if reserve else None)
        if None in answers:
            raise AssertionError("a URL was left without an answer")
        return answers  # type: ignore[return-value]

    @staticmethod
    def _preparing(state: RobotsState, agent: str, ip: str | None) -> Steps[None] | None:
        """The steps that build another agent's matcher of a large file (the fetcher built
        its own agent's), for the caller to run with the event loop given back between
        them rather than in the first decision's one hold; ``None`` for a small file, whose
        matcher its first decision builds at once (no coroutine asked for it)."""
        if isinstance(state, Parsed) and state.robots.size >= STEPPED_BYTES:
            return state.robots.prepare(agent, ip=ip)
        return None

    async def check_one(self, url: str, *, reserve: bool = False, agent: str | None = None,
                        ip: str | None = None, obey_rules: bool = True,
                        lease_s: float | None = None,
                        split: tuple[str, str] | None = None) -> Answer:
        """:meth:`check` of one URL, its answer alone, as the proxy and most callers ask: the
        same steps as a batch's, without its bookkeeping (a third of the check's time for
        one URL), nor a list around the answer. ``split``: ``split_origin(url)``, when the
        caller has it already."""
        agent = agent or self.agent
        if not reserve:
            lease_s = None
        if split is not None:
            origin, host = split
        else:
            try:
                origin, host = split_origin(url)
            except InvalidURL as exc:
                return Answer(url, Refused(RefusalReason.INVALID_URL, str(exc)), self._clock())
        if not self.allow_private and not await self._public_hosts.is_public(host):
            return Answer(url, Refused(
                RefusalReason.PRIVATE_ADDRESS,
                f"{host} is a private or loopback address; this server does not "
                f"fetch from those ({self.private_hint})"), self._clock())
        state = self._robots.fresh(origin)
        if state is None:
            state = await self.robots_state(url)
        (facts,) = await self._store.host_facts((host,))
        cut = False
        if type(state) is Parsed:  # _preparing's test, and the cap's, read off one file
            robots = state.robots
            if robots.size >= STEPPED_BYTES:
                await stepped(robots.prepare(agent, ip=ip))
            cut = robots.truncated
        now = self._clock()
        self._note_state(origin, state)
        decision = decide(url, state, facts, self.policy, now, agent=agent, ip=ip,
                          obey_rules=obey_rules)
        if type(decision) is not Allowed:
            if type(decision) is WaitUntil:
                await self._note_window(url, host, state, decision, agent, ip)
            return Answer(url, decision, now, cut, 0, state if reserve else None)
        robots_s = decision.delays.robots_s
        if robots_s is not None:
            await self._note_robots_delay(host, robots_s)
        # A named tuple's field read by its name is a descriptor's call in Python 3.11 (never
        # specialized): the interval is read once.
        interval_s = decision.interval_s
        slack = self.send_slack_s
        if slack > 0 and interval_s > 0:
            interval_s += slack
            decision = Allowed(interval_s, decision.delays)
        asked = 0.0
        if reserve:
            landing = self.grants.landing((host,))
            if landing:
                await asyncio.wait(landing)
            if interval_s > 0:  # a slot to number below (none without spacing)
                asked = time.monotonic()  # the lateness counts from here, as in a batch
        (claim,) = await self._store.claim_batch([(host, (interval_s,))],
                                                  take=reserve, lease_s=lease_s)
        self._note_claim(host, decision, claim)
        if claim.granted < 0:  # not granted: what holds it (claimed); granted, it goes as is
            return Answer(url, claimed(decision, claim), claim.now, cut, 0,
                          state if reserve else None)
        grant = self.grants.give(host, asked) if reserve and interval_s > 0 else 0
        return Answer(url, decision, claim.now, cut, grant, state if reserve else None)

    def _note_state(self, origin: str, state: RobotsState) -> None:
        """The activity told of ``origin``'s robots.txt state, once per state: what tells
        the states apart is kept, not the state (a parsed file would stay in memory past
        the fetcher's byte budget)."""
        noted = self._noted_states
        token = (type(state), state.fetched_at, robots_code(state))
        if noted.get(origin) != token:
            noted[origin] = token
            if len(noted) > 100_000:
                del noted[next(iter(noted))]
            self.activity.note(split_origin(origin)[1], origin=origin,
                               robots_status=robots_code(state))

    async def _note_window(self, url: str, host: str, state: RobotsState,
                           decision: WaitUntil, agent: str, ip: str | None) -> None:
        """A Visit-time window not yet open, told to the activity, and what the site asks
        kept for GET /delays."""
        self.activity.note(host, delay_s=decision.interval_s,
                           delay_source="Visit-time window", next_at=decision.at)
        if isinstance(state, Parsed):
            asked = state.robots.delay_s(agent, ip=ip, url=url)
            if asked is not None:
                await self._note_robots_delay(host, min(asked, self.policy.max_crawl_delay_s))

    def _note_claim(self, host: str, first: Allowed, claim: HostClaim) -> None:
        """What the store answered for ``host``'s slot (``first``: its first candidate),
        told to the activity."""
        held = claim.held_until
        if held is None:
            self.activity.note(host, delays=first.delays, delay_source=None,
                               next_at=claim.now + first.interval_s if claim.granted >= 0
                               else claim.ats[0])
        else:
            self.activity.note(host, delays=first.delays, delay_source="back-off",
                               next_at=claim.ats[0], backoff_until=held)

    async def _note_robots_delay(self, host: str, robots_s: float) -> None:
        if self.robots_delays_s.get(host) != robots_s:
            self.robots_delays_s[host] = robots_s
            # Kept in the store too (only when it changes): GET /delays shows it after a
            # restart, before the host is asked about again.
            await self._store.set_robots_delay(host, robots_s)

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

    def is_late(self, late_s: float) -> bool:
        """Whether a request that left ``late_s`` after its slot must be noted
        (:meth:`note_late_start`): later than :data:`LATE_UNNOTED_S` and the slack."""
        return late_s > max(LATE_UNNOTED_S, self.send_slack_s)

    async def note_late_start(self, url: str, late_s: float, noted_s: float = 0.0) -> None:
        """The request given ``url``'s slot went out ``late_s`` after it (it had a connection
        to open): the host's next slot counts from when it really went (what the slack
        claimed with the slot did not cover). ``noted_s``: the lateness an earlier note of
        the same request told (it was written again, on a new connection)."""
        late_s -= max(self.send_slack_s, noted_s)
        if late_s > 0:
            await self._store.shift_start(split_origin(url)[1], late_s)

    def late_start(self, url: str, waited_s: float = 0.0, grant: int = 0) -> LateStart:
        """What the client asks as ``url``'s request is about to leave (its ``leaving``):
        it notes the request's lateness, or holds it back when the slot it was given
        (``grant``, :attr:`Answer.grant`) has been given again. ``waited_s``: how long after
        its slot the request was handed to the client."""
        return LateStart(self, url, waited_s, grant)

    def note_leaving_late(self, url: str, late_s: float, noted_s: float = 0.0
                          ) -> asyncio.Future[None]:
        """:meth:`note_late_start`, begun now for a request leaving as this is called; no
        slot of its host is given by this process until the note has landed."""
        noting = asyncio.ensure_future(self.note_late_start(url, late_s, noted_s))
        self.grants.shifting(split_origin(url)[1], noting)
        return noting

    async def note_response(self, url: str, status: int, *, elapsed_s: float | None = None,
                            retry_after: str | None = None, ends_lease: bool = False,
                            host: str | None = None) -> float | None:
        """What a fetch of ``url`` got: its time feeds the adaptive delay, a 429 or 503 holds
        the host (``Retry-After`` honoured). Returns the pause in seconds, if any.
        ``ends_lease``: the request held its host's lease (``check``'s ``lease_s``), which
        ends as the pause begins. ``host``: ``url``'s, when the caller has it already."""
        if host is None:
            host = split_origin(url)[1]
        until: float | None = None
        pause: float | None = None
        if self.backoff and status in BACKOFF_STATUSES:  # the clock is read for those alone
            now = self._clock()
            until = backoff_until(status, parse_retry_after(retry_after, now), now)
            pause = None if until is None else until - now
        await self._store.note_response(host, elapsed_s, pause, ends_lease=ends_lease)
        if until is not None:
            told = f"Retry-After: {retry_after}" if retry_after else "no Retry-After"
            self.activity.note(host, backoff_until=until, next_at=until,
                               delay_source="back-off",
                               backoff_reason=f"the origin answered {status} ({told})")
        return pause

    async def end_lease(self, url: str) -> None:
        """The request that held the lease of ``url``'s host got no response (it failed, or
        never left): the host is free for the next request."""
        await self._store.note_response(split_origin(url)[1], None, None, ends_lease=True)

    def lease(self, answer: Answer, lease_s: float | None) -> HostLease:
        """The lease of ``answer``'s host that :meth:`check` took with its slot (``reserve``
        and ``lease_s``): held when the answer allows the request and ``lease_s`` is given,
        a lease of nothing otherwise. It ends with the request's answer
        (:meth:`HostLease.note_response`) or as the ``async with`` block it guards is left."""
        if lease_s is None or type(answer.decision) is not Allowed:
            return HostLease(self, answer.url)
        host = split_origin(answer.url)[1]
        if self._kept:  # an end kept of the host's last lease: that one is over
            self._kept.pop(host, None)
        return HostLease(self, answer.url, host,
                         self._clock() + lease_s - min(KEPT_MARGIN_S, lease_s / 2))

    def keep_end(self, host: str, until: float) -> None:
        """The store could not take the end of ``host``'s lease (it did not answer): it is
        done once the store answers again (:meth:`end_kept`, tried now and then meanwhile),
        unless the lease has run out by then (``until``, this driver's clock)."""
        self._kept[host] = until
        if self._retrying is None or self._retrying.done():
            self._retrying = asyncio.ensure_future(self._retry_kept())

    async def end_kept(self) -> None:
        """End the leases whose end the store could not take (:meth:`keep_end`); raises
        what the store raised when it still does not answer (those not ended are kept)."""
        kept = self._kept
        if not kept:
            return
        now = self._clock()
        for host, until in list(kept.items()):
            if kept.get(host) != until:
                continue  # a new lease of the host was taken meanwhile
            del kept[host]
            if until <= now:
                continue  # run out: the host is free, and may be another's lease now
            try:
                await self._store.note_response(host, None, None, ends_lease=True)
            except BaseException:
                kept.setdefault(host, until)
                raise

    async def _retry_kept(self) -> None:
        pause = KEPT_RETRY_S
        while self._kept:
            await asyncio.sleep(pause)
            try:
                await self.end_kept()
            except Exception:  # the store does not answer yet: the ends are kept
                pause = min(pause * 2, KEPT_RETRY_MAX_S)


class HostLease:
    """A host's lease, taken with a request's slot (:meth:`Politeness.lease`): no other
    request of the host is granted, in any process sharing the store, until it ends. It
    ends with the request's answer (:meth:`note_response`, in the same step of the store as
    a 429's or 503's pause) or, whichever other way the request ends (no answer, held back,
    a 402, an error, a cancel), as the ``async with`` block it guards is left. An end the
    store could not take (it did not answer) is kept by the driver and done once it answers
    again (:meth:`Politeness.keep_end`), rather than keeping the host from every process
    until the lease runs out."""

    __slots__ = ("_politeness", "held", "host", "until", "url")

    def __init__(self, politeness: Politeness, url: str, host: str = "",
                 until: float = 0.0) -> None:
        self._politeness = politeness
        self.url = url
        self.host = host  # "": a lease of nothing (none was taken)
        self.until = until  # when it has surely run out (the driver's clock)
        self.held = bool(host)

    async def __aenter__(self) -> HostLease:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self.held:
            await self.end()

    async def end(self) -> None:
        """End the lease now, if it is held: the request got no answer, or never left."""
        if not self.held:
            return
        self.held = False
        try:
            await self._politeness.end_lease(self.url)
        except BaseException:
            self._politeness.keep_end(self.host, self.until)
            raise

    async def note_response(self, status: int, *, elapsed_s: float | None = None,
                            retry_after: str | None = None, batch: bool = False
                            ) -> float | None:
        """:meth:`Politeness.note_response` for the request's answer, ending the lease in
        the same step. ``batch``: the step is part of a batch of the store's not yet
        written (the crawler settles a page in one): the lease counts as ended once the
        caller says it is written (:meth:`written`); until then, leaving the block ends it."""
        pause = await self._politeness.note_response(self.url, status, elapsed_s=elapsed_s,
                                                     retry_after=retry_after,
                                                     ends_lease=self.held)
        if not batch:
            self.held = False
        return pause

    def written(self) -> None:
        """The batch that noted the answer (:meth:`note_response`'s ``batch``) is written:
        the lease is over."""
        self.held = False


class Grants:
    """The slots this process gave, numbered (:attr:`Answer.grant`), and the notes of late
    starts still on their way to the store: what tells a request about to leave whether
    its host's slot was given again meanwhile (:class:`LateStart`). Drivers that share a
    store within a process share one (the survey makes a new driver now and then)."""

    def __init__(self) -> None:
        # host -> its latest slot's number, and when it was asked for (time.monotonic())
        self._latest: dict[str, tuple[int, float]] = {}
        self._count = 0
        self._shifting: dict[str, asyncio.Future[None]] = {}

    def give(self, host: str, asked: float) -> int:
        """Number the slot of ``host`` just given, asked for at ``asked`` (time.monotonic(),
        no later than the slot's start): its latest."""
        self._count += 1
        latest = self._latest
        latest.pop(host, None)
        latest[host] = (self._count, asked)
        if len(latest) > MAX_GRANTS:
            del latest[next(iter(latest))]
        return self._count

    def latest(self, host: str) -> int:
        """The number of ``host``'s latest slot (0: none, or forgotten)."""
        latest = self._latest.get(host)
        return 0 if latest is None else latest[0]

    def given_again(self, host: str, grant: int) -> bool:
        """Whether ``host``'s slot was given again after slot ``grant``: a request of the
        earlier slot that left now could reach the site at the moment the later one does."""
        latest = self._latest.get(host)
        return latest is not None and latest[0] != grant

    def asked_at(self, host: str, grant: int) -> float | None:
        """When slot ``grant`` of ``host`` was asked for (time.monotonic()), while it is
        the host's latest; None once it is not, or forgotten."""
        latest = self._latest.get(host)
        return latest[1] if latest is not None and latest[0] == grant else None

    def shifting(self, host: str, noting: asyncio.Future[None]) -> None:
        """``noting`` moves ``host``'s start in the store: no slot of the host is given
        until it has landed (:meth:`landing`)."""
        self._shifting[host] = noting

        def landed(_: object) -> None:
            if self._shifting.get(host) is noting:
                del self._shifting[host]

        noting.add_done_callback(landed)

    def landing(self, hosts: Iterable[str]) -> list[asyncio.Future[None]]:
        """The notes of these hosts' late starts not yet in the store."""
        shifting = self._shifting
        if not shifting:
            return []
        # a loop, not a comprehension: that is a function made and called, and a cell made
        # for what it reads at every call, this one's early return too
        landing = []
        for host in hosts:
            if host in shifting:
                landing.append(shifting[host])
        return landing


class LateStart:
    """Asked as a request is about to leave (:meth:`Politeness.late_start`; the client's
    ``leaving``), and told once the client has written it, not once its answer is in.

    A request can leave later than its slot (a place among the requests in flight to wait
    for, a connection to open, a busy loop). Late by less than the host's delay, its
    lateness is noted at once and the host's next slot counts from when it really went.
    Late by more, the next slot may already have been given to a request that went on
    time: no note takes that back, so the late request is held back and takes a new turn.
    (Noted after the answer, a slow answer left the next request free to go at the slot
    counted from the late one's grant; under a busy loop two requests came 6 ms apart where
    50 ms was asked.) Lateness counts from the moment the slot was asked for, not from the
    client's call: a process held up between the two (a busy core, a garbage collection)
    went unnoted, and the next request came that much less than the delay after it.
    Requests of other processes sharing the store are not seen here: the slack of a shared
    store's slots covers them."""

    def __init__(self, politeness: Politeness, url: str, waited_s: float,
                 grant: int = 0) -> None:
        self._politeness = politeness
        self._url = url
        self._waited_s = waited_s
        self._grant = grant
        self._noting: list[asyncio.Future[None]] = []
        self._slot_at = 0.0  # time.monotonic() of the slot, as the last question saw it
        self._noted_s = 0.0  # the lateness told so far (a request written again: the rest)

    def __call__(self, late_s: float) -> bool:
        now = time.monotonic()
        slot_at = now - late_s - self._waited_s
        if self._grant:
            grants = self._politeness.grants
            host = split_origin(self._url)[1]
            if grants.given_again(host, self._grant):
                return False
            # From the slot itself: the time between the slot and the client's call (the
            # store's answer on its way, a busy core, a garbage collection) counts too.
            asked = grants.asked_at(host, self._grant)
            if asked is not None:
                slot_at = min(slot_at, asked)
        self._slot_at = slot_at
        return True

    def left(self) -> None:
        # Counted once the request is written, not when it was asked whether it may go: a
        # process held up between the two (measured: 7 ms on a loaded machine) sent it
        # that much later than it told, and the next request came that much less than the
        # delay after it. Noted at once, before any other task asks for the host's slot.
        politeness = self._politeness
        late_s = time.monotonic() - self._slot_at
        if late_s > self._noted_s and politeness.is_late(late_s):
            self._noting.append(politeness.note_leaving_late(self._url, late_s,
                                                             self._noted_s))
            self._noted_s = late_s

    async def noted(self) -> None:
        """Wait for the notes sent (a store that failed to take one raises here)."""
        for noting in self._noting:
            await noting
