"""The configuration page (Jasani & Kumbharana, 4.11): rules edited in sections, the
robots.txt they make with its lint and an explain matrix following as you type, every save a
version with its diff and a rollback, and the robot access log. Server-rendered with Jinja2;
htmx (vendored) swaps the parts that change. Mount it in a site's own application or run it
with ``polite site serve``.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from polite.core.access import (
    SESSION_S,
    allowed_host_names,
    cross_origin,
    host_refused,
    session_valid,
    session_value,
    token_matches,
)
from polite.core.robots import Dialect
from polite.core.robots.diff import UNNAMED_AGENT, diff_bodies, named_agents
from polite.core.robots.explain import Explanation, explain_body
from polite.core.robots.lint import LintReport, lint_body
from polite.core.robots.parser import parse_body
from polite.core.robots.robotstxt import RobotsTxt
from polite.core.site import (
    Enforcement,
    Field,
    RenderedFile,
    RuleRow,
    Section,
    SiteRules,
    render,
)
from polite.core.site.rules import MAX_TTL_S
from polite.errors import ConfigError
from polite.site.store import SiteStore

__all__ = ["SESSION_COOKIE", "create_site_app", "rules_from_form"]

# The page's session once its token was given: never the token itself (cookies are not
# kept per port: every other service on the host name receives them).
SESSION_COOKIE = "polite_site_session"
_DIALECTS = (Dialect.RFC9309, Dialect.GOOGLE, Dialect.KOSTER1996)
_MAX_SECTIONS = 200
_MAX_ROWS = 2000
_MAX_MATRIX_URLS = 12
_MAX_MATRIX_AGENTS = 6
_MAX_FORM_FIELDS = 20_000
_KEY = re.compile(r"s(\d+)\.r(\d+)\.(agent|field|value)\Z")


def _jinja() -> Any:
    try:
        import jinja2
    except ImportError as exc:  # the site extra is not installed
        raise ConfigError("the configuration page needs Jinja2: pip install 'polite-web[site]'"
                          ) from exc
    loader = jinja2.FileSystemLoader(str(resources.files("polite.site") / "templates"))
    env = jinja2.Environment(loader=loader, autoescape=True, trim_blocks=True,
                             lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["when"] = lambda at: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
    return env


def _int(value: object, default: int) -> int:
    try:
        return int(str(value))
    except ValueError:
        return default


def rules_from_form(form: FormData | dict[str, str]) -> SiteRules:
    """The rules a submitted editor form holds (rows in the order the form numbers them)."""
    count = min(_int(form.get("sections", 0), 0), _MAX_SECTIONS)
    rows: dict[int, dict[int, dict[str, str]]] = {}
    for key in list(form.keys())[:_MAX_FORM_FIELDS]:
        m = _KEY.match(key)
        if m is not None:
            cell = rows.setdefault(int(m.group(1)), {}).setdefault(int(m.group(2)), {})
            cell[m.group(3)] = str(form.get(key, ""))
    sections = []
    for s in range(count):
        section_rows = []
        for r in sorted(rows.get(s, {}))[:_MAX_ROWS]:
            cell = rows[s][r]
            try:
                kind = Field(cell.get("field", "Disallow"))
            except ValueError:
                kind = Field.DISALLOW
            section_rows.append(RuleRow(cell.get("agent", "").strip(), kind,
                                        cell.get("value", "").strip()))
        sections.append(Section(str(form.get(f"s{s}.name", "")).strip(),
                                str(form.get(f"s{s}.prefix", "/")).strip() or "/",
                                str(form.get(f"s{s}.owner", "")).strip(),
                                tuple(section_rows)))
    ttl_s = max(0, min(_int(form.get("ttl_s", 3600), 3600), MAX_TTL_S))
    return SiteRules(tuple(sections), ttl_s,
                     Enforcement(form.get("refuse_disallowed") == "on",
                                 form.get("throttle") == "on",
                                 form.get("refuse_forged") == "on"),
                     str(form.get("manual_text", "")).replace("\r\n", "\n"))


def _edited(rules: SiteRules, action: str) -> SiteRules:
    """``rules`` after one button of the editor: add-rule:S, remove-rule:S:R, up-rule:S:R,
    add-section, remove-section:S."""
    parts = action.split(":")
    sections = list(rules.sections)
    try:
        numbers = [int(p) for p in parts[1:]]
    except ValueError:
        return rules
    if parts[0] == "add-section" and len(sections) < _MAX_SECTIONS:
        sections.append(Section("New section", f"/part-{len(sections)}/", "",
                                (RuleRow("*", Field.DISALLOW, ""),)))
    elif numbers and 0 <= numbers[0] < len(sections):
        s = numbers[0]
        section = sections[s]
        rows = list(section.rules)
        if parts[0] == "remove-section" and len(sections) > 1:
            del sections[s]
        elif parts[0] == "add-rule" and len(rows) < _MAX_ROWS:
            agent = rows[-1].agent if rows else "*"
            rows.append(RuleRow(agent or "*", Field.DISALLOW, ""))
        elif len(numbers) == 2 and 0 <= numbers[1] < len(rows):
            r = numbers[1]
            if parts[0] == "remove-rule":
                del rows[r]
            elif parts[0] == "up-rule" and r > 0:
                rows[r - 1], rows[r] = rows[r], rows[r - 1]
        if parts[0] != "remove-section":
            sections[s] = Section(section.name, section.prefix, section.owner, tuple(rows))
    return SiteRules(tuple(sections), rules.ttl_s, rules.enforcement, rules.manual_text)


def _sample_urls(rules: SiteRules, robots: RobotsTxt) -> list[str]:
    """URLs worth explaining: each section's part, and a path under each Allow/Disallow of
    the file, the hand-written part's as well as the sections' rows."""
    urls = ["/"]
    patterns = []
    for section in rules.sections:
        urls.append(section.prefix)
        patterns += [row.value for row in section.rules
                     if row.field in (Field.ALLOW, Field.DISALLOW)]
    patterns += [rule.pattern for group in robots.groups for rule in group.rules]
    for pattern in patterns:
        if pattern:
            path = pattern.replace("*", "x").rstrip("$")
            urls.append(path + ("page" if path.endswith("/") else ""))
    return list(dict.fromkeys(u for u in urls if u.startswith("/")))[:_MAX_MATRIX_URLS]


def _agents(text: str, robots: RobotsTxt) -> list[str]:
    chosen = [a.strip() for a in text.split(",") if a.strip()]
    if not chosen:
        chosen = [a for a in named_agents(robots) if a != UNNAMED_AGENT]
        chosen = [*chosen[:_MAX_MATRIX_AGENTS - 1], UNNAMED_AGENT]
    return chosen[:_MAX_MATRIX_AGENTS]


@dataclass(frozen=True, slots=True)
class _Preview:
    rendered: RenderedFile
    lint: LintReport
    explanation: Explanation
    urls_text: str
    agents_text: str
    changed_lines: frozenset[int]


def _preview(rules: SiteRules, saved_text: str, urls_text: str, agents_text: str) -> _Preview:
    rendered = render(rules)
    text = rendered.text
    robots = RobotsTxt(parse_body(text, Dialect.RFC9309))
    urls = [u.strip() for u in urls_text.splitlines() if u.strip()][:_MAX_MATRIX_URLS]
    if not urls:
        urls = _sample_urls(rules, robots)
    explanation = explain_body(text, _agents(agents_text, robots), urls, _DIALECTS)
    saved = saved_text.split("\n")
    changed = frozenset(n for n, line in enumerate(text.split("\n"), 1)
                        if n > len(saved) or saved[n - 1] != line)
    return _Preview(rendered, lint_body(text, Dialect.RFC9309), explanation, urls_text,
                    agents_text, changed if saved_text != text else frozenset())


class _TokenGate(BaseHTTPMiddleware):
    """The page behind a token: ``?token=`` once (it becomes a session cookie, which is not
    the token and ends), the cookie, or ``Authorization: Bearer``. A POST must come from
    the page's own origin; with ``allowed_hosts``, a request must name an IP address, a
    loopback name or one of them as its ``Host``."""

    def __init__(self, app: Any, token: str | None,
                 allowed_hosts: frozenset[str] | None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(app)
        self.token = token
        self.allowed_hosts = allowed_hosts
        self.clock = clock
        self.session_key = secrets.token_bytes(32)  # a restart ends every session

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint
                       ) -> Response:
        if self.allowed_hosts is not None:
            refused = host_refused(request.headers.get("host"), self.allowed_hosts)
            if refused is not None:
                return PlainTextResponse(refused + "\n", 403)
        if request.method == "POST":
            refused = cross_origin(request.headers)
            if refused is not None:
                return PlainTextResponse(f"cross-origin request refused: {refused}\n", 403)
        token = self.token
        if token is None or request.url.path.endswith("/static/site.css"):
            return await call_next(request)
        given = request.query_params.get("token")
        if given is not None and token_matches(given, token):
            response = RedirectResponse(request.url.remove_query_params("token"), 303)
            response.set_cookie(SESSION_COOKIE, session_value(self.session_key, self.clock()),
                                max_age=SESSION_S, httponly=True, samesite="strict",
                                secure=request.url.scheme == "https")
            return response
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        session = request.cookies.get(SESSION_COOKIE, "")
        if session_valid(session, self.session_key, self.clock()) \
                or (bearer and token_matches(bearer, token)):
            return await call_next(request)
        return PlainTextResponse("this page needs its token: open it with ?token=...\n", 401)


def create_site_app(store: SiteStore, *, token: str | None = None,
                    clock: Callable[[], float] = time.time,
                    on_save: Callable[[], None] | None = None,
                    allowed_hosts: Collection[str] | None = None) -> Starlette:
    """The configuration page over ``store``. ``token``: required from every visitor (give
    one whenever the page is reachable beyond loopback); ``on_save``: called after each save
    or rollback (a :meth:`SiteGuard.reload` in the same process); ``allowed_hosts``: the
    host names the page answers to besides IP addresses and localhost (``polite site
    serve``'s, against DNS rebinding; None where the site's own application, mounting the
    page, answers for its names)."""
    env = _jinja()

    def page(request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
        base = request.scope.get("root_path", "")
        html = env.get_template(name).render(base=base, **values)
        return HTMLResponse(html, status)

    def workspace_values(rules: SiteRules, urls_text: str = "", agents_text: str = "",
                         message: str = "") -> dict[str, Any]:
        current = store.current()
        return {"rules": rules, "fields": list(Field), "current": current,
                "preview": _preview(rules, current.robots_txt, urls_text, agents_text),
                "message": message}

    async def editor(request: Request) -> HTMLResponse:
        current = store.current()
        return page(request, "editor.html", tab="rules",
                    **workspace_values(current.rules))

    async def edit(request: Request) -> HTMLResponse:
        form = await request.form(max_fields=_MAX_FORM_FIELDS)
        rules = _edited(rules_from_form(form), str(form.get("action", "")))
        return page(request, "workspace.html", **workspace_values(
            rules, str(form.get("urls", "")), str(form.get("agents", ""))))

    async def preview(request: Request) -> HTMLResponse:
        form = await request.form(max_fields=_MAX_FORM_FIELDS)
        rules = rules_from_form(form)
        current = store.current()
        return page(request, "preview.html", rules=rules, current=current, oob=True,
                    preview=_preview(rules, current.robots_txt, str(form.get("urls", "")),
                                     str(form.get("agents", ""))))

    async def save(request: Request) -> HTMLResponse:
        form = await request.form(max_fields=_MAX_FORM_FIELDS)
        rules = rules_from_form(form)
        version = store.save(rules, now=clock(), author=str(form.get("author", "")).strip(),
                             note=str(form.get("note", "")).strip())
        if on_save is not None:
            on_save()
        return page(request, "workspace.html", **workspace_values(
            rules, str(form.get("urls", "")), str(form.get("agents", "")),
            f"Saved as version {version.id}: /robots.txt serves it now."))

    async def versions(request: Request) -> HTMLResponse:
        listed = store.versions()
        changes = []
        for version in listed:
            before = store.version(max(0, version.id - 1))
            old = before.robots_txt if before is not None else ""
            verdicts = diff_bodies(old, version.robots_txt, dialect=Dialect.RFC9309)
            changes.append((version, store.diff(version.id), verdicts))
        return page(request, "versions.html", tab="versions", changes=changes,
                    current=store.current())

    async def rollback(request: Request) -> Response:
        version_id = _int(request.path_params["version"], -1)
        done = store.rollback(version_id, now=clock(), author="rollback")
        if done is None:
            return PlainTextResponse(f"no version {version_id}\n", 404)
        if on_save is not None:
            on_save()
        base = request.scope.get("root_path", "")
        return RedirectResponse(f"{base}/versions", 303)

    async def access(request: Request) -> HTMLResponse:
        robot = request.query_params.get("robot") or None
        return page(request, "access.html", tab="access", stats=store.robot_stats(),
                    broken=store.broken_lines(), paths=store.top_paths(),
                    visits=store.visits(robot=robot, limit=100), robot=robot,
                    current=store.current(), ranges=store.ranges(), now=time.time())

    async def robots_txt(request: Request) -> PlainTextResponse:
        current = store.current()
        ttl = current.rules.ttl_s
        return PlainTextResponse(current.robots_txt, headers={
            "cache-control": f"max-age={ttl}" if ttl else "no-cache"})

    static = Path(str(resources.files("polite.site") / "static"))
    routes = [
        Route("/", editor),
        Route("/edit", edit, methods=["POST"]),
        Route("/preview", preview, methods=["POST"]),
        Route("/save", save, methods=["POST"]),
        Route("/versions", versions),
        Route("/rollback/{version}", rollback, methods=["POST"]),
        Route("/access", access),
        Route("/robots.txt", robots_txt),
        Mount("/static", StaticFiles(directory=static), name="static"),
    ]
    hosts = None if allowed_hosts is None else allowed_host_names(allowed_hosts)
    return Starlette(routes=routes, middleware=[Middleware(_TokenGate, token=token,
                                                           allowed_hosts=hosts, clock=clock)])

