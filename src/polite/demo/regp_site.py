"""Seed 000's news website (section 4.1, Fig. 1) on a real socket, for the experiments of
its section 5 (Tables 9, 10 and 11, Visit-time, ``Language: fr``).

The site: a home page linking the login, registration, news search and news release pages
and the three latest news; ``news.do`` with the three latest news and a search form;
``newsItem.do?id=N`` whose comments arrive by Ajax (a script fetching ``comments.do``, which
a crawler that runs no script never sees); the snapshots ``html/newsN.html`` with the
comments inline; ``sitemap.xml`` naming every snapshot in ``<loc>`` and its page in
``<srcloc>`` (section 5's sample); and one of section 5's robots.txt files: none, the old REP
one, or the REGP one. Every request's arrival is recorded (monotonic and wall time, path,
headers), so that what a crawler did is measured where it lands: at the site, by the
kernel's stamp of the request's first bytes (:mod:`polite.demo._arrival`), not by when a
thread of a busy machine got round to it.
"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from polite.core.robots.values import parse_time_window
from polite.demo._arrival import next_arrival, stamp_arrivals, wall_time
from polite.errors import ConfigError

__all__ = [
    "LATEST",
    "ROBOTS_VARIANTS",
    "SEED_RESOURCES",
    "RegpSite",
    "Request",
    "RobotsVariant",
    "TableRow",
    "resource_of",
    "start_site",
    "visit_time_value",
]

RobotsVariant = Literal["none", "rep", "regp"]
ROBOTS_VARIANTS: tuple[RobotsVariant, ...] = ("none", "rep", "regp")
# The home page and news.do link to this many of the latest news (seed 000, Table 9's text:
# "the home page has three links to the three latest news pages").
LATEST = 3
# The rows of Tables 9-11, in the seed's order.
SEED_RESOURCES = ("Home page", "Useless pages (e.g., login page)", "Latest news pages",
                  "Old news pages")
USELESS = ("/login.do", "/reg.do", "/newsRelease.do")

# Section 5's old REP file, as printed.
REP_ROBOTS = """\
User-agent: *
Disallow: /login.do
Disallow: /reg.do
Disallow: /newsRelease.do
"""

# Section 5's REGP file, as printed (the seed's "newsitem" spelling kept: REGP paths match
# without regard to case); the Sitemap line names the served sitemap.
REGP_ROBOTS = """\
Robot-version: 3.0
Last-modified: 19 Mar 2015 12:00:00 +0800

User-agent: *
Disallow: /login.do
Disallow: /reg.do
Disallow: /newsRelease.do
Request-rate: 120/m
{{
  Allow: /newsitem.do?
  Crawl-delay: 5
}}
{{
  Allow: /html/
  Crawl-delay: 1
}}

Sitemap: {sitemap}
Cookie: user=robot
Language: {language}
Encoding: gzip, deflate
"""


class _Server(ThreadingHTTPServer):
    # The standard library's backlog of 5 drops the handshakes of a crawler's burst of
    # connections while its thread is busy: each is tried again a second later, then three,
    # so a site that answers at once is seen stalling.
    request_queue_size = 128


@dataclass(frozen=True, slots=True)
class Request:
    """One request as it arrived: ``at`` on the monotonic clock, ``wall`` on the wall clock
    (what Visit-time windows are read by); header names lower-cased."""

    at: float
    wall: float
    method: str
    path: str
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class TableRow:
    """One row of Tables 9-11: how many requests of this kind reached the site, and the
    shortest gap measured before one of them (since the previous request of any kind)."""

    resource: str
    requests: int
    min_gap_s: float | None

    @property
    def fetched(self) -> bool:
        return self.requests > 0


def visit_time_value(opens_at: float, length_s: int = 3600) -> str:
    """A Visit-time value in Ge & Ding's form (``21:00:00 +0800-08:00:00 +0800``) for a daily
    window opening at the wall-clock instant ``opens_at`` (whole seconds) and lasting
    ``length_s``."""
    beijing = 8 * 3600

    def clock(at: float) -> str:
        seconds = (int(at) + beijing) % 86_400
        return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d} +0800"

    return f"{clock(opens_at)}-{clock(opens_at + length_s)}"


def resource_of(path: str, news: int) -> str:
    """Which kind of resource a request path is: a row of Tables 9-11, or what else."""
    parts = urlsplit(path)
    route = parts.path
    if route == "/":
        return SEED_RESOURCES[0]
    if route in USELESS:
        return SEED_RESOURCES[1]
    number = _news_number(route, parts.query)
    if number is not None:
        return SEED_RESOURCES[2] if number > news - LATEST else SEED_RESOURCES[3]
    return {"/robots.txt": "robots.txt", "/sitemap.xml": "sitemap.xml",
            "/news.do": "News search page", "/comments.do": "Comments (Ajax)"}.get(route,
                                                                               "Other")


def _news_number(route: str, query: str) -> int | None:
    text = None
    if route.lower() == "/newsitem.do":
        values = parse_qs(query).get("id")
        text = values[0] if values else None
    elif route.startswith("/html/news") and route.endswith(".html"):
        text = route.removeprefix("/html/news").removesuffix(".html")
    return int(text) if text and text.isdigit() else None


@dataclass(frozen=True, slots=True)
class _News:
    number: int
    title: str
    text: str
    published: str  # a sitemap lastmod
    comments: tuple[tuple[str, str], ...]  # (author, comment)


def _news(count: int) -> list[_News]:
    items = []
    for n in range(1, count + 1):
        day = f"2015-03-{(n - 1) % 28 + 1:02d}"
        items.append(_News(
            n, f"News {n}", f"The text of news item {n}, released on {day}.", day,
            ((f"reader{n}a", f"A first comment on news {n}."),
             (f"reader{n}b", f"A second comment on news {n}."))))
    return items


def _page(title: str, body: str) -> bytes:
    return (f'<!DOCTYPE html>\n<html lang="zh-CN">\n<head><meta charset="utf-8">'
            f"<title>{escape(title)}</title></head>\n<body>\n{body}\n</body>\n</html>\n"
            ).encode()


class RegpSite:
    """The news site on ``host``:``port`` (0: any free port), not yet listening; see
    :func:`start_site`. ``robots`` picks section 5's robots.txt; ``visit_time`` (a Visit-time
    value) and ``language`` (in place of ``zh-CN``) change the REGP file for the section's
    last two experiments. ``on_request`` is called after each answer with the request and
    its status (from the server's threads)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        robots: RobotsVariant = "regp",
        news: int = 10,
        visit_time: str | None = None,
        language: str | None = None,
        on_request: Callable[[Request, int], None] | None = None,
    ) -> None:
        if robots not in ROBOTS_VARIANTS:
            raise ConfigError(f"unknown robots.txt variant {robots!r}: none, rep or regp")
        if news < 1:
            raise ConfigError(f"the site needs at least one news item, not {news}")
        if robots != "regp" and (visit_time is not None or language is not None):
            raise ConfigError("a Visit-time or Language line needs the REGP robots.txt "
                              "(--robots regp)")
        if visit_time is not None and parse_time_window(visit_time) is None:
            raise ConfigError(f"cannot read Visit-time value {visit_time!r} (for example "
                              "'21:00:00 +0800-08:00:00 +0800')")
        if language is not None and (not language.strip() or "\n" in language):
            raise ConfigError(f"not a Language value: {language!r}")
        self.robots: RobotsVariant = robots
        self.news = news
        self.visit_time = visit_time
        self.language = language
        self._items = _news(news)
        self._on_request = on_request
        self._lock = threading.Lock()
        self._log: list[Request] = []
        try:
            self._server = _Server((host, port), _handler(self), bind_and_activate=True)
        except OSError as exc:  # the port taken, or an address not this machine's
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}"
                              ) from exc
        self._server.daemon_threads = True
        stamp_arrivals(self._server.socket)
        self._thread: threading.Thread | None = None

    @property
    def origin(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[Request]:
        """Every request so far, in the order they arrived."""
        with self._lock:
            return sorted(self._log, key=lambda r: r.at)

    def start(self) -> RegpSite:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name=f"regp-site {self.origin}")
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> RegpSite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the site measured -------------------------------------------------------------

    def gaps(self) -> list[tuple[float, Request]]:
        """Each request after the first with the time since the one before it."""
        log = self.requests
        return [(later.at - earlier.at, later) for earlier, later in itertools.pairwise(log)]

    def table(self) -> list[TableRow]:
        """Tables 9-11's rows from what reached the site: fetched or not, and the shortest
        gap before a request of the kind (the crawl delay the site saw)."""
        gaps: dict[str, list[float]] = {name: [] for name in SEED_RESOURCES}
        counts = dict.fromkeys(SEED_RESOURCES, 0)
        log = self.requests
        for index, request in enumerate(log):
            kind = resource_of(request.path, self.news)
            if kind not in counts:
                continue
            counts[kind] += 1
            if index:
                gaps[kind].append(request.at - log[index - 1].at)
        return [TableRow(name, counts[name], min(gaps[name]) if gaps[name] else None)
                for name in SEED_RESOURCES]

    # -- the pages --------------------------------------------------------------------------

    def robots_txt(self) -> str | None:
        """The robots.txt served (``None``: a 404)."""
        if self.robots == "none":
            return None
        if self.robots == "rep":
            return REP_ROBOTS
        text = REGP_ROBOTS.format(sitemap=f"{self.origin}/sitemap.xml",
                                  language=self.language or "zh-CN")
        if self.visit_time is not None:
            text += f"Visit-time: {self.visit_time}\n"
        return text

    def sitemap_xml(self) -> str:
        """Every news item: its snapshot in ``<loc>``, its page in ``<srcloc>``, type data."""
        urls = "".join(
            f"<url>\n<loc>{self.origin}/html/news{item.number}.html</loc>\n"
            f"<srcloc>{self.origin}/newsItem.do?id={item.number}</srcloc>\n"
            f"<lastmod>{item.published}</lastmod>\n<changefreq>weekly</changefreq>\n"
            f"<priority>0.5</priority>\n<type>data</type>\n</url>\n"
            for item in reversed(self._items))
        return ('<?xml version="1.0" encoding="UTF-8"?>\n'
                '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
                f"{urls}</urlset>\n")

    def _latest(self) -> list[_News]:
        return list(reversed(self._items[-LATEST:]))

    def _links(self, items: list[_News]) -> str:
        return "".join(f'<li><a href="/newsItem.do?id={item.number}">{escape(item.title)}'
                       "</a></li>\n" for item in items)

    def answer(self, method: str, path: str) -> tuple[int, str, bytes]:
        """Status, content type and body for a request."""
        parts = urlsplit(path)
        route, query = parts.path, parse_qs(parts.query)
        html = "text/html; charset=utf-8"
        if method == "POST":
            return 403, html, _page("Forbidden", "<p>This demonstration site takes no "
                                    "log-ins, registrations, releases or comments.</p>")
        if route == "/robots.txt":
            text = self.robots_txt()
            if text is None:
                return 404, "text/plain", b"no robots.txt here\n"
            return 200, "text/plain; charset=utf-8", text.encode()
        if route == "/sitemap.xml":
            return 200, "application/xml", self.sitemap_xml().encode()
        if route == "/":
            return 200, html, _page("News", (
                "<h1>News</h1>\n<ul>\n<li><a href=\"/login.do\">Log in</a></li>\n"
                "<li><a href=\"/reg.do\">Register</a></li>\n"
                "<li><a href=\"/news.do\">Search the news</a></li>\n"
                "<li><a href=\"/newsRelease.do\">Release news</a></li>\n</ul>\n"
                f"<h2>Latest news</h2>\n<ul>\n{self._links(self._latest())}</ul>"))
        if route == "/login.do":
            return 200, html, _page("Log in", (
                '<h1>Log in</h1>\n<form method="post" action="/login.do">'
                '<input name="user"> <input name="password" type="password"> '
                "<button>Log in</button></form>"))
        if route == "/reg.do":
            return 200, html, _page("Register", (
                '<h1>Register</h1>\n<form method="post" action="/reg.do">'
                '<input name="user"> <input name="password" type="password"> '
                "<button>Register</button></form>"))
        if route == "/newsRelease.do":
            return 200, html, _page("Release news", (
                '<h1>Release news</h1>\n<p>Only an administrator may release news: '
                '<a href="/login.do">log in</a> first.</p>'))
        if route == "/news.do":
            return 200, html, self._search(query.get("q", [""])[0])
        number = _news_number(route, parts.query)
        item = self._items[number - 1] if number and number <= self.news else None
        if item is not None and route.lower() == "/newsitem.do":
            return 200, html, self._news_page(item)
        if item is not None:
            return 200, html, self._snapshot(item)
        if route == "/comments.do":
            ids = query.get("id", [""])[0]
            if ids.isdigit() and 1 <= int(ids) <= self.news:
                comments = [{"author": a, "text": t}
                            for a, t in self._items[int(ids) - 1].comments]
                return 200, "application/json", json.dumps(comments).encode()
        return 404, html, _page("Not found", "<p>No such page.</p>")

    def _search(self, term: str) -> bytes:
        form = ('<form method="get" action="/news.do"><input name="q" value="'
                f'{escape(term)}"> <button>Search</button></form>')
        if term:
            found = [i for i in self._items if term.lower() in (i.title + i.text).lower()]
            listing = f"<h2>Results for {escape(term)}</h2>\n<ul>\n{self._links(found)}</ul>"
        else:
            listing = f"<h2>Latest news</h2>\n<ul>\n{self._links(self._latest())}</ul>"
        return _page("Search the news", f"<h1>Search the news</h1>\n{form}\n{listing}")

    def _news_page(self, item: _News) -> bytes:
        # The comments come by Ajax once the text is loaded (seed 000, 4.1).
        script = (
            f'fetch("/comments.do?id={item.number}").then(r => r.json()).then(list => {{\n'
            '  const box = document.getElementById("comments");\n'
            '  box.innerHTML = "";\n'
            "  for (const c of list) {\n"
            '    const p = document.createElement("p");\n'
            '    p.textContent = c.author + ": " + c.text;\n'
            "    box.appendChild(p);\n  }\n});")
        return _page(item.title, (
            f"<h1>{escape(item.title)}</h1>\n<p>{escape(item.text)}</p>\n"
            '<h2>Comments</h2>\n<div id="comments">Loading the comments...</div>\n'
            '<p><a href="/login.do">Log in</a> to comment.</p>\n'
            f"<script>\n{script}\n</script>"))

    def _snapshot(self, item: _News) -> bytes:
        comments = "".join(f"<p>{escape(a)}: {escape(t)}</p>\n" for a, t in item.comments)
        return _page(item.title, (
            f"<h1>{escape(item.title)}</h1>\n<p>{escape(item.text)}</p>\n"
            f'<h2>Comments</h2>\n<div id="comments">\n{comments}</div>\n'
            f"<p>A snapshot of <a href=\"/newsItem.do?id={item.number}\">the news page</a>."
            "</p>"))

    def _record(self, request: Request) -> None:
        with self._lock:
            self._log.append(request)

    def _answered(self, request: Request, status: int) -> None:
        if self._on_request is not None:
            self._on_request(request, status)


def _handler(site: RegpSite) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "regp-demo"
        # Headers and body go in two writes; without this, the body waits for the client's
        # delayed ACK (40 ms on Linux) and the site looks slow.
        disable_nagle_algorithm = True
        # Unbuffered, so that the next request's first bytes wait in the socket, where the
        # kernel's stamp of their arrival can be read.
        rbufsize = 0
        arrived_at: float | None = None

        def handle_one_request(self) -> None:
            self.arrived_at = next_arrival(self.connection)
            if self.arrived_at is None:  # the client closed the connection
                self.close_connection = True
                return
            super().handle_one_request()

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            self._serve()

        def _serve(self) -> None:
            at = time.monotonic() if self.arrived_at is None else self.arrived_at
            request = Request(at, wall_time(at), self.command, self.path,
                              {k.lower(): v for k, v in self.headers.items()})
            site._record(request)
            status, content_type, body = site.answer(self.command, self.path)
            accepted = {token.split(";")[0].strip().lower()
                        for token in self.headers.get("Accept-Encoding", "").split(",")}
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if "gzip" in accepted:  # the robots.txt's "Encoding: gzip, deflate"
                body = gzip.compress(body, mtime=0)
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Vary", "Accept-Encoding")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)
            site._answered(request, status)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


def start_site(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    robots: RobotsVariant = "regp",
    news: int = 10,
    visit_time: str | None = None,
    language: str | None = None,
    on_request: Callable[[Request, int], None] | None = None,
) -> RegpSite:
    """The news site listening on ``host``:``port`` (0: any free port) on a thread of its
    own; use it as a context manager, or :meth:`RegpSite.close` it."""
    return RegpSite(host, port, robots=robots, news=news, visit_time=visit_time,
                    language=language, on_request=on_request).start()
