"""Scrapy drop-ins (``pip install 'polite-web[scrapy]'``).

``ROBOTSTXT_PARSER = "polite.integrations.scrapy.RobotParser"`` reads robots.txt with
polite's parser (``POLITE_ROBOTS_DIALECT``: ``auto`` by default).

``DOWNLOADER_MIDDLEWARES = {"polite.integrations.scrapy.PoliteDownloaderMiddleware": 543}``
makes every request wait for its host's slot as polite decides it. Why a middleware that
waits, rather than Scrapy's download slots or a scheduler: a slot has one fixed delay,
while polite's spacing changes per path (REGP), per time of day (Visit-time) and per
response (adaptive delay, 429/503 back-off), and, with a shared store or ``polite serve``,
depends on what other processes took. Only asking polite right before each request keeps
all of that, and it needs no change to the scheduler a project already uses (scrapy-redis
included). Requests wait in one queue per host, so the other hosts go on meanwhile. On
Scrapy's asyncio reactor (its default since 2.13) polite decides on the reactor's own
event loop (:class:`~polite.integrations.LoopGate`): a slot free now is granted within the
call, at the cost of the decision alone. On another Twisted reactor it decides on a thread
of its own (:class:`~polite.integrations.PoliteGate`), and each request steps there and back.

Settings: ``POLITE_STORE`` (``memory://``, ``sqlite:///PATH``, ``redis://HOST:PORT/DB``),
``POLITE_SERVICE_URL`` (a running ``polite serve``), ``POLITE_ALLOW_PRIVATE``,
``POLITE_ROBOTS_DIALECT``, ``POLITE_SIGN_WITH`` (an Ed25519 key file: every request signed,
Web Bot Auth) and ``POLITE_SIGNATURE_AGENT`` (its key directory's URL),
``POLITE_DEFAULT_DELAY`` (seconds where robots.txt sets none), ``POLITE_MAX_CRAWL_DELAY``
(seconds: robots.txt delays above it are read as it),
``POLITE_ADAPTIVE_FACTOR`` (the least spacing is this many times the host's running
response time; 1 by default, 0 turns it off), ``POLITE_MAX_WAIT`` (seconds; a request that
would wait longer is dropped), ``POLITE_PURPOSE`` (``train-ai``, ``search``, ...: the URL's
robots.txt AI-usage preferences for it in ``request.meta["polite_usage"]``) and
``POLITE_REFUSE_BY_PURPOSE`` (drop what they disallow it for).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from typing import TYPE_CHECKING, Any

try:
    import scrapy.robotstxt
    from scrapy import signals
    from scrapy.exceptions import IgnoreRequest
    from scrapy.utils.defer import maybe_deferred_to_future
    from scrapy.utils.reactor import is_asyncio_reactor_installed
    from twisted.internet.defer import Deferred
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("polite.integrations.scrapy needs Scrapy: "
                      "pip install 'polite-web[scrapy]'") from exc

from polite.config import SCRAPY, scrapy_values
from polite.core.robots import parse, product_token
from polite.errors import RequestRefused, RobotsDisallowed, SlotNotReady
from polite.integrations._gate import (
    LATE_DEPARTURE_S,
    Grant,
    LoopGate,
    PoliteGate,
    Rest,
    run_now,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

__all__ = ["PoliteDownloaderMiddleware", "RobotParser"]

logger = logging.getLogger(__name__)
GRANT_KEY = "polite_grant"  # request.meta: the slot the request went out in
_REPORTED = "polite_reported"  # request.meta: its download's response was reported


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class RobotParser(scrapy.robotstxt.RobotParser):
    """Scrapy's robots.txt parser interface, answered by :func:`polite.robots.parse`."""

    def __init__(self, robotstxt_body: bytes, dialect: str = "auto") -> None:
        self._robots = parse(robotstxt_body, dialect)

    @classmethod
    def from_crawler(cls, crawler: Crawler | None, robotstxt_body: bytes) -> RobotParser:
        dialect = "auto" if crawler is None else \
            str(crawler.settings.get("POLITE_ROBOTS_DIALECT") or "auto")
        return cls(robotstxt_body, dialect)

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool:
        return self._robots.allowed(_text(url), _text(user_agent))

    def crawl_delay(self, user_agent: str | bytes) -> float | None:
        """The spacing the file asks of ``user_agent`` in seconds (Crawl-delay, or what a
        Request-rate or REGP's Ip-delay implies, the longest); ``None`` when it sets none."""
        return self._robots.delay_s(_text(user_agent))

    @property
    def sitemaps(self) -> tuple[str, ...]:
        """The file's Sitemap lines."""
        return self._robots.sitemaps


def _settle(deferred: Deferred[Grant], done: concurrent.futures.Future[Grant]) -> None:
    """On the reactor's thread: fire ``deferred`` as the gate's ``done`` ended."""
    if deferred.called:  # cancelled meanwhile (the engine is closing)
        return
    error = done.exception()
    if error is None:
        deferred.callback(done.result())
    else:
        deferred.errback(error)


async def _wait(future: concurrent.futures.Future[Grant]) -> Grant:
    """The gate's answer, awaited on whichever reactor Scrapy installed (a Deferred on
    Twisted's, an asyncio future on the asyncio reactor), never blocking it."""
    from twisted.internet import reactor

    deferred: Deferred[Grant] = Deferred()
    future.add_done_callback(lambda done: reactor.callFromThread(_settle, deferred, done))
    return await maybe_deferred_to_future(deferred)


async def _rest(rest: Rest[None]) -> None:
    await rest


class PoliteDownloaderMiddleware:
    """Each request waits for its host's slot; robots.txt refusals are dropped as Scrapy's
    own RobotsTxtMiddleware drops them (``IgnoreRequest``, ``robotstxt/forbidden``)."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        # Every POLITE_* setting is read and checked as polite.config.DROPINS declares it.
        values = scrapy_values(settings.get)
        self._robots_agent = str(settings.get("ROBOTSTXT_USER_AGENT") or "")
        self._default_agent = str(settings.get("USER_AGENT") or "Scrapy")
        self._agents: dict[bytes | None, str] = {}  # User-Agent header -> product token
        self._stats: StatsCollector = crawler.stats
        options: dict[str, Any] = {
            **values,
            "agent": product_token(self._robots_agent or self._default_agent) or "polite",
            "knobs": SCRAPY}  # the gate names the values as set here
        # On the asyncio reactor, the reactor's loop decides: no step to another thread and
        # back (measured: that return trip, behind a busy reactor, took a median 130 ms a
        # request and cost a quarter of Scrapy's pages per second).
        self._gate: LoopGate | PoliteGate = \
            LoopGate(**options) if is_asyncio_reactor_installed() else PoliteGate(**options)
        # POLITE_SIGN_WITH: the gate's key signs robots.txt, and every request here
        self._signer = self._gate.signer
        self._reports: set[asyncio.Task[None]] = set()  # kept until done (asyncio's advice)
        # The raw response, before any middleware: RetryMiddleware (550) turns a 429 into a
        # new request before process_response at 543 would see it.
        crawler.signals.connect(self._downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(self._closed, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PoliteDownloaderMiddleware:
        return cls(crawler)

    def _agent(self, request: Request) -> str:
        header = None if self._robots_agent else request.headers.get(b"User-Agent")
        token = self._agents.get(header)
        if token is None:
            agent = self._robots_agent or _text(header or self._default_agent)
            token = product_token(agent) or "polite"
            if len(self._agents) < 1000:  # a spider may set a User-Agent per request
                self._agents[header] = token
        return token

    async def _acquire(self, request: Request) -> Grant:
        gate = self._gate
        # robots.txt goes under the User-Agent the site's pages carry
        user_agent = _text(request.headers.get(b"User-Agent") or self._default_agent)
        if isinstance(gate, LoopGate):
            grant = await gate.acquire(request.url, self._agent(request), user_agent=user_agent)
            if time.monotonic() - grant.granted_at > LATE_DEPARTURE_S:
                grant = await gate.depart(request.url, grant)
            return grant
        grant = await _wait(gate.acquire(request.url, self._agent(request),
                                         user_agent=user_agent))
        if time.monotonic() - grant.granted_at > LATE_DEPARTURE_S:
            # The reactor ran this well after the grant (a busy machine): the spacing
            # counts from now, recorded before the request goes.
            grant = await _wait(gate.depart(request.url, grant))
        return grant

    def process_request(self, request: Request) -> Awaitable[None] | None:
        """``None`` at once when the slot is free now (the store in memory decides without
        waiting), else an awaitable that waits for it; ``IgnoreRequest`` when refused.
        Scrapy takes either from a downloader middleware; the first spares each request a
        coroutine chain (Scrapy's wrapper, this method, the gate's)."""
        admit = self._admit(request)
        if isinstance(self._gate, PoliteGate):  # Twisted's reactor: it awaits the coroutine
            return admit
        started = run_now(admit)
        return started if isinstance(started, Rest) else None

    async def _admit(self, request: Request) -> None:
        # a retry carries its first try's meta: that grant is over (its response noted)
        request.meta.pop(GRANT_KEY, None)
        request.meta.pop(_REPORTED, None)
        try:
            grant = await self._acquire(request)
        except RobotsDisallowed as refusal:
            logger.debug("Forbidden by robots.txt: %(request)s (%(rule)s)",
                         {"request": request, "rule": refusal.reason})
            self._stats.inc_value("robotstxt/forbidden")
            raise IgnoreRequest(f"Forbidden by robots.txt: {refusal.reason}") from None
        except SlotNotReady as late:
            logger.info("Dropped %(request)s: its host's slot is %(wait).1f s away, more than "
                        "POLITE_MAX_WAIT", {"request": request, "wait": late.wait_s})
            self._stats.inc_value("polite/too_long")
            raise IgnoreRequest(f"polite: {late.reason}") from None
        except RequestRefused as refusal:
            logger.info("Refused by polite: %(request)s (%(reason)s)",
                        {"request": request, "reason": refusal.reason})
            self._stats.inc_value("polite/refused")
            raise IgnoreRequest(f"polite: {refusal.reason}") from None
        request.meta[GRANT_KEY] = grant
        if grant.usage is not None:  # POLITE_PURPOSE: the URL's AI-usage preferences for it
            request.meta["polite_usage"] = grant.usage
        if self._signer is not None:  # as it leaves: its created time is now
            for name, value in self._signer.headers(request.method, request.url):
                request.headers[name] = value
        if grant.waited_s > 0.001:
            self._stats.inc_value("polite/waited")
            self._stats.inc_value("polite/wait_ms", round(grant.waited_s * 1000))

    def _downloaded(self, response: Response, request: Request, **_: Any) -> None:
        retry_after = response.headers.get(b"Retry-After")
        latency = request.meta.get("download_latency")
        elapsed_s = float(latency) if isinstance(latency, int | float) else None
        told = None if retry_after is None else _text(retry_after)
        grant = request.meta.get(GRANT_KEY)
        request.meta[_REPORTED] = True
        if response.status in (429, 503):
            self._stats.inc_value(f"polite/backoff/{response.status}")
        if isinstance(self._gate, PoliteGate):
            self._gate.report(request.url, response.status, elapsed_s=elapsed_s,
                              retry_after=told, grant=grant).add_done_callback(self._reported)
            return
        report = self._gate.report(request.url, response.status, elapsed_s=elapsed_s,
                                   retry_after=told, grant=grant)
        if self._gate.reports_at_once:
            # The store in memory: done here, with no task (a task a response cost more
            # than the report itself).
            try:
                started = run_now(report)
            except Exception as exc:  # a report lost is logged; the crawl goes on
                logger.warning("polite could not record a response: %s", exc)
                return
            if not isinstance(started, Rest):
                return
            report = _rest(started)  # not expected: finished in a task all the same
        task = asyncio.get_running_loop().create_task(report)
        self._reports.add(task)
        task.add_done_callback(self._reports.discard)
        task.add_done_callback(self._reported)

    def process_response(self, request: Request, response: Response) -> Response:
        """A response that was not downloaded (a middleware after this one answered from
        its cache): the request granted its slot never went, and its lease ends now."""
        if GRANT_KEY in request.meta and _REPORTED not in request.meta:
            self._abandon(request)
        return response

    def process_exception(self, request: Request, exception: BaseException) -> None:
        """A request granted its slot got no response (a download error, or a middleware
        after this one dropped it): with a shared store its host's lease ends now."""
        if GRANT_KEY in request.meta and _REPORTED not in request.meta:
            self._abandon(request)

    def _abandon(self, request: Request) -> None:
        request.meta[_REPORTED] = True
        if isinstance(self._gate, PoliteGate):
            self._gate.abandon(request.url).add_done_callback(self._reported)
            return
        if self._gate.reports_at_once:
            return  # the store in memory takes no lease
        task = asyncio.get_running_loop().create_task(self._gate.abandon(request.url))
        self._reports.add(task)
        task.add_done_callback(self._reports.discard)
        task.add_done_callback(self._reported)

    def _reported(self, done: asyncio.Future[None] | concurrent.futures.Future[None]) -> None:
        error = None if done.cancelled() else done.exception()
        if error is not None:
            logger.warning("polite could not record a response: %s", error)

    async def _closed(self) -> None:
        gate = self._gate
        if isinstance(gate, LoopGate):  # on the reactor's loop: awaited there
            await asyncio.gather(*self._reports, return_exceptions=True)
            await gate.close()
        else:
            gate.close()
