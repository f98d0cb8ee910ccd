"""What ``polite mcp``'s tools do, apart from the protocol: fetch a page for an agent the
polite way, or say why not and when to ask again.

Every request goes through polite's one politeness driver (:class:`Politeness`: the
private-address guard, robots.txt read by polite's status table, the host's slot in the
store that every process sharing it keeps) and its one HTTP client (signatures, the site's
REGP header fields); each redirect's target is asked about like the first URL. What comes
back is a value, :class:`Given` or :class:`NotGiven`, with the reasons in ``notes``; the
server words it for the agent.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from polite.core.politeness import Allowed, Disallowed, RefusalReason, Refused, WaitUntil
from polite.core.robots.lifecycle import AllowAll, DisallowAll, Parsed, RobotsState
from polite.core.robots.meta import RobotsDirectives, parse_meta_tags, parse_x_robots_tag
from polite.core.robots.meta import combine as combine_directives
from polite.core.robots.usage import (
    MAX_TDMREP_BYTES,
    TDMREP_PATH,
    Preferences,
    TdmRep,
    combine,
    from_headers,
    from_html,
    from_robots,
    purpose_json,
    read_tdmrep_steps,
)
from polite.core.urls import split_origin
from polite.errors import InvalidURL
from polite.fetch._budget import NO_TDMREP, TDMREP_MEMORY_BYTES, LruBudget, tdmrep_files
from polite.fetch._steps import stepped
from polite.fetch.http import FetchResult, HttpClient
from polite.fetch.politeness import Answer, Politeness, lease_length_s, message
from polite.fetch.redirects import MAX_REDIRECTS, redirect_target
from polite.fetch.robots import RobotsFetcher

__all__ = ["FetchSettings", "Given", "NotGiven", "PoliteFetch", "Verdict"]

HTML_TYPES = ("text/html", "application/xhtml+xml")
# A wait is slept a little past the slot the store gave (timer rounding): the store judges
# the slot by its own clock.
WAKE_MARGIN_S = 0.005
# TDMRep states a reservation of text and data mining: train-ai alone (polite's vocabulary
# table); for another purpose its well-known file is not asked for.
TDMREP_PURPOSES = ("train-ai",)
PERSON = ("a person asked for this page themselves: robots.txt governs automatic fetches, "
          "not a person's own request, so it is fetched all the same")


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """How pages are fetched for an agent (``polite mcp``'s options)."""

    agent: str = "polite-mcp"  # the robots.txt product token
    purpose: str = "ai-input"  # what the pages are for: the AI-usage preferences applied
    max_wait_s: float = 20.0  # a fetch that would wait longer answers with the retry time
    max_body_bytes: int = 5 * 1024 * 1024  # a body's cap, counted decoded
    fetch_deadline_s: float = 30.0  # one request, however slowly its bytes drip
    max_redirects: int = MAX_REDIRECTS
    # sites' tdmrep.json files kept compiled, least recently used first out
    tdmrep_memory_bytes: int = TDMREP_MEMORY_BYTES


@dataclass(frozen=True, slots=True)
class Given:
    """A page fetched and given to the agent: its final URL, its ``content`` (markdown of
    the readable part, or the body as text), ``prefix`` (the reference's words for content
    that is not HTML) and ``notes``: why it was given (robots.txt, waits, redirects, the
    AI-usage preferences, META robots and X-Robots-Tag)."""

    url: str
    status: int
    content: str
    prefix: str = ""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NotGiven:
    """Nothing given: ``why`` (the rule, line or source that refused it) and
    ``retry_after_s`` when asking again later may be answered otherwise."""

    url: str
    why: str
    retry_after_s: float | None = None
    notes: tuple[str, ...] = ()

    @property
    def retry_at(self) -> str | None:
        """When to ask again, as an ISO time (UTC)."""
        if self.retry_after_s is None:
            return None
        at = datetime.fromtimestamp(time.time() + self.retry_after_s, UTC)
        return at.isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Verdict:
    """:meth:`PoliteFetch.may_fetch`'s answer, nothing fetched but robots.txt: ``kind`` is
    ``allowed``, ``wait``, ``disallowed`` or ``refused``."""

    url: str
    kind: str
    why: str
    retry_after_s: float | None
    robots: str
    preferences: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"url": self.url, "allowed": self.kind == "allowed", "verdict": self.kind,
                "why": self.why, "retry_after_s": None if self.retry_after_s is None
                else round(self.retry_after_s, 3), "robots": self.robots,
                "preferences": self.preferences}


def robots_words(state: RobotsState, url: str, agent: str) -> str:
    """What robots.txt says of ``url`` for ``agent``, with the rule and line that decided."""
    origin = split_origin(url)[0]
    where = f"{origin}/robots.txt"
    match state:
        case Parsed():
            decided = state.robots.decide(url, agent)
            verb = "allows" if decided.allowed else "disallows"
            stale = " (the last good copy: the site does not answer now)" if state.stale \
                else ""
            return f"{where} (HTTP {state.status}){stale} {verb} it for {agent}: " \
                   f"{decided.reason}"
        case AllowAll() | DisallowAll():
            return f"{where}: {state.reason}"


def _directives_words(directives: RobotsDirectives) -> str:
    said = [name for name in ("noindex", "nofollow", "noarchive", "nosnippet",
                              "noimageindex", "notranslate") if getattr(directives, name)]
    if directives.max_snippet is not None:
        said.append(f"max-snippet:{directives.max_snippet}")
    if directives.unavailable_after is not None:
        said.append("unavailable_after:" + datetime.fromtimestamp(
            directives.unavailable_after, UTC).isoformat(timespec="seconds"))
    return ", ".join(said) if said else "none"


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", "replace")
    except LookupError:  # a charset Python does not know: read as UTF-8
        return body.decode("utf-8", "replace")


class PoliteFetch:
    """Pages for an agent, politely; one per server, shared by every session."""

    def __init__(self, politeness: Politeness, robots: RobotsFetcher, client: HttpClient,
                 settings: FetchSettings | None = None, *, user_agent: str = "",
                 host_leases: bool = False) -> None:
        """``host_leases``: other processes share the store, so a request granted holds its
        host's lease until it is over (:meth:`Politeness.check`'s ``lease_s``)."""
        self._politeness = politeness
        self._robots = robots
        self._client = client
        self.settings = settings or FetchSettings()
        self._user_agent = user_agent or self.settings.agent
        # origin -> its tdmrep.json compiled (NO_TDMREP: none), charged its bytes
        self._tdmrep: LruBudget[str, TdmRep] = tdmrep_files(
            max_bytes=self.settings.tdmrep_memory_bytes)
        # One request of a host in flight among every process on the store: a slot granted
        # holds the host until its request is over; longer than a fetch may take, it never
        # lapses while the request is out.
        self._lease_s = lease_length_s(self.settings.fetch_deadline_s) if host_leases else None

    @property
    def agent(self) -> str:
        return self.settings.agent

    # -- asking -----------------------------------------------------------------------------

    async def _robots_prefs(self, url: str) -> tuple[RobotsState, Preferences]:
        state = await self._politeness.robots_state(url)
        prefs = from_robots(state.robots, url, self.agent) if isinstance(state, Parsed) \
            else Preferences()
        return state, prefs

    async def may_fetch(self, url: str) -> Verdict:
        """May ``url`` be fetched now, and if not why and when: robots.txt is read (fetched
        if needed), the host's slot looked at, not taken."""
        purpose = self.settings.purpose
        problem = _scheme_problem(url)
        if problem is not None:
            return Verdict(url, "refused", problem, None, "")
        (answer,) = await self._politeness.check([url], agent=self.agent)
        decision = answer.decision
        robots = ""
        prefs: dict[str, object] = {}
        if not (type(decision) is Refused and decision.reason in (
                RefusalReason.INVALID_URL, RefusalReason.PRIVATE_ADDRESS)):
            state, found = await self._robots_prefs(url)
            robots = robots_words(state, url, self.agent)
            prefs = purpose_json(found, purpose)
            if type(decision) in (Allowed, WaitUntil) and found.refuses(purpose):
                return Verdict(url, "refused", _usage_refusal(found, purpose), None,
                               robots, prefs)
        match decision:
            case Allowed():
                return Verdict(url, "allowed", "may be fetched now", None, robots, prefs)
            case WaitUntil():
                return Verdict(url, "wait", message(answer) or "", answer.wait_s, robots,
                               prefs)
            case Disallowed():
                return Verdict(url, "disallowed", message(answer) or "", None, robots, prefs)
            case Refused():
                return Verdict(url, "refused", message(answer) or decision.reason,
                               answer.wait_s, robots, prefs)

    async def robots(self, origin: str) -> str:
        """``origin``'s robots.txt as polite reads it for the agent: the outcome, the delays
        and preferences that apply, the file itself (fetched if needed, taking no slot)."""
        url = origin.rstrip("/") + "/"
        problem = _scheme_problem(url)
        if problem is not None:
            return problem
        (answer,) = await self._politeness.check([url], agent=self.agent)
        if type(answer.decision) is Refused and answer.decision.reason in (
                RefusalReason.INVALID_URL, RefusalReason.PRIVATE_ADDRESS):
            return message(answer) or str(answer.decision.reason)
        state, prefs = await self._robots_prefs(url)
        lines = [robots_words(state, url, self.agent)]
        if isinstance(state, Parsed):
            robots = state.robots
            rules = robots.agent_rules(self.agent, url=url)
            delay = robots.delay_s(self.agent, url=url)
            lines.append(f"dialect: {robots.dialect}")
            lines.append(f"delay asked of {self.agent} (Crawl-delay, Request-rate): "
                         + (f"{delay:g} s" if delay is not None else "none"))
            if rules.visit_time or rules.time_forbidden:
                lines.append(f"Visit-time windows: {len(rules.visit_time)}, Time-forbidden: "
                             f"{len(rules.time_forbidden)}")
            if robots.sitemaps:
                lines.append("sitemaps: " + ", ".join(robots.sitemaps))
            lines.append(f"AI-usage preferences for {self.settings.purpose}: "
                         f"{prefs.answer(self.settings.purpose).reason}")
            known = await self._robots.known(split_origin(url)[0])
            if known is not None and known[1]:
                lines += ["", known[1].decode("utf-8", "replace")]
        return "\n".join(lines)

    # -- fetching ---------------------------------------------------------------------------

    async def fetch(self, url: str, *, raw: bool = False, person: bool = False
                    ) -> Given | NotGiven:
        """``url`` fetched for the agent (``raw``: HTML as it came, not simplified;
        ``person``: a person asked for it, and robots.txt alone refuses nothing), each
        redirect's target checked as the URL was."""
        settings = self.settings
        started = time.monotonic()
        notes: list[str] = []
        current = url
        for hop in range(settings.max_redirects + 1):
            problem = _scheme_problem(current)
            if problem is not None:
                return NotGiven(current, problem, notes=tuple(notes))
            outcome = await self._fetch_one(current, raw, person, started, notes)
            if not isinstance(outcome, str):
                return outcome
            if hop == settings.max_redirects:
                break
            notes.append(f"{current} redirects to {outcome}")
            current = outcome
        return NotGiven(current, f"more than {settings.max_redirects} redirects",
                        notes=tuple(notes))

    async def _fetch_one(self, url: str, raw: bool, person: bool, started: float,
                         notes: list[str]) -> Given | NotGiven | str:
        """One request: the page given, refused, or the redirect's target to ask next."""
        politeness = self._politeness
        agent, purpose = self.agent, self.settings.purpose
        # Asked without taking the slot first: a URL refused by robots.txt or by the
        # preferences takes no turn of its host.
        (first,) = await politeness.check([url], agent=agent, obey_rules=not person)
        refusal = self._refusal(first, notes)
        if refusal is not None:
            return refusal
        state, robots_prefs = await self._robots_prefs(url)
        said = robots_words(state, url, agent)
        if person and (isinstance(state, DisallowAll) or (
                isinstance(state, Parsed) and not state.robots.allowed(url, agent))):
            said += f"; {PERSON}"
        notes.append(said)
        tdmrep = await self._tdmrep_prefs(url, started, notes)
        if isinstance(tdmrep, NotGiven):
            return tdmrep
        robots_prefs = combine(robots_prefs, tdmrep)
        if robots_prefs.refuses(purpose):
            return NotGiven(url, _usage_refusal(robots_prefs, purpose), notes=tuple(notes))
        asked = await self._request(url, person, started, notes, self.settings.max_body_bytes)
        if isinstance(asked, NotGiven):
            return asked
        got, pause = asked
        if got.status is None:
            if got.failure == "private":
                return NotGiven(url, got.error or "a private address", notes=tuple(notes))
            return NotGiven(url, f"Failed to fetch {url}: {got.error}", notes=tuple(notes))
        status = got.status
        target = redirect_target(url, status, got.headers.get("location"))
        if target is not None:
            return target
        if status == 402:
            price = got.headers.get("crawler-price")
            why = (f"{url} asks to be paid for (HTTP 402, pay-per-crawl): crawler-price "
                   f"{price}; polite mcp does not pay" if price else
                   f"{url} answered HTTP 402 Payment Required, without a crawler-price")
            return NotGiven(url, why, notes=tuple(notes))
        if pause is not None:
            return NotGiven(url, f"{url} answered {status} and asked for a pause "
                                 f"(Retry-After: {got.headers.get('retry-after') or 'none'});"
                                 " the host is left alone until then", pause, tuple(notes))
        if status >= 400:
            return NotGiven(url, f"Failed to fetch {url} - status code {status}",
                            notes=tuple(notes))
        content_type = (got.headers.get("content-type") or "").split(";")[0].strip().lower()
        text = _decode(got.body, got.charset)
        html = content_type in HTML_TYPES or "<html" in text[:100].lower() or (
            not content_type and text.lstrip()[:1] == "<")
        prefs = combine(from_headers(got.raw_headers, agent, content_type=content_type),
                        robots_prefs, *([from_html(text, agent)] if html else []))
        if prefs.refuses(purpose):
            return NotGiven(url, _usage_refusal(prefs, purpose), notes=tuple(notes))
        notes.append(f"AI-usage preferences for {purpose}: {prefs.answer(purpose).reason}")
        directives = parse_x_robots_tag(got.get_all("x-robots-tag"), agent)
        if html:
            directives = combine_directives(directives, parse_meta_tags(text, agent))
        notes.append(f"META robots / X-Robots-Tag for {agent}: "
                     f"{_directives_words(directives)}")
        if got.truncated:
            notes.append(f"the body is longer than {self.settings.max_body_bytes} bytes; "
                         "only that much was read")
        if got.error is not None:
            notes.append(f"the body broke off: {got.error}")
        return await self._given(url, status, text, html and not raw, content_type, notes)

    async def _tdmrep_prefs(self, url: str, started: float, notes: list[str]
                            ) -> Preferences | NotGiven:
        """What the site's ``/.well-known/tdmrep.json`` says of ``url``, for a purpose it
        speaks to: read once per site, in its turn like any request (robots.txt may refuse
        it: then it is not read)."""
        if self.settings.purpose not in TDMREP_PURPOSES:
            return Preferences()
        origin = split_origin(url)[0]
        tdmrep = self._tdmrep.get(origin)
        if tdmrep is None:
            target = origin + TDMREP_PATH
            body = b""
            (first,) = await self._politeness.check([target], agent=self.agent)
            if first.allowed or first.wait_s is not None:
                asked = await self._request(target, False, started, notes,
                                            MAX_TDMREP_BYTES + 1)
                if isinstance(asked, NotGiven):
                    return NotGiven(url, f"{TDMREP_PATH} (read before the page for "
                                         f"{self.settings.purpose}): {asked.why}",
                                    asked.retry_after_s, asked.notes)
                got = asked[0]
                if got.status == 200:
                    body = got.body
            # compiled once, in steps: thousands of wildcard locations take a tenth of a
            # second, which the other calls sharing the event loop must not wait for
            tdmrep = await stepped(read_tdmrep_steps(body)) if body else NO_TDMREP
            self._tdmrep.put(origin, tdmrep)
        return Preferences() if tdmrep is NO_TDMREP else tdmrep.preferences(url)

    async def _given(self, url: str, status: int, text: str, simplify: bool,
                     content_type: str, notes: list[str]) -> Given:
        if simplify:
            # On a thread: an 80 KB article takes readability-lxml and markdownify about
            # 180 ms, which the other sessions of the server would otherwise wait through.
            markdown = await asyncio.to_thread(_readable_markdown, text, url)
            return Given(url, status, markdown, notes=tuple(notes))
        return Given(url, status, text, f"Content type {content_type or 'unknown'} cannot be "
                     "simplified to markdown, but here is the raw content:\n", tuple(notes))

    def _refusal(self, answer: Answer, notes: list[str]) -> NotGiven | None:
        """The refusal in ``answer`` (robots.txt, a private address, a bad URL); ``None``
        for a yes or a wait (waits are :meth:`_slot`'s)."""
        decision = answer.decision
        if type(decision) is Disallowed:
            return NotGiven(answer.url, f"{message(answer)} (for {self.agent})",
                            notes=tuple(notes))
        if type(decision) is Refused:
            why = message(answer) or str(decision.reason)
            if decision.reason is RefusalReason.ROBOTS_UNAVAILABLE:
                why = (f"{split_origin(answer.url)[0]}/robots.txt cannot be read ({why}): "
                       "nothing of the site may be fetched until it answers (RFC 9309, "
                       "2.3.1.3)")
            return NotGiven(answer.url, why, answer.wait_s, tuple(notes))
        return None

    async def _request(self, url: str, person: bool, started: float, notes: list[str],
                       max_bytes: int) -> tuple[FetchResult, float | None] | NotGiven:
        """``url`` fetched in its host's turn (a new turn when its request was held back
        because its slot went to another), its answer noted with the driver: what came, and
        the pause it asked for; a :class:`NotGiven` when the turn does not come in time."""
        politeness = self._politeness
        while True:
            granted = await self._slot(url, person, started, notes)
            if isinstance(granted, NotGiven):
                return granted
            # The host's lease, taken with the slot, ends with the request whichever way it
            # ends: with its answer noted (and a 429's pause, in one step), or at once when
            # there was none, when it was held back, on an error or a cancel.
            async with politeness.lease(granted, self._lease_s) as lease:
                headers = self._client.headers(split_origin(url)[1], self._user_agent)
                late = politeness.late_start(url, grant=granted.grant)
                got = await self._client.get(url, headers, max_bytes=max_bytes,
                                             deadline_s=self.settings.fetch_deadline_s,
                                             leaving=late)
                await late.noted()
                if got.status is not None:
                    pause = await lease.note_response(
                        got.status, elapsed_s=got.answered_s,
                        retry_after=got.headers.get("retry-after"))
                    return got, pause
            if got.failure != "withheld":  # else its slot went to another: a new turn
                return got, None

    async def _slot(self, url: str, person: bool, started: float, notes: list[str]
                    ) -> Answer | NotGiven:
        """Wait for the host's slot and take it; a :class:`NotGiven` with the retry time
        when the wait would pass ``max_wait_s`` (the agent is not held)."""
        why = ""
        while True:
            (answer,) = await self._politeness.check([url], reserve=True, agent=self.agent,
                                                     obey_rules=not person,
                                                     lease_s=self._lease_s)
            if answer.allowed:
                if why:
                    notes.append(f"waited {time.monotonic() - started:.1f} s for the host's "
                                 f"turn: {why}")
                return answer
            refusal = self._refusal(answer, notes)
            if refusal is not None:
                return refusal
            wait_s = answer.wait_s or 0.0
            waited = time.monotonic() - started
            why = message(answer) or "the host's turn has not come"
            if waited + wait_s > self.settings.max_wait_s:
                return NotGiven(url, f"{why} Asking again in {wait_s:.1f} s will be "
                                     f"answered (more than --max-wait-s "
                                     f"{self.settings.max_wait_s:g} s to wait now)",
                                wait_s, tuple(notes))
            await asyncio.sleep(wait_s + WAKE_MARGIN_S)


def _scheme_problem(url: str) -> str | None:
    try:
        split_origin(url)
    except InvalidURL as exc:
        return f"{url!r} cannot be fetched: {exc} (only http and https URLs are)"
    return None


def _usage_refusal(prefs: Preferences, purpose: str) -> str:
    answer = prefs.answer(purpose)
    sources = "; ".join(f"{s.named}: {s.text}" for s in answer.decided_by)
    return (f"the site's AI-usage preferences refuse {purpose} ({sources}), so the page "
            f"is not given to the agent")


def _readable_markdown(html: str, url: str) -> str:
    """The page as markdown; readability-lxml and markdownify (a tenth of a second of CPU
    to import) are imported at the first page simplified, not by every server started."""
    from polite.mcp._readable import readable_markdown

    return readable_markdown(html, url)
