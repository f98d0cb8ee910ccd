"""What ``polite.site``'s middleware adds to each request, ASGI and WSGI, in one run.

The apps are called in process (no server, no sockets), so the figures are the middleware's
own work: for a person, one cached User-Agent lookup; for a robot, its identity, a
verification by published range (Googlebot from an address in Google's range: no DNS), the
robots.txt decision and one row written to the SQLite access log (WAL, NORMAL sync, as
shipped). The bare apps are the baseline: a Starlette app with one route, and a plain WSGI
function. Rounds interleave the variants (bare, person, robot) in a rotating order; each
round times ``--requests`` calls of each; the table gives the medians over rounds of the
per-request time and of the per-round added time (variant minus bare, same round).

Run: ``.venv/bin/python bench/site_middleware.py [--rounds 15] [--requests 2000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from polite.core.site import Check, Field, RuleRow, Section, SiteRules, Visit
from polite.site import SiteGuard, SiteMiddleware, SiteStore, SiteWSGIMiddleware

PERSON = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
          "Chrome/124.0.0.0 Safari/537.36")
ROBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
ROBOT_IP = "66.249.66.1"
RULES = SiteRules(sections=(
    Section("Whole site", "/", "webmaster", tuple(
        RuleRow("*", Field.DISALLOW, f"/private/{i}/") for i in range(40))),
    Section("Blog", "/blog/", "editor", (RuleRow("*", Field.DISALLOW, "/blog/drafts/"),)),
))


async def _page(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


def _wsgi(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("content-type", "text/plain"), ("content-length", "5")])
    return [b"hello"]


def _scope(user_agent: str) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": "/blog/post-1",
            "raw_path": b"/blog/post-1", "query_string": b"", "root_path": "",
            "headers": [(b"host", b"example.org"), (b"user-agent", user_agent.encode()),
                        (b"accept", b"text/html")],
            "client": (ROBOT_IP, 40000), "server": ("127.0.0.1", 80)}


def _environ(user_agent: str) -> dict[str, Any]:
    return {"REQUEST_METHOD": "GET", "PATH_INFO": "/blog/post-1", "QUERY_STRING": "",
            "SCRIPT_NAME": "", "SERVER_NAME": "example.org", "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": "example.org",
            "HTTP_USER_AGENT": user_agent, "REMOTE_ADDR": ROBOT_IP, "wsgi.url_scheme": "http"}


def _asgi_timer(app: Any, user_agent: str) -> Callable[[int], float]:
    scope = _scope(user_agent)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        return None

    async def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            await app(dict(scope), receive, send)
        return time.perf_counter() - start

    loop = asyncio.new_event_loop()
    return lambda n: loop.run_until_complete(run(n))


def _wsgi_timer(app: Any, user_agent: str) -> Callable[[int], float]:
    environ = _environ(user_agent)

    def start_response(status: str, headers: list[tuple[str, str]], *exc: Any) -> None:
        return None

    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            body = app(dict(environ), start_response)
            for _chunk in body:
                pass
            close = getattr(body, "close", None)
            if close is not None:
                close()
        return time.perf_counter() - start

    return run


def _parts(guard: SiteGuard, rounds: int, requests: int) -> dict[str, float]:
    """The robot path's steps, timed alone (interleaved like the rest)."""
    identity = guard.identify(ROBOT)
    check = guard.known_verdict(identity, ROBOT_IP)
    assert isinstance(check, Check)
    visit = Visit("GET", "/blog/post-1", ROBOT, ROBOT_IP)
    entry = guard.decide(visit, identity, check).log
    assert entry is not None
    steps: dict[str, Callable[[], object]] = {
        "identify": lambda: guard.identify(ROBOT),
        "verify": lambda: guard.known_verdict(identity, ROBOT_IP),
        "decide": lambda: guard.decide(visit, identity, check),
        "log": lambda: guard.log(entry, 200),
    }
    found: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(requests):
                step()
            found[name].append((time.perf_counter() - start) / requests * 1e6)
    return {name: statistics.median(times) for name, times in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = SiteStore(Path(folder) / "site.sqlite")
        store.save(RULES, now=time.time())
        guard = SiteGuard(store)
        bare_asgi = Starlette(routes=[Route("/{path:path}", _page)])
        bare_wsgi = _wsgi
        timers = {
            ("ASGI", "bare"): _asgi_timer(bare_asgi, PERSON),
            ("ASGI", "person"): _asgi_timer(SiteMiddleware(bare_asgi, guard), PERSON),
            ("ASGI", "robot"): _asgi_timer(SiteMiddleware(bare_asgi, guard), ROBOT),
            ("WSGI", "bare"): _wsgi_timer(bare_wsgi, PERSON),
            ("WSGI", "person"): _wsgi_timer(SiteWSGIMiddleware(bare_wsgi, guard), PERSON),
            ("WSGI", "robot"): _wsgi_timer(SiteWSGIMiddleware(bare_wsgi, guard), ROBOT),
        }
        for timer in timers.values():  # warm caches, compile the robots index
            timer(200)
        per_request: dict[tuple[str, str], list[float]] = {key: [] for key in timers}
        keys = list(timers)
        for round_number in range(args.rounds):
            shift = round_number % len(keys)
            for key in keys[shift:] + keys[:shift]:
                per_request[key].append(timers[key](args.requests) / args.requests * 1e6)
        parts = _parts(guard, args.rounds, args.requests)
        logged = len(store.visits(limit=10**9))
        store.close()
    print(f"polite.site middleware, {args.rounds} interleaved rounds of {args.requests} "
          f"requests per variant (in process; medians over rounds)")
    print(f"{'':6} {'variant':8} {'µs/request':>11} {'added µs':>9} {'× bare':>7}")
    for kind in ("ASGI", "WSGI"):
        bare = per_request[(kind, "bare")]
        for variant in ("bare", "person", "robot"):
            times = per_request[(kind, variant)]
            added = [t - b for t, b in zip(times, bare, strict=True)]
            ratio = [t / b for t, b in zip(times, bare, strict=True)]
            print(f"{kind:6} {variant:8} {statistics.median(times):11.1f} "
                  f"{statistics.median(added):9.1f} {statistics.median(ratio):7.2f}")
    print(f"a robot's request in parts (µs, medians): identify {parts['identify']:.2f}, "
          f"verify by range {parts['verify']:.2f}, decide {parts['decide']:.1f}, "
          f"log one row to SQLite {parts['log']:.1f}")
    print(f"({logged:,} robot requests logged to SQLite)")


if __name__ == "__main__":
    main()
