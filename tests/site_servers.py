"""Real servers for the site tests: an ASGI app under uvicorn and a WSGI app under wsgiref,
each in a thread on its own loopback address; clients that come from a chosen address."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from polite.fetch.trust import client_context
from polite.site import SiteGuard, SiteMiddleware, SiteWSGIMiddleware


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_asgi(app: Any, host: str) -> Iterator[str]:
    """``app`` under uvicorn on ``host``; yields its base URL."""
    port = free_port(host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off",
                            access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        assert thread.is_alive(), "uvicorn exited"
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve_wsgi(app: Callable[..., Any], host: str) -> Iterator[str]:
    """``app`` under the standard library's wsgiref on ``host``; yields its base URL."""
    server: WSGIServer = make_server(host, 0, app, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def client_from(address: str, base_url: str, user_agent: str) -> httpx.Client:
    """A client whose connections leave from ``address`` (a crawler's "own" address), with
    polite's TLS context, as ``tests.serving.through``'s."""
    return httpx.Client(base_url=base_url, trust_env=False, timeout=10,
                        headers={"user-agent": user_agent},
                        transport=httpx.HTTPTransport(local_address=address,
                                                      verify=client_context()))


async def _page(request: Request) -> PlainTextResponse:
    return PlainTextResponse(f"page {request.url.path}")


def _wsgi_page(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("content-type", "text/plain")])
    return [f"page {environ['PATH_INFO']}".encode()]


def serve_guarded(kind: str, guard: SiteGuard, asgi_host: str, wsgi_host: str
                  ) -> AbstractContextManager[str]:
    """A site answering "page PATH" behind polite.site's ASGI (``kind`` "asgi", on
    ``asgi_host``) or WSGI middleware (on ``wsgi_host``); yields its base URL."""
    if kind == "asgi":
        app = Starlette(routes=[Route("/{path:path}", _page)])
        return serve_asgi(SiteMiddleware(app, guard), asgi_host)
    return serve_wsgi(SiteWSGIMiddleware(_wsgi_page, guard), wsgi_host)

