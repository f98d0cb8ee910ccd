"""The ASGI and WSGI adapters: thin shells over :class:`~polite.site.guard.SiteGuard`.

People's requests go straight to the application after one cached User-Agent lookup. A
robot's request is verified, decided, logged and then passed, refused (403) or throttled
(429 with Retry-After). ``GET /robots.txt`` is answered here from the rules in force, with
``Cache-Control: max-age`` set to the site's TTL (seed 003, 4.4).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from typing import Any
from urllib.parse import quote

from polite.core.identity import accept_signature_hint
from polite.core.site import ROBOTS_PATH, Action, Check, Identity, SiteDecision, Visit
from polite.site.guard import SiteGuard, refusal_body

__all__ = ["SiteMiddleware", "SiteWSGIMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def _refusal_headers(decision: SiteDecision, length: int) -> list[tuple[str, str]]:
    headers = [("content-type", "text/plain; charset=utf-8"), ("content-length", str(length))]
    if decision.retry_after_s is not None:
        headers.append(("retry-after", str(decision.retry_after_s)))
    if decision.ask_signature:
        headers.append(("accept-signature", accept_signature_hint()))
    return headers


def _with_usage(send: Send, usage: str) -> Send:
    """``send`` adding the Content-Usage header to the response, unless the app set one."""
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            if not any(k.lower() == b"content-usage" for k, _ in headers):
                headers.append((b"content-usage", usage.encode("latin-1")))
                message = {**message, "headers": headers}
        await send(message)
    return sending


def _start_with_usage(start_response: StartResponse, usage: str) -> StartResponse:
    def starting(line: str, headers: Any, *exc: Any) -> Any:
        if not any(k.lower() == "content-usage" for k, _ in headers):
            headers = [*headers, ("Content-Usage", usage)]
        return start_response(line, headers, *exc)
    return starting


class SiteMiddleware:
    """ASGI: ``app = SiteMiddleware(app, guard)``."""

    def __init__(self, app: ASGIApp, guard: SiteGuard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        user_agent = ""
        forwarded = None
        for key, value in scope["headers"]:
            if key == b"user-agent":
                user_agent = value.decode("latin-1")
            elif key == b"x-forwarded-for":
                forwarded = value.decode("latin-1")
        guard = self.guard
        identity = guard.identify(user_agent)
        path = scope["path"]
        is_robots = path == ROBOTS_PATH and scope["method"] in ("GET", "HEAD")
        usage = None if is_robots else guard.usage_header(path)
        if usage is not None:
            send = _with_usage(send, usage)
        if not identity.is_robot and not is_robots:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        ip = guard.client_ip(client[0] if client else None, forwarded)
        raw = scope.get("raw_path")
        target = raw.decode("latin-1") if raw else quote(path)
        query = scope.get("query_string", b"")
        if query:
            target += "?" + query.decode("latin-1")
        visit = Visit(scope["method"], target, user_agent, ip)
        check = await self._signed(scope, identity, target, ip) if identity.is_robot else None
        if check is None:
            check = await self._check(identity, ip)
        decision = guard.decide(visit, identity, check) if identity.is_robot else None
        if is_robots:
            await self._robots_txt(send, head=scope["method"] == "HEAD")
            if decision is not None and decision.log is not None:
                guard.log(decision.log, 200)
            return
        assert decision is not None  # a robot's request that is not /robots.txt
        if decision.action in (Action.REFUSE, Action.THROTTLE):
            body = refusal_body(decision)
            await send({"type": "http.response.start", "status": decision.status,
                        "headers": [(k.encode(), v.encode())
                                    for k, v in _refusal_headers(decision, len(body))]})
            await send({"type": "http.response.body", "body": body})
            if decision.log is not None:
                guard.log(decision.log, decision.status)
            return
        status: list[int] = []

        async def send_noting_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, send_noting_status)
        finally:
            if decision.log is not None:
                guard.log(decision.log, status[0] if status else None)

    async def _signed(self, scope: Scope, identity: Identity, target: str,
                      ip: str | None) -> Check | None:
        if self.guard.signatures is None:
            return None
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        host = next((v for k, v in headers if k.lower() == "host"), None)
        if host is None:
            server = scope.get("server")
            host = f"{server[0]}:{server[1]}" if server else "localhost"
        url = f"{scope.get('scheme', 'http')}://{host}{target}"
        return await self.guard.check_signature(identity, scope["method"], url, headers,
                                                client=ip)

    async def _check(self, identity: Identity, ip: str | None) -> Check:
        found = self.guard.known_verdict(identity, ip)
        if isinstance(found, Check):
            return found
        assert identity.crawler is not None and ip is not None  # NeedsDns implies both
        return await self.guard.verify_dns_async(identity.crawler, ip)

    async def _robots_txt(self, send: Send, *, head: bool) -> None:
        robots = self.guard.robots_file()
        headers = [(k.encode(), v.encode()) for k, v in robots.headers]
        headers.append((b"content-length", str(len(robots.body)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if head else robots.body})


def _signed_wsgi(guard: SiteGuard, environ: dict[str, Any], identity: Identity,
                 target: str, ip: str | None) -> Check | None:
    """The signature's verdict for a WSGI request, checked in a loop of its own (the worker
    blocks while a key directory is fetched, within the fetcher's time bound)."""
    if guard.signatures is None or "HTTP_SIGNATURE_INPUT" not in environ:
        return None
    headers = [(key[5:].replace("_", "-").lower(), str(value))
               for key, value in environ.items() if key.startswith("HTTP_")]
    host = environ.get("HTTP_HOST") or \
        f"{environ.get('SERVER_NAME', 'localhost')}:{environ.get('SERVER_PORT', '80')}"
    url = f"{environ.get('wsgi.url_scheme', 'http')}://{host}{target}"
    method = environ.get("REQUEST_METHOD", "GET")
    return asyncio.run(guard.check_signature(identity, method, url, headers, client=ip))


class _Logged:
    """A WSGI response that logs the robot's request when the server closes it."""

    def __init__(self, body: Iterable[bytes], done: Callable[[], None]) -> None:
        self._body = body
        self._done = done

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._body)

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            self._done()


class SiteWSGIMiddleware:
    """WSGI: ``app = SiteWSGIMiddleware(app, guard)``; DNS checks block the worker (up to
    the resolver's own timeouts), once per crawler address an hour."""

    def __init__(self, app: WSGIApp, guard: SiteGuard) -> None:
        self.app = app
        self.guard = guard

    def __call__(self, environ: dict[str, Any], start_response: StartResponse
                 ) -> Iterable[bytes]:
        guard = self.guard
        user_agent = environ.get("HTTP_USER_AGENT", "")
        identity = guard.identify(user_agent)
        path = environ.get("PATH_INFO", "") or "/"
        method = environ.get("REQUEST_METHOD", "GET")
        is_robots = path == ROBOTS_PATH and method in ("GET", "HEAD")
        usage = None if is_robots else guard.usage_header(path)
        if usage is not None:
            start_response = _start_with_usage(start_response, usage)
        if not identity.is_robot and not is_robots:
            return self.app(environ, start_response)
        ip = guard.client_ip(environ.get("REMOTE_ADDR") or None,
                             environ.get("HTTP_X_FORWARDED_FOR"))
        target = environ.get("RAW_URI") or environ.get("REQUEST_URI") or ""
        if not target.startswith("/"):
            # PATH_INFO is decoded; quote it back (WSGI carries bytes as latin-1)
            target = quote(environ.get("SCRIPT_NAME", "") + path, safe="/:@!$&'()*+,;=~")
            if environ.get("QUERY_STRING"):
                target += "?" + environ["QUERY_STRING"]
        visit = Visit(method, target, user_agent, ip)
        decision = None
        if identity.is_robot:
            found = _signed_wsgi(guard, environ, identity, target, ip) or \
                guard.known_verdict(identity, ip)
            if not isinstance(found, Check):
                assert identity.crawler is not None and ip is not None
                found = guard.verify_dns(identity.crawler, ip)
            decision = guard.decide(visit, identity, found)
        if is_robots:
            robots = guard.robots_file()
            start_response("200 OK", [*robots.headers,
                                      ("content-length", str(len(robots.body)))])
            if decision is not None and decision.log is not None:
                guard.log(decision.log, 200)
            return [b"" if method == "HEAD" else robots.body]
        assert decision is not None
        entry = decision.log
        if decision.action in (Action.REFUSE, Action.THROTTLE):
            body = refusal_body(decision)
            reason = "Forbidden" if decision.status == 403 else "Too Many Requests"
            start_response(f"{decision.status} {reason}",
                           _refusal_headers(decision, len(body)))
            if entry is not None:
                guard.log(entry, decision.status)
            return [body]
        status: list[int] = []

        def start_noting_status(line: str, headers: Any, *exc: Any) -> Any:
            status.append(int(line.split(" ", 1)[0]))
            return start_response(line, headers, *exc)

        def done() -> None:
            if entry is not None:
                guard.log(entry, status[-1] if status else None)

        return _Logged(self.app(environ, start_noting_status), done)
