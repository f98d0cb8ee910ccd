"""The driver's answers are the core's values, gathered and claimed for real: a loopback site,
its robots.txt fetched over HTTP, the slots in a real store."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from polite.clock import WallClock
from polite.core.politeness import Allowed, Disallowed, WaitSource, WaitUntil
from polite.core.robots.lifecycle import FetchPolicy, Parsed
from polite.core.robots.model import Dialect, Rule
from polite.fetch.http import HttpClient
from polite.fetch.politeness import LATE_UNNOTED_S, Answer, LateStart, Politeness, message
from polite.fetch.robots import RobotsFetcher, create_client
from polite.storage import SQLiteStore
from tests.sites import Reply, Site, serve

pytestmark = pytest.mark.anyio

ROBOTS = b"User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n"


@asynccontextmanager
async def driver(db: Path, **options: float) -> AsyncIterator[Politeness]:
    clock = WallClock()
    store = SQLiteStore(db, clock)
    async with create_client() as client:
        fetcher = RobotsFetcher(client, store, clock, agent="politetest", allow_private=True)
        try:
            yield Politeness(fetcher, store, clock, agent="politetest", allow_private=True,
                             **options)
        finally:
            await store.close()


async def slot_for(politeness: Politeness, url: str) -> Answer:
    """``url``'s slot, waited for."""
    while True:
        (found,) = await politeness.check([url], reserve=True)
        if found.allowed:
            return found
        assert found.wait_s is not None, found
        await asyncio.sleep(found.wait_s)


class HeldUp:
    """A LateStart whose process is held up once it has answered whether the request may
    go, before the request is written (a busy core)."""

    def __init__(self, late: LateStart, held_s: float) -> None:
        self.late, self.held_s = late, held_s

    def __call__(self, late_s: float) -> bool:
        go = self.late(late_s)
        time.sleep(self.held_s)
        return go

    def left(self) -> None:
        self.late.left()


async def send_in(politeness: Politeness, client: HttpClient, url: str, found: Answer,
                  held_s: float = 0.0) -> int | None:
    """``url`` fetched in the slot ``found`` gave, its lateness noted; ``held_s``: the
    process held up that long between the question whether it may go and its write."""
    late = politeness.late_start(url, grant=found.grant)
    got = await client.get(url, max_bytes=1024, deadline_s=10,
                           leaving=HeldUp(late, held_s) if held_s else late)
    await late.noted()
    return got.status


async def stored_robots_delays(db: Path) -> dict[str, float]:
    """What the store file keeps of the hosts' robots.txt delays (GET /delays reads it)."""
    store = SQLiteStore(db, WallClock())
    try:
        return await store.all_robots_delays()
    finally:
        await store.close()


async def test_answers_are_values_with_the_rule_and_the_source(tmp_path: Path) -> None:
    with serve(Site("127.0.83.1", {"/robots.txt": Reply(200, ROBOTS)})) as site:
        async with driver(tmp_path / "p.sqlite") as politeness:
            urls = [f"{site.origin}/private/a", f"{site.origin}/a", f"{site.origin}/b"]
            blocked, first, second = await politeness.check(urls, reserve=True)
    assert blocked.decision == Disallowed(Rule(False, "/private/", 2), 2, Dialect.RFC9309,
                                          "Disallow: /private/ (line 2)")
    assert blocked.wait_s is None and blocked.cause == "robots"
    assert isinstance(first.decision, Allowed) and first.decision.interval_s == 2.0
    # the second URL of the host in one call waits behind the first, for the Crawl-delay
    # read on line 3
    assert second.decision == WaitUntil(second.decision.at, WaitSource.CRAWL_DELAY, 3, 2.0,
                                        behind=True)
    assert second.wait_s is not None and 1.9 < second.wait_s <= 2.0
    # The words are rendered from the value, as seed 001 words them.
    assert message(blocked) == "Blocked by robots.txt: Disallow: /private/ (line 2)"
    assert message(second) == (
        "There must be a delay of 2000 milliseconds between requests to 127.0.83.1 "
        "(robots.txt Crawl-delay); another URL of 127.0.83.1 in this call takes the slot.")
    assert message(first) is None


@pytest.mark.parametrize("uses_slot", [False, True])
async def test_robots_txt_takes_the_slot_only_when_the_policy_says_so(
        tmp_path: Path, uses_slot: bool) -> None:
    """DESIGN.md: fetching robots.txt does not use up the host's slot, unless the policy's
    robots_uses_slot says so (the crawler's, for seed 000's Table 10)."""
    with serve(Site("127.0.83.2", {"/robots.txt": Reply(200, ROBOTS)})) as site:
        async with driver(tmp_path / "p.sqlite", robots_uses_slot=uses_slot) as politeness:
            assert politeness.policy.robots_uses_slot is uses_slot
            (page,) = await politeness.check([f"{site.origin}/a"], reserve=True)
            # robots.txt known now: asking for its state again is no request, takes no slot
            await politeness.robots_state(f"{site.origin}/b")
            (again,) = await politeness.check([f"{site.origin}/b"])
    assert site.requests == ["/robots.txt"]
    if uses_slot:
        assert page.decision == WaitUntil(page.decision.at, WaitSource.CRAWL_DELAY, 3, 2.0)
        assert page.wait_s is not None and 0 < page.wait_s <= 2.0
    else:
        assert isinstance(page.decision, Allowed)
    assert isinstance(again.decision, WaitUntil)  # whoever took it, the slot is taken


async def test_a_visit_time_wait_still_records_what_the_site_asks(tmp_path: Path) -> None:
    """A host whose Visit-time window is closed waits for it (a value naming the window),
    and GET /delays still learns the Crawl-delay its robots.txt asks."""
    now = dt.datetime.now(dt.UTC)
    later = f"{(now + dt.timedelta(hours=2)):%H%M}-{(now + dt.timedelta(hours=3)):%H%M}"
    robots = (f"Robot-version: 3.0\nUser-agent: *\nAllow: /\nCrawl-delay: 3\n"
              f"Visit-time: {later}\n").encode()
    with serve(Site("127.0.83.3", {"/robots.txt": Reply(200, robots)})) as site:
        async with driver(tmp_path / "p.sqlite") as politeness:
            (held,) = await politeness.check([f"{site.origin}/a"], reserve=True)
    assert isinstance(held.decision, WaitUntil)
    assert held.decision.source is WaitSource.VISIT_TIME
    assert held.wait_s is not None and 3600 < held.wait_s <= 3 * 3600
    assert politeness.robots_delays_s == {"127.0.83.3": 3.0}
    assert await stored_robots_delays(tmp_path / "p.sqlite") == {"127.0.83.3": 3.0}


async def test_a_wait_carries_the_robots_state_it_was_judged_under(tmp_path: Path) -> None:
    """A caller told to wait reads the robots.txt state from the answer (the crawler, to
    tell a robots.txt that could not be read from a delay) rather than asking again, on
    the one-URL path and the batch path alike."""
    now = dt.datetime.now(dt.UTC)
    later = f"{(now + dt.timedelta(hours=2)):%H%M}-{(now + dt.timedelta(hours=3)):%H%M}"
    robots = f"Robot-version: 3.0\nUser-agent: *\nVisit-time: {later}\n".encode()
    with serve(Site("127.0.83.14", {"/robots.txt": Reply(200, robots)})) as site:
        async with driver(tmp_path / "p.sqlite") as politeness:
            (one,) = await politeness.check([f"{site.origin}/a"], reserve=True)
            batch = await politeness.check([f"{site.origin}/b", f"{site.origin}/c"],
                                           reserve=True)
            (unreserved,) = await politeness.check([f"{site.origin}/d"])
    for held in (one, *batch):
        assert isinstance(held.decision, WaitUntil)
        assert held.decision.source is WaitSource.VISIT_TIME
        assert isinstance(held.robots, Parsed) and held.robots.robots.dialect is Dialect.REGP
    assert unreserved.robots is None  # only a caller that takes slots is given it


async def test_a_brace_block_s_delay_is_a_value_of_its_own_and_worded_as_before(
        tmp_path: Path) -> None:
    robots = (b"Robot-version: 3.0\nUser-agent: *\nAllow: /\nRequest-rate: 120/m\n"
              b"{\nAllow: /html/\nCrawl-delay: 1\n}\n")
    with serve(Site("127.0.83.4", {"/robots.txt": Reply(200, robots)})) as site:
        async with driver(tmp_path / "p.sqlite") as politeness:
            await politeness.check([f"{site.origin}/"], reserve=True)
            (held,) = await politeness.check([f"{site.origin}/html/a.html"])
    assert held.decision == WaitUntil(held.decision.at, WaitSource.BRACE_BLOCK, 7, 1.0,
                                      field=WaitSource.CRAWL_DELAY)
    assert message(held) == ("There must be a delay of 1000 milliseconds between requests "
                             "to 127.0.83.4 (robots.txt Crawl-delay).")


class StallingClock:
    """time.time(), whose read that is armed (``stall_s``) holds the thread that long right
    after it: a store that read its clock for a slot, then a busy core or a garbage
    collection before the request could go."""

    def __init__(self) -> None:
        self.stall_s = 0.0

    def __call__(self) -> float:
        now = time.time()
        if self.stall_s:
            stall, self.stall_s = self.stall_s, 0.0
            time.sleep(stall)
        return now


async def test_a_request_held_up_between_its_slot_and_the_client_is_spaced_from_when_it_left(
        tmp_path: Path) -> None:
    """The store reads its clock for /a's slot, then the process is held up for 0.3 s
    before the request is handed to the client (here: in the store's clock read, as a busy
    core or a garbage collection would). Counted from the client's call, /a left on time,
    and /b, given the slot 0.5 s after /a's, reached the site 0.2 s after it; counted from
    the slot, /a's lateness is noted as it leaves and /b comes the delay after it."""
    robots = b"User-agent: *\nCrawl-delay: 0.5\n"
    site = Site("127.0.83.5", {"/robots.txt": Reply(200, robots), "/a": Reply(200, b"a"),
                                "/b": Reply(200, b"b")})
    stalling = StallingClock()
    store = SQLiteStore(tmp_path / "p.sqlite", stalling)
    clock = WallClock()
    with serve(site):
        async with create_client() as client:
            fetcher = RobotsFetcher(client, store, clock, agent="politetest",
                                    allow_private=True)
            politeness = Politeness(fetcher, store, clock, agent="politetest",
                                    allow_private=True, send_slack_s=LATE_UNNOTED_S)

            try:
                await politeness.robots_state(f"{site.origin}/a")
                stalling.stall_s = 0.3
                (first,) = await politeness.check([f"{site.origin}/a"], reserve=True)
                assert first.allowed and not stalling.stall_s
                assert await send_in(politeness, client, f"{site.origin}/a", first) == 200
                while True:
                    (second,) = await politeness.check([f"{site.origin}/b"], reserve=True)
                    if second.allowed:
                        break
                    assert second.wait_s is not None
                    await asyncio.sleep(second.wait_s)
                assert await send_in(politeness, client, f"{site.origin}/b", second) == 200
            finally:
                await store.close()
    (a_at, a), (b_at, b) = sorted(arrival for arrival in site.arrivals
                                  if arrival[1] != "/robots.txt")
    assert (a, b) == ("/a", "/b")
    assert b_at - a_at >= 0.5 - 0.01, b_at - a_at


async def test_a_request_held_up_between_its_question_and_its_write_is_spaced_from_the_write(
        tmp_path: Path) -> None:
    """The client asks whether /a may go, and the process is then held up for 0.3 s before
    it writes the request (a busy core). Told as it was asked, /a left on time and /b,
    given the slot 0.5 s after /a's, reached the site 0.2 s after it; told once written,
    /a's lateness is noted and /b comes the delay after it."""
    robots = b"User-agent: *\nCrawl-delay: 0.5\n"
    site = Site("127.0.83.30", {"/robots.txt": Reply(200, robots), "/a": Reply(200, b"a"),
                                 "/b": Reply(200, b"b")})

    with serve(site):
        async with driver(tmp_path / "p.sqlite", send_slack_s=LATE_UNNOTED_S) as politeness, \
                create_client() as client:
            for path, held_s in (("/a", 0.3), ("/b", 0.0)):
                url = site.origin + path
                found = await slot_for(politeness, url)
                assert await send_in(politeness, client, url, found, held_s) == 200
    (a_at, a), (b_at, b) = sorted(arrival for arrival in site.arrivals
                                  if arrival[1] != "/robots.txt")
    assert (a, b) == ("/a", "/b")
    assert b_at - a_at >= 0.5, b_at - a_at


async def test_a_robots_txt_read_again_waits_for_the_slot_when_it_uses_the_slot(
        tmp_path: Path) -> None:
    """With ``robots_uses_slot`` (the crawler's: every request counts), robots.txt read
    again once its copy is stale waits for the slot a page took, as any request: asked
    about /b 0.3 s after /a went, the copy known stays in force until the slot is free,
    and robots.txt then goes, /b the delay after it (it went at once, 0.3 s after /a)."""
    robots = b"User-agent: *\nCrawl-delay: 0.5\n"
    site = Site("127.0.83.6", {
        "/robots.txt": Reply(200, robots, {"Cache-Control": "no-cache"}),
        "/a": Reply(200, b"a"), "/b": Reply(200, b"b")})
    clock = WallClock()
    store = SQLiteStore(tmp_path / "p.sqlite", clock)
    with serve(site):
        async with create_client() as client:
            # a copy of robots.txt stays fresh 0.7 s: stale by the time /b is asked about
            fetcher = RobotsFetcher(client, store, clock, agent="politetest",
                                    allow_private=True, policy=FetchPolicy(min_ttl_s=0.7))
            politeness = Politeness(fetcher, store, clock, agent="politetest",
                                    allow_private=True, send_slack_s=LATE_UNNOTED_S,
                                    robots_uses_slot=True)

            async def fetch(url: str) -> int | None:
                return await send_in(politeness, client, url, await slot_for(politeness, url))

            try:
                assert await fetch(f"{site.origin}/a") == 200
                await asyncio.sleep(0.3)
                assert await fetch(f"{site.origin}/b") == 200
            finally:
                await store.close()
    arrivals = sorted(site.arrivals)
    assert [path for _, path in arrivals] == ["/robots.txt", "/a", "/robots.txt", "/b"]
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(arrivals)]
    assert min(gaps) >= 0.5 - 0.01, arrivals


async def test_robots_txt_read_again_in_every_slot_does_not_starve_the_pages(
        tmp_path: Path) -> None:
    """With ``robots_uses_slot``, a robots.txt whose copy is stale by the time the host's
    next slot comes (no-cache, read again after a minute, with a Crawl-delay of a minute;
    here 0.3 s of each) is read again in a slot of its own, and the page has the slot
    after it: the pages go, one delay apart from every request, rather than robots.txt
    taking every slot for ever."""
    robots = b"User-agent: *\nCrawl-delay: 0.3\n"
    site = Site("127.0.83.21", {
        "/robots.txt": Reply(200, robots, {"Cache-Control": "no-cache"}),
        "/a": Reply(200, b"a"), "/b": Reply(200, b"b"), "/c": Reply(200, b"c")})
    clock = WallClock()
    store = SQLiteStore(tmp_path / "p.sqlite", clock)

    def reads() -> int:
        return sum(path == "/robots.txt" for _, path in site.arrivals)

    with serve(site):
        async with create_client() as client:
            fetcher = RobotsFetcher(client, store, clock, agent="politetest",
                                    allow_private=True, policy=FetchPolicy(min_ttl_s=0.3))
            politeness = Politeness(fetcher, store, clock, agent="politetest",
                                    allow_private=True, send_slack_s=LATE_UNNOTED_S,
                                    robots_uses_slot=True)

            async def fetch(url: str) -> int | None:
                before = reads()
                while True:
                    (found,) = await politeness.check([url], reserve=True)
                    if found.allowed:
                        break
                    # starved: robots.txt read again and again, the page never let go
                    assert reads() - before <= 3, site.arrivals
                    assert found.wait_s is not None, found
                    await asyncio.sleep(found.wait_s)
                return await send_in(politeness, client, url, found)

            try:
                for path in ("/a", "/b", "/c"):
                    assert await fetch(site.origin + path) == 200
            finally:
                await store.close()
    arrivals = sorted(site.arrivals)
    pages = [path for _, path in arrivals if path != "/robots.txt"]
    assert pages == ["/a", "/b", "/c"]
    # robots.txt read at most once between two pages
    assert "/robots.txt,/robots.txt" not in ",".join(path for _, path in arrivals)
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(arrivals)]
    assert min(gaps) >= 0.3 - 0.01, arrivals


@pytest.mark.parametrize("uses_slot", [False, True])
async def test_a_robots_txt_redirect_hop_to_its_host_is_spaced_as_a_page(
        tmp_path: Path, uses_slot: bool) -> None:
    """A redirect's hop of robots.txt is a request like any other to its host: moved to
    another path of the same host, it waits the host's delay after the request that was
    redirected (which takes the slot then, whether robots.txt takes one or not), and the
    first page waits the delay after the hop; at the site, by the kernel's arrival stamps.
    (Followed at once, the hop reached the site a few milliseconds after robots.txt.)"""
    delay_s = 0.3
    site = Site(f"127.0.83.{22 + uses_slot}", {
        "/robots.txt": Reply(301, b"", {"Location": "/policies/robots.txt"}),
        "/policies/robots.txt": Reply(200, b"User-agent: *\nDisallow: /private/\n"),
        "/a": Reply(200, b"a")})
    clock = WallClock()
    store = SQLiteStore(tmp_path / "p.sqlite", clock)
    with serve(site):
        async with create_client() as client:
            fetcher = RobotsFetcher(client, store, clock, agent="politetest",
                                    allow_private=True)
            politeness = Politeness(fetcher, store, clock, agent="politetest",
                                    allow_private=True, send_slack_s=LATE_UNNOTED_S,
                                    default_delay_s=delay_s, robots_uses_slot=uses_slot)
            try:
                url = site.origin + "/a"
                assert await send_in(politeness, client, url,
                                     await slot_for(politeness, url)) == 200
                state = await politeness.robots_state(url)
            finally:
                await store.close()
    assert isinstance(state, Parsed) and state.robots.size > 0
    arrivals = sorted(site.arrivals)
    assert [path for _, path in arrivals] == ["/robots.txt", "/policies/robots.txt", "/a"]
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(arrivals)]
    assert min(gaps) >= delay_s - 0.01, arrivals


async def test_a_robots_txt_that_leaves_late_has_its_redirects_hop_spaced_from_it(
        tmp_path: Path) -> None:
    """robots.txt read in a slot of its host (as the crawler does) may leave well after the
    slot: here it waits for the one robots.txt request allowed at a time, another site's,
    answered 0.4 s late. Its redirect's hop was spaced from the slot, and reached the site
    that much less than the delay after it; it is spaced from robots.txt's answer now."""
    delay_s = 0.5
    slow = Site("127.0.83.26", {"/robots.txt": Reply(200, b"User-agent: *\n", delay_s=0.4)})
    site = Site("127.0.83.27", {
        "/robots.txt": Reply(301, b"", {"Location": "/policies/robots.txt"}),
        "/policies/robots.txt": Reply(200, b"User-agent: *\nDisallow: /private/\n")})
    clock = WallClock()
    store = SQLiteStore(tmp_path / "p.sqlite", clock)
    with serve(slow), serve(site):
        async with create_client() as client:
            fetcher = RobotsFetcher(client, store, clock, agent="politetest",
                                    allow_private=True)
            politeness = Politeness(fetcher, store, clock, agent="politetest",
                                    allow_private=True, send_slack_s=LATE_UNNOTED_S,
                                    default_delay_s=delay_s, robots_uses_slot=True,
                                    robots_concurrency=1)
            try:
                other = asyncio.create_task(politeness.robots_state(slow.origin + "/"))
                while not slow.arrivals:  # the one robots.txt request at a time is out
                    await asyncio.sleep(0.01)
                state = await politeness.robots_state(site.origin + "/")
                await other
            finally:
                await store.close()
    assert isinstance(state, Parsed) and state.robots.size > 0
    arrivals = sorted(site.arrivals)
    assert [path for _, path in arrivals] == ["/robots.txt", "/policies/robots.txt"]
    (gap,) = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(arrivals)]
    assert gap >= delay_s - 0.01, arrivals


async def test_one_url_is_answered_as_it_would_be_in_a_batch(tmp_path: Path) -> None:
    """A call with one URL (the proxy's, once a request) takes a shorter way than a batch:
    its answers are the batch's all the same, whether refused by a rule, granted, held by
    the Crawl-delay, held by a back-off or refused as no URL, slots and grants alike."""
    no_host = "http://"  # answered without the network: a second URL that makes a batch

    def seen(answer: Answer) -> tuple[object, ...]:
        decision = answer.decision  # the times differ between the runs; the rest may not
        if isinstance(decision, WaitUntil):
            decision = decision._replace(at=0.0)
        return answer.url, decision, answer.cause, answer.cut, answer.grant

    with serve(Site("127.0.83.17", {"/robots.txt": Reply(200, ROBOTS)})) as site:
        urls = [f"{site.origin}/private/a", f"{site.origin}/a", f"{site.origin}/b", no_host]
        runs = []
        for alone in (True, False):
            async with driver(tmp_path / f"{alone}.sqlite") as politeness:
                got = []
                for url in urls:
                    asked = [url] if alone else [url, no_host]
                    got.append(seen((await politeness.check(asked, reserve=True))[0]))
                await politeness.note_response(urls[1], 429, retry_after="120")
                got.append(seen((await politeness.check(
                    [urls[2]] if alone else [urls[2], no_host], reserve=True))[0]))
                runs.append(got)
    alone_answers, batch_answers = runs
    assert alone_answers == batch_answers
    causes = [cause for _, _, cause, _, _ in alone_answers]
    assert causes == ["robots", "allowed", "delay", "invalid", "delay"]
    held = alone_answers[4][1]
    assert isinstance(held, WaitUntil) and held.source is WaitSource.BACKOFF
