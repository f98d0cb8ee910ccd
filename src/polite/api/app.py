"""``POST /politeness``, ``GET /politeness?urls=``, ``POST /politeness/verbose`` (seed 001,
same names and shapes), ``/delays``, ``/health``, ``/metrics``, seed 001's ``/env`` and
``/trace``, the operator's ``/dashboard`` and an OpenAPI description."""

from __future__ import annotations

import ipaddress
import math
import secrets
import time
from collections import Counter as CounterOf
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from polite.api.dashboard import MAX_PAGE_ROWS, SORTS, STATES, Dashboard, HostQuery, static_file
from polite.config import DAY_S
from polite.core._documents import read_json
from polite.core.access import (
    SESSION_S,
    allowed_host_names,
    cross_origin,
    host_refused,
    session_valid,
    session_value,
    token_matches,
)
from polite.core.politeness.values import Allowed, Decision, Disallowed, Refused, WaitUntil
from polite.core.robots.lifecycle import Parsed
from polite.core.robots.robotstxt import RobotsTxt
from polite.core.robots.usage import Preferences, purpose_json
from polite.core.sitemaps.model import MAX_SITEMAP_URLS
from polite.core.urls import host_name_problem, split_origin
from polite.core.usage.vocab import PURPOSES
from polite.errors import ConfigError, DocumentTooLarge, InvalidURL, MalformedDocument
from polite.fetch.cache import PageCache
from polite.fetch.politeness import LEASE_S, Answer, Politeness, message, warning
from polite.fetch.robots import robots_usage
from polite.fetch.sitemaps import SitemapWalker, WalkSummary
from polite.storage.base import Store, store_failed

if TYPE_CHECKING:
    from polite.api.metrics import Exposition

__all__ = ["MAX_BODY_BYTES", "MAX_URLS_PER_CALL", "MAX_URL_CHARS", "SESSION_COOKIE",
           "create_app"]

# A bound on one call: enough for any crawler's batch, small enough to answer quickly.
MAX_URLS_PER_CALL = 1000
MAX_BODY_BYTES = 1024 * 1024
# The dashboard's session once its token was given: never the token itself (cookies are
# not kept per port: every other service on the host name receives them).
SESSION_COOKIE = "polite_session"
# Matching a URL against robots.txt costs its rules times the URL's length: a bound on the
# length bounds the work of a URL (the sitemaps protocol's bound, more than URLs need).
MAX_URL_CHARS = 2048
# A delay set at run time keeps to the bound every surface's delay setting has (a day).
MAX_DELAY_MS = DAY_S * 1000


class _Problem(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _bounded(request: Request, name: str, default: int, most: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or int(raw) > most:
        raise _Problem(400, f"'{name}' must be a whole number from 0 to {most}")
    return int(raw)


_TRUE, _FALSE = ("1", "true", "yes"), ("0", "false", "no")


def _flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name)
    if raw is None:
        return False
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise _Problem(400, f"'{name}' must be true or false (1/0, yes/no), not {raw[:40]!r}")


def _only(request: Request, known: tuple[str, ...]) -> None:
    """A query parameter the endpoint does not read, or one given twice, is a 400: a
    misspelt ``reserve=ture`` was read as false and reserved nothing."""
    seen: set[str] = set()
    for name, _ in request.query_params.multi_items():
        if name not in known:
            told = f"; it reads {', '.join(known)}" if known else "; it reads none"
            raise _Problem(400, f"unknown query parameter {name[:40]!r}{told}")
        if name in seen:
            raise _Problem(400, f"query parameter '{name}' given twice")
        seen.add(name)


def _keys(item: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    for key in item:
        if key not in known:
            raise _Problem(400, f"{where}unknown key {key[:40]!r} (known: {', '.join(known)})")


NO_RETRY = -1  # seed 001: "retryAfter -1 ... a delay does not have to be considered"


def _verdict_json(found: Answer) -> dict[str, object]:
    """One URL's answer in seed 001's shape: ``retryAfter`` in milliseconds, -1 when waiting
    will not change it; ``error`` the cause in words."""
    wait_s = found.wait_s
    shown: dict[str, object] = {
        "url": found.url, "allowed": found.allowed, "error": message(found),
        "retryAfter": NO_RETRY if wait_s is None else max(0, math.ceil(wait_s * 1000))}
    cut = warning(found)
    if cut is not None:
        shown["warning"] = cut
    return shown


def _decision_json(decision: Decision) -> dict[str, object]:
    """The decision as a value (``?decision=true``), for clients that act on its kind (the
    drop-ins against a running service) rather than on its words."""
    match decision:
        case Allowed():
            return {"kind": "allowed"}
        case WaitUntil(source=source, line=line, field=field):
            shown: dict[str, object] = {"kind": "wait", "source": source.name.lower(),
                                        "line": line}
            if field is not None:  # a brace block's: which of its fields
                shown["field"] = field.name.lower()
            return shown
        case Disallowed(rule=rule, line=line, dialect=dialect, explanation=explanation):
            return {"kind": "disallowed", "pattern": None if rule is None else rule.pattern,
                    "line": line, "dialect": str(dialect), "explanation": explanation}
        case Refused(reason=reason):
            return {"kind": "refused", "reason": reason.name.lower()}
    raise AssertionError(decision)


def _problem(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message, "status": status}, status_code=status)


# What a body of each endpoint holds, bounded before it is parsed (the parser's time is
# not given back to the event loop: 1 MiB of nested or many small arrays held it 100 to
# 230 ms): how deep, and how many array elements and object members in all. A URL list
# is an array of strings; a feedback call an array of objects of six keys at most.
_URL_LIST = (1, MAX_URLS_PER_CALL)
_FEEDBACK_KEYS = ("url", "status", "elapsedMs", "retryAfter", "lateMs", "lease")
_FEEDBACK = (2, MAX_URLS_PER_CALL * (1 + len(_FEEDBACK_KEYS)))
_DELAY = (1, 8)  # one member; a few more are named in the 400 that refuses them


async def _json_body(request: Request, bounds: tuple[int, int], expected: str) -> Any:
    """The body as JSON, at most ``bounds`` (depth, items) large: a 413 past the bytes or
    the items, a 400 saying what was ``expected`` when nested deeper or not JSON."""
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise _Problem(413, f"body over {MAX_BODY_BYTES} bytes")
    max_depth, max_items = bounds
    try:
        return read_json(body, max_depth=max_depth, max_items=max_items)
    except DocumentTooLarge as exc:
        raise _Problem(413, f"the body holds {exc}; at most {max_items}: {expected}") from None
    except MalformedDocument as exc:
        raise _Problem(400, f"{expected}: the body is not JSON this server reads: "
                       f"{exc}") from None


def _host_of(url: str) -> str | None:
    """The host of an http(s) URL, or None for what is no such URL (its verdict says so);
    a host no request could go to (a label over 63 characters, say) is a 400."""
    try:
        host = split_origin(url)[1]
    except InvalidURL:
        return None
    problem = host_name_problem(host)
    if problem is not None:
        raise _Problem(400, f"{url[:200]!r}: {problem}")
    return host


_URLS_EXPECTED = "expected a JSON array of URL strings"


def _url_list(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(u, str) for u in value):
        raise _Problem(400, _URLS_EXPECTED)
    if len(value) > MAX_URLS_PER_CALL:
        raise _Problem(413, f"{len(value)} URLs in one call; at most {MAX_URLS_PER_CALL}")
    for n, url in enumerate(value):
        if len(url) > MAX_URL_CHARS:
            raise _Problem(414, f"URL {n} is {len(url)} characters long; at most "
                           f"{MAX_URL_CHARS}")
        _host_of(url)
    return value


_FEEDBACK_EXPECTED = (f"expected a JSON array (at most {MAX_URLS_PER_CALL}) of "
                      + "{" + ", ".join(f'"{key}"' for key in _FEEDBACK_KEYS) + "}")
_DELAY_EXPECTED = f"expected {{\"delay\": milliseconds between 0 and {MAX_DELAY_MS}}}"


def _feedback(item: Any, n: int
              ) -> tuple[str, int | None, float | None, str | None, float | None, bool]:
    """One report of what a fetch got: ``{"url", "status", "elapsedMs"?, "retryAfter"?,
    "lateMs"?, "lease"?}``; ``lateMs``: how long after its grant the request's slot should
    count from (it went out late, or the client counts from the answer); ``lease``: the
    request held its host's lease (``reserve=true&lease=true``), which ends here.
    ``{"url", "lateMs"}`` alone says a request is leaving late, before any answer;
    ``{"url", "lease": true}`` alone, that it got none (it failed)."""
    if not isinstance(item, dict):
        raise _Problem(400, f"item {n}: expected an object")
    _keys(item, _FEEDBACK_KEYS, f"item {n}: ")
    lease = item.get("lease", False)
    if not isinstance(lease, bool):
        raise _Problem(400, f"item {n}: 'lease' must be true or false")
    url, status = item.get("url"), item.get("status")
    elapsed, retry_after = item.get("elapsedMs"), item.get("retryAfter")
    if isinstance(url, str) and len(url) > MAX_URL_CHARS:
        raise _Problem(414, f"item {n}: 'url' is {len(url)} characters long; at most "
                       f"{MAX_URL_CHARS}")
    if not isinstance(url, str) or _host_of(url) is None:
        raise _Problem(400, f"item {n}: 'url' must be an absolute http(s) URL")
    departure = status is None and (item.get("lateMs") is not None or lease)
    if not departure and (isinstance(status, bool) or not isinstance(status, int)
                          or not 100 <= status <= 599):
        raise _Problem(400, f"item {n}: 'status' must be an HTTP status code")
    if elapsed is not None and (isinstance(elapsed, bool) or not isinstance(elapsed, int | float)
                                or not 0 <= elapsed <= 3_600_000):
        raise _Problem(400, f"item {n}: 'elapsedMs' must be milliseconds (0 to 3600000)")
    if isinstance(retry_after, int) and not isinstance(retry_after, bool):
        retry_after = str(retry_after)
    if retry_after is not None and not isinstance(retry_after, str):
        raise _Problem(400, f"item {n}: 'retryAfter' must be the header's value "
                       "(seconds or an HTTP date)")
    late = item.get("lateMs")
    if late is not None and (isinstance(late, bool) or not isinstance(late, int | float)
                             or not 0 <= late <= 3_600_000):
        raise _Problem(400, f"item {n}: 'lateMs' must be milliseconds (0 to 3600000)")
    return (url, status, None if elapsed is None else elapsed / 1000, retry_after,
            None if late is None else late / 1000, lease)


def _ms(seconds: float) -> int:
    return max(0, math.ceil(seconds * 1000))


def _host_query(request: Request) -> HostQuery:
    params = request.query_params
    sort = params.get("sort", "last_seen")
    if sort not in SORTS:
        raise _Problem(400, f"'sort' must be one of {', '.join(SORTS)}")
    order = params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise _Problem(400, "'order' must be 'asc' or 'desc'")
    state = params.get("state", "all")
    if state not in STATES:
        raise _Problem(400, f"'state' must be one of {', '.join(STATES)}")
    text = params.get("q", "")
    if len(text) > 253:
        raise _Problem(400, "'q' is longer than a host name can be")
    return HostQuery(sort, order == "desc", text, state,
                     _bounded(request, "offset", 0, 10_000_000),
                     max(1, _bounded(request, "limit", 50, MAX_PAGE_ROWS)))


_STATIC = {"dashboard.js": "text/javascript; charset=utf-8",
           "dashboard.css": "text/css; charset=utf-8"}
_SECURITY = {"x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
             "content-security-policy": "default-src 'self'; img-src 'self' data:; "
                                        "frame-ancestors 'none'"}


def create_app(politeness: Politeness, store: Store, *, admin_token: str | None = None,
               sitemaps: SitemapWalker | None = None, cache: PageCache | None = None,
               on_startup: Callable[[], Awaitable[None]] | None = None,
               on_shutdown: Callable[[], Awaitable[None]] | None = None,
               env: Mapping[str, object] | None = None,
               allowed_hosts: Collection[str] = (), private_reads: bool = False,
               key_directory: Route | None = None) -> Starlette:
    """The app; ``admin_token``, when set, is required (Bearer) for writes: PUT and DELETE
    /delays, feedback, and decisions that reserve. ``env`` is the configuration in force,
    secrets already masked (``GET /env``). A request must name an IP address, a loopback
    name or one of ``allowed_hosts`` as its ``Host``, and a write must not come from another
    origin's page. ``private_reads`` (a server listening beyond loopback): decisions
    (/politeness, /sitemaps) and what shows what clients fetch (/trace, /env, /delays,
    /metrics, the dashboard) need the token too, as Bearer or as the session cookie
    ``GET /dashboard?token=`` sets; /health, /openapi.json, the index and the key
    directory stay open. ``key_directory``: the route of a Web Bot Auth key directory
    (:func:`~polite.api.directory.directory_route`)."""
    if private_reads and admin_token is None:
        raise ConfigError("private_reads needs an admin_token")
    hosts = allowed_host_names(allowed_hosts)
    session_key = secrets.token_bytes(32)  # a restart ends the dashboard's sessions
    activity = politeness.activity
    answered: CounterOf[str] = CounterOf()  # the REST API's decisions, by cause
    decided: CounterOf[str] = CounterOf()  # and by their result, allowed or refused
    exposition: list[Exposition] = []  # made at the first GET /metrics
    dashboard = Dashboard(politeness, store, cache=cache, env=env)
    pages = {name: static_file(name) for name in ("dashboard.html", "index.html", *_STATIC)}

    async def answer(urls: list[str], request: Request) -> list[Answer]:
        reserve = _flag(request, "reserve")
        if reserve:  # taking a slot is a write
            authorize(request)
        agent = request.query_params.get("agent") or None
        ip = request.query_params.get("ip") or None
        if ip is not None:
            try:
                ip = str(ipaddress.ip_address(ip))
            except ValueError:
                raise _Problem(400, f"'ip' must be an IP address, not {ip[:60]!r}") from None
        # lease: each slot taken holds its host until the feedback of its request says
        # "lease" (or LEASE_S passes): one request of a host in flight among the clients
        lease_s = LEASE_S if reserve and _flag(request, "lease") else None
        answers = await politeness.check(urls, reserve=reserve, agent=agent, ip=ip,
                                         lease_s=lease_s)
        for found in answers:
            decided["allowed" if found.allowed else "refused"] += 1
            cause = found.cause
            if cause != "invalid":
                activity.count(urlsplit(found.url).hostname or "", cause)
                answered[cause] += 1
        return answers

    def guarded(handler: Callable[[Request], Awaitable[Response]], *params: str
                ) -> Callable[[Request], Awaitable[Response]]:
        """``handler``, its problems answered as JSON; ``params``: the query parameters
        it reads (any other is a 400)."""
        async def run(request: Request) -> Response:
            try:
                refused = host_refused(request.headers.get("host"), hosts)
                if refused is not None:
                    raise _Problem(403, refused)
                _only(request, params)
                return await handler(request)
            except _Problem as problem:
                return _problem(problem.status, problem.message)
            except Exception as exc:
                if not store_failed(exc):
                    raise
                # Redis stopped, a SQLite file deleted under the server: a write is not
                # acknowledged when it could not be kept.
                return _problem(503, f"the store does not answer or cannot keep this "
                                f"({type(exc).__name__}: {exc})")
        return run

    async def post_politeness(request: Request) -> Response:
        urls = _url_list(await _json_body(request, _URL_LIST, _URLS_EXPECTED))
        return JSONResponse([v.url for v in await answer(urls, request) if v.allowed])

    async def get_politeness(request: Request) -> Response:
        raw = request.query_params.get("urls")
        if raw is None:
            raise _Problem(400, "missing query parameter 'urls' (comma-separated URLs)")
        urls = _url_list([u.strip() for u in raw.strip("[]").split(",") if u.strip()])
        return JSONResponse([v.url for v in await answer(urls, request) if v.allowed])

    async def post_verbose(request: Request) -> Response:
        urls = _url_list(await _json_body(request, _URL_LIST, _URLS_EXPECTED))
        purpose = request.query_params.get("purpose") or None
        if purpose is not None and purpose not in PURPOSES:
            raise _Problem(400, f"'purpose' must be one of {', '.join(PURPOSES)}")
        answers = await answer(urls, request)
        found = [_verdict_json(a) for a in answers]
        if _flag(request, "decision"):
            for given, shown in zip(answers, found, strict=True):
                shown["decision"] = _decision_json(given.decision)
        if purpose is not None:  # the robots.txt preferences beside the access decision
            agent = request.query_params.get("agent") or politeness.agent
            # By file, so that a large file's lookups go to a worker thread together.
            by_file: dict[int, tuple[RobotsTxt, list[int]]] = {}
            for i, given in enumerate(answers):
                if given.cause != "invalid":
                    state = await politeness.robots_state(given.url)
                    if isinstance(state, Parsed):
                        by_file.setdefault(id(state.robots), (state.robots, []))[1].append(i)
            usage = [Preferences()] * len(answers)
            for robots, places in by_file.values():
                got = await robots_usage(robots, [answers[i].url for i in places], agent)
                for i, prefs in zip(places, got, strict=True):
                    usage[i] = prefs
            for prefs, shown in zip(usage, found, strict=True):
                shown["usage"] = purpose_json(prefs, purpose)
        return JSONResponse(found)

    async def get_sitemaps(request: Request) -> Response:
        if sitemaps is None:
            raise _Problem(404, "this server reads no sitemaps")
        site = request.query_params.get("site")
        if not site:
            raise _Problem(400, "missing query parameter 'site' (https://example.com)")
        limit = _bounded(request, "limit", 1000, MAX_SITEMAP_URLS)
        max_files = _bounded(request, "maxFiles", 100, 1000)
        max_depth = _bounded(request, "maxDepth", 5, 10)
        try:
            origin = split_origin(site)[0]
        except InvalidURL as exc:
            raise _Problem(400, str(exc)) from exc
        _host_of(origin)
        summary = WalkSummary(origin)
        files: list[dict[str, object]] = []
        urls: list[str] = []
        walker = sitemaps.with_limits(max_files=max_files, max_depth=max_depth)
        async for file, entries in walker.walk(origin, summary):
            files.append(file.as_json())
            urls.extend(entry.loc for entry in entries[:limit - len(urls)])
        return JSONResponse({"summary": summary.as_json(), "files": files, "urls": urls})

    async def get_delays(request: Request) -> Response:
        configured = await store.all_delays()
        rows = []
        robots = {**await store.all_robots_delays(), **politeness.robots_delays_s}
        for domain in sorted(set(configured) | set(robots)):
            conf = configured.get(domain)
            from_robots = robots.get(domain)
            chosen = [d for d in (conf, from_robots) if d is not None]
            delay = max(chosen) if chosen else politeness.default_delay_s
            rows.append({"domain": domain, "delay": round(delay * 1000),
                         "robotstxt_delay": None if from_robots is None
                         else round(from_robots * 1000),
                         "configured_delay": None if conf is None else round(conf * 1000)})
        return JSONResponse(rows)

    def bearer(request: Request) -> bool:
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        return admin_token is not None and token_matches(given, admin_token)

    def authorize(request: Request) -> None:
        """A write: from no other origin's page, and with the token when there is one."""
        refused = cross_origin(request.headers)
        if refused is not None:
            raise _Problem(403, refused)
        if admin_token is not None and not bearer(request):
            raise _Problem(401, "this server needs 'Authorization: Bearer <token>' "
                           "for writes")

    def private(handler: Callable[[Request], Awaitable[Response]]
                ) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` decides for clients or shows what they fetch: beyond loopback, only
        for the token's holder (Bearer, or the dashboard's session cookie: an EventSource
        sends no header)."""
        if not private_reads:
            return handler

        async def run(request: Request) -> Response:
            session = request.cookies.get(SESSION_COOKIE, "")
            if not bearer(request) and not session_valid(session, session_key, time.time()):
                raise _Problem(401, "this server listens beyond loopback: its decisions and "
                               "what it shows of its clients need 'Authorization: Bearer "
                               "<token>' (or open /dashboard?token=<token> once)")
            return await handler(request)
        return run

    async def delete_delay(request: Request) -> Response:
        authorize(request)
        await store.delete_delay(request.path_params["domain"].lower())
        return Response(status_code=204)

    async def post_feedback(request: Request) -> Response:
        authorize(request)
        body = await _json_body(request, _FEEDBACK, _FEEDBACK_EXPECTED)
        if not isinstance(body, list) or len(body) > MAX_URLS_PER_CALL:
            raise _Problem(400, _FEEDBACK_EXPECTED)
        reports = [_feedback(item, n) for n, item in enumerate(body)]
        paused: list[int | None] = []
        for url, status, elapsed_s, retry_after, late_s, lease in reports:
            if late_s:
                await politeness.note_late_start(url, late_s)
            if status is None:  # a departure (no answer yet), or a request that got none
                if lease:
                    await politeness.end_lease(url)
                paused.append(None)
                continue
            pause = await politeness.note_response(url, status, elapsed_s=elapsed_s,
                                                   retry_after=retry_after, ends_lease=lease)
            paused.append(None if pause is None else _ms(pause))
        return JSONResponse([{"url": r[0], "pausedFor": p}
                             for r, p in zip(reports, paused, strict=True)])

    async def put_delay(request: Request) -> Response:
        authorize(request)
        domain = request.path_params["domain"].lower()
        problem = host_name_problem(domain)
        if problem is not None:
            raise _Problem(400, f"PUT /delays/{{domain}}: {problem}")
        body = await _json_body(request, _DELAY, _DELAY_EXPECTED)
        if isinstance(body, dict):
            _keys(body, ("delay",), "")
        delay = body.get("delay") if isinstance(body, dict) else None
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay \
                <= MAX_DELAY_MS:
            raise _Problem(400, _DELAY_EXPECTED)
        if isinstance(delay, float):
            if not delay.is_integer():
                # The API speaks whole milliseconds everywhere; 1.5 is refused rather than
                # kept as something GET /delays would show rounded.
                raise _Problem(400, f"delay {delay!r}: expected whole milliseconds")
            delay = int(delay)
        await store.set_delay(domain, delay / 1000)
        return JSONResponse({"domain": domain, "configured_delay": delay})

    async def health(request: Request) -> Response:
        try:
            await store.check()  # the store answers and can keep what is written
        except Exception as exc:  # Redis stopped, a SQLite file gone: unhealthy, and why
            return JSONResponse({"status": "unavailable", "error": f"the store does not "
                                 f"answer: {type(exc).__name__}: {exc}"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def metrics(request: Request) -> Response:
        if not exposition:
            from polite.api.metrics import Exposition
            exposition.append(Exposition(politeness, activity, answered, decided, cache))
        return Response(exposition[0].text(), media_type=exposition[0].media_type)

    async def openapi(request: Request) -> Response:
        return JSONResponse(OPENAPI)

    async def get_env(request: Request) -> Response:
        return JSONResponse(dict(env or {}))

    async def get_trace(request: Request) -> Response:
        limit = _bounded(request, "limit", activity.trace_size, max(activity.trace_size, 1))
        entries = list(activity.trace)[::-1][:limit]
        return JSONResponse({"capacity": activity.trace_size,
                             "exchanges": [entry.as_json() for entry in entries]})

    def html(name: str) -> Response:
        return HTMLResponse(pages[name], headers=_SECURITY)

    async def index(request: Request) -> Response:
        return html("index.html")

    async def dashboard_page(request: Request) -> Response:
        given = request.query_params.get("token")
        if given is not None:
            if admin_token is None or not token_matches(given, admin_token):
                raise _Problem(401, "not this server's admin token")
            # A session for this page's own requests (its live feed cannot send a header),
            # kept as a cookie that is not the token, and the token taken out of the
            # address bar.
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items()
                              if k != "token"])
            response = RedirectResponse(f"/dashboard?{rest}" if rest else "/dashboard", 303)
            response.set_cookie(SESSION_COOKIE, session_value(session_key, time.time()),
                                max_age=SESSION_S, httponly=True, samesite="strict",
                                secure=request.url.scheme == "https")
            return response
        return await private(show_dashboard)(request)

    async def show_dashboard(request: Request) -> Response:
        return html("dashboard.html")

    async def dashboard_static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            raise _Problem(404, f"no such file: {name}")
        return Response(pages[name], media_type=_STATIC[name],
                        headers={"cache-control": "no-cache", **_SECURITY})

    async def dashboard_hosts(request: Request) -> Response:
        return JSONResponse(await dashboard.hosts(_host_query(request)))

    async def dashboard_summary(request: Request) -> Response:
        return JSONResponse(await dashboard.summary())

    async def dashboard_events(request: Request) -> Response:
        query = _host_query(request)
        return StreamingResponse(dashboard.events(query), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache",
                                          "x-accel-buffering": "no"})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if on_startup is not None:
            await on_startup()
        yield
        if on_shutdown is not None:
            await on_shutdown()

    decide = ("reserve", "lease", "agent", "ip")
    host_query = ("sort", "order", "q", "state", "offset", "limit")
    routes = [
        Route("/politeness", guarded(private(post_politeness), *decide), methods=["POST"]),
        Route("/politeness", guarded(private(get_politeness), *decide, "urls"),
              methods=["GET"]),
        Route("/politeness/verbose", guarded(private(post_verbose), *decide, "purpose",
                                             "decision"), methods=["POST"]),
        Route("/delays", guarded(private(get_delays)), methods=["GET"]),
        Route("/delays/{domain}", guarded(put_delay), methods=["PUT"]),
        Route("/delays/{domain}", guarded(delete_delay), methods=["DELETE"]),
        Route("/politeness/feedback", guarded(post_feedback), methods=["POST"]),
        Route("/sitemaps", guarded(private(get_sitemaps), "site", "limit", "maxFiles",
                                   "maxDepth"), methods=["GET"]),
        Route("/health", guarded(health), methods=["GET"]),
        Route("/metrics", guarded(private(metrics)), methods=["GET"]),
        Route("/openapi.json", guarded(openapi), methods=["GET"]),
        Route("/env", guarded(private(get_env)), methods=["GET"]),
        Route("/trace", guarded(private(get_trace), "limit"), methods=["GET"]),
        Route("/", guarded(index), methods=["GET"]),
        Route("/dashboard", guarded(dashboard_page, "token", *host_query), methods=["GET"]),
        Route("/dashboard/static/{name}", guarded(dashboard_static), methods=["GET"]),
        Route("/dashboard/hosts", guarded(private(dashboard_hosts), *host_query),
              methods=["GET"]),
        Route("/dashboard/summary", guarded(private(dashboard_summary)), methods=["GET"]),
        Route("/dashboard/events", guarded(private(dashboard_events), *host_query),
              methods=["GET"]),
    ]
    if key_directory is not None:
        routes.append(key_directory)
    return Starlette(routes=routes, lifespan=lifespan)


_URLS = {"type": "array", "items": {"type": "string", "format": "uri",
                                    "maxLength": MAX_URL_CHARS},
         "maxItems": MAX_URLS_PER_CALL}
_VERDICT = {"type": "object", "properties": {
    "url": {"type": "string"}, "allowed": {"type": "boolean"},
    "error": {"type": ["string", "null"]},
    "retryAfter": {"type": "integer", "description": "ms; -1 when waiting will not help"}}}
_QUERY = [{"name": "reserve", "in": "query", "schema": {"type": "boolean"},
           "description": "also take the host's slot for each allowed URL"},
          {"name": "lease", "in": "query", "schema": {"type": "boolean"},
           "description": "with reserve: a slot taken also holds its host until the "
                          "feedback of its request says \"lease\": true (or a minute "
                          "passes): one request of a host in flight among the clients"},
          {"name": "ip", "in": "query", "schema": {"type": "string"},
           "description": "the crawler's egress IP (REGP Ip-allow / Ip-delay / Ip-rate)"},
          {"name": "agent", "in": "query", "schema": {"type": "string"},
           "description": "the crawler's product token (default: the server's --agent)"}]


_TRACE = {"type": "object", "properties": {
    "time": {"type": "number"}, "method": {"type": "string"}, "url": {"type": "string"},
    "decision": {"type": "string",
                 "enum": ["allowed", "robots", "delay", "cache", "invalid", "error"]},
    "status": {"type": "integer"}, "delayMs": {"type": "integer"},
    "durationMs": {"type": "number"}}}
_HOST_QUERY = [
    {"name": "sort", "in": "query", "schema": {"type": "string", "enum": list(SORTS)}},
    {"name": "order", "in": "query", "schema": {"type": "string", "enum": ["asc", "desc"]}},
    {"name": "q", "in": "query", "schema": {"type": "string"},
     "description": "hosts containing this"},
    {"name": "state", "in": "query", "schema": {"type": "string", "enum": list(STATES)}},
    {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
    {"name": "limit", "in": "query",
     "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_ROWS}}]


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "polite politeness service", "version": "1"},
    "paths": {
        "/politeness": {
            "post": {"summary": "the URLs that may be fetched now (at most one per host)",
                     "parameters": _QUERY, "requestBody": _json(_URLS),
                     "responses": {"200": _json(_URLS)}},
            "get": {"summary": "as POST, URLs comma-separated in ?urls=",
                    "parameters": [*_QUERY, {"name": "urls", "in": "query", "required": True,
                                             "schema": {"type": "string"}}],
                    "responses": {"200": _json(_URLS)}}},
        "/politeness/verbose": {
            "post": {"summary": "a verdict, reason and retryAfter for every URL",
                     "parameters": [*_QUERY, {
                         "name": "purpose", "in": "query",
                         "schema": {"type": "string", "enum": list(PURPOSES)},
                         "description": "add each URL's AI-usage preferences for this "
                                        "purpose (robots.txt Content-Usage, Content-Signal, "
                                        "License), with their sources"}, {
                         "name": "decision", "in": "query", "schema": {"type": "boolean"},
                         "description": "add each URL's decision as a value: kind (allowed, "
                                        "wait, disallowed, refused) and what made it (source "
                                        "and line; pattern, line and dialect; reason)"}],
                     "requestBody": _json(_URLS),
                     "responses": {"200": _json({"type": "array", "items": _VERDICT})}}},
        "/politeness/feedback": {
            "post": {"summary": "what fetches got: response times feed the adaptive delay, "
                                "429/503 pause the host (Retry-After honoured)",
                     "requestBody": _json({"type": "array", "items": {
                         "type": "object", "required": ["url", "status"], "properties": {
                             "url": {"type": "string"}, "status": {"type": "integer"},
                             "elapsedMs": {"type": "number"},
                             "retryAfter": {"type": ["string", "integer"]},
                             "lateMs": {"type": "number"},
                             "lease": {"type": "boolean",
                                       "description": "the request held its host's lease "
                                                      "(reserve with lease): it ends"}}}}),
                     "responses": {"200": _json({"type": "array"})}}},
        "/delays": {"get": {"summary": "delays per domain, in ms",
                            "responses": {"200": _json({"type": "array"})}}},
        "/delays/{domain}": {"put": {
            "summary": "set a domain's delay at run time (persisted)",
            "parameters": [{"name": "domain", "in": "path", "required": True,
                            "schema": {"type": "string"}}],
            "requestBody": _json({"type": "object",
                                  "properties": {"delay": {"type": "integer",
                                                           "minimum": 0,
                                                           "maximum": MAX_DELAY_MS}}}),
            "responses": {"200": _json({"type": "object"})}},
            "delete": {"summary": "forget a domain's configured delay",
                       "parameters": [{"name": "domain", "in": "path", "required": True,
                                       "schema": {"type": "string"}}],
                       "responses": {"204": {}}}},
        "/sitemaps": {"get": {"summary": "walk a site's sitemaps from its robots.txt, "
                              "politely: every file, totals, and the first page URLs",
                              "parameters": [
                                  {"name": "site", "in": "query", "required": True,
                                   "schema": {"type": "string"}},
                                  {"name": "limit", "in": "query",
                                   "schema": {"type": "integer", "default": 1000}},
                                  {"name": "maxFiles", "in": "query",
                                   "schema": {"type": "integer", "default": 100}},
                                  {"name": "maxDepth", "in": "query",
                                   "schema": {"type": "integer", "default": 5}}],
                              "responses": {"200": _json({"type": "object"})}}},
        "/health": {"get": {"summary": "liveness", "responses": {"200": _json({})}}},
        "/env": {"get": {"summary": "the configuration in force (secrets masked)",
                         "responses": {"200": _json({"type": "object"})}}},
        "/trace": {"get": {"summary": "the last exchanges through the proxy, newest first: "
                                      "time, method, url, decision, status, delayMs, "
                                      "durationMs (--trace-size of them are kept)",
                           "parameters": [{"name": "limit", "in": "query",
                                           "schema": {"type": "integer"}}],
                           "responses": {"200": _json({"type": "object", "properties": {
                               "capacity": {"type": "integer"},
                               "exchanges": {"type": "array", "items": _TRACE}}})}}},
        "/": {"get": {"summary": "what this service is, with links to its pages",
                      "responses": {"200": {"content": {"text/html": {}}}}}},
        "/openapi.json": {"get": {"summary": "this document",
                                  "responses": {"200": _json({"type": "object"})}}},
        "/dashboard": {"get": {"summary": "the operator's dashboard (HTML)",
                               "parameters": [
                                   {"name": "token", "in": "query",
                                    "schema": {"type": "string"},
                                    "description": "the --admin-token, off loopback: a "
                                                   "session cookie (not the token) for the "
                                                   "page and its feed"},
                                   *_HOST_QUERY],
                               "responses": {"200": {"content": {"text/html": {}}}}}},
        "/dashboard/static/{name}": {"get": {
            "summary": "the dashboard's script and style, served from the package",
            "parameters": [{"name": "name", "in": "path", "required": True,
                            "schema": {"type": "string"}}],
            "responses": {"200": {}, "404": {}}}},
        "/dashboard/hosts": {"get": {
            "summary": "one page of known hosts with what the dashboard shows of each",
            "parameters": _HOST_QUERY,
            "responses": {"200": _json({"type": "object"})}}},
        "/dashboard/summary": {"get": {
            "summary": "the dashboard's header: rates, status codes over time, the cache, "
                       "the store and its nodes",
            "responses": {"200": _json({"type": "object"})}}},
        "/dashboard/events": {"get": {
            "summary": "server-sent events: every second, a 'tick' with the summary and the "
                       "page of hosts asked for",
            "parameters": _HOST_QUERY,
            "responses": {"200": {"content": {"text/event-stream": {}}}}}},
        "/metrics": {"get": {"summary": "Prometheus text", "responses": {"200": {}}}},
    },
}
