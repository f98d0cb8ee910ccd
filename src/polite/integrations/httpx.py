"""httpx transports that wait for each host's slot and obey robots.txt.

>>> client = httpx.Client(transport=PoliteTransport(agent="ExampleBot"))  # doctest: +SKIP

Every request asks polite first: a URL robots.txt forbids raises :class:`RobotsDisallowed`
naming the rule and its line (or answers 403 with ``forbidden_response=True``); otherwise
it waits for its host's slot (or raises :class:`SlotNotReady` with ``wait=False``). The
response's status and time are fed back: a 429 or 503 holds the host (``Retry-After``
honoured), times feed the adaptive delay.
"""

from __future__ import annotations

import asyncio
import time
from typing import Generic, TypeVar

import httpx

from polite.core.politeness.rules import DEFAULT_DELAY_S
from polite.core.robots import product_token
from polite.errors import RobotsDisallowed
from polite.identity.options import signer_from
from polite.integrations._gate import (
    MAX_WAIT_S,
    AllowPrivate,
    Grant,
    PoliteGate,
    unexpected_keywords,
)

__all__ = ["AsyncPoliteTransport", "PoliteTransport"]

_Transport = TypeVar("_Transport", httpx.BaseTransport, httpx.AsyncBaseTransport)


def _agent(request: httpx.Request, agent: str) -> str:
    return agent or product_token(request.headers.get("user-agent", "")) or "polite"


def _forbidden(request: httpx.Request, refusal: RobotsDisallowed) -> httpx.Response:
    return httpx.Response(403, request=request, text=f"Blocked by robots.txt: {refusal.reason}\n",
                          headers={"content-type": "text/plain; charset=utf-8"})


class _Gated(Generic[_Transport]):
    # One constructor for both transports: they differ in the transport they wrap.
    def __init__(self, transport: _Transport | None = None, *, agent: str = "",
                 store: str = "memory://", service_url: str | None = None,
                 allow_private: AllowPrivate = False, dialect: str = "auto",
                 default_delay_s: float = DEFAULT_DELAY_S, wait: bool = True,
                 max_wait_s: float = MAX_WAIT_S, forbidden_response: bool = False,
                 gate: PoliteGate | None = None, purpose: str | None = None,
                 refuse_by_purpose: bool = False, sign_with: str | None = None,
                 signature_agent: str | None = None, **unknown: object) -> None:
        # A misspelt argument is named with the class the user made, not this base.
        unexpected_keywords(type(self).__name__, unknown, _Gated.__init__)
        self._signer = signer_from(sign_with, signature_agent)  # before a gate is opened
        self._agent = agent
        self._owns_gate = gate is None
        self.gate = gate or PoliteGate(agent=agent, store=store, service_url=service_url,
                                       allow_private=allow_private, dialect=dialect,
                                       default_delay_s=default_delay_s, wait=wait,
                                       max_wait_s=max_wait_s, purpose=purpose,
                                       refuse_by_purpose=refuse_by_purpose)
        self._forbidden_response = forbidden_response
        self._transport: _Transport = transport or self._default_transport()

    def _default_transport(self) -> _Transport:
        raise NotImplementedError

    def _sign(self, request: httpx.Request) -> None:
        # as the request leaves: its slot is granted, its created time is now
        if self._signer is not None:
            for name, value in self._signer.headers(request.method, str(request.url)):
                request.headers[name] = value

    def _report(self, request: httpx.Request, response: httpx.Response,
                elapsed_s: float, grant: Grant) -> None:
        self.gate.report(str(request.url), response.status_code, elapsed_s=elapsed_s,
                         retry_after=response.headers.get("retry-after"), grant=grant).result()

    def _close_gate(self) -> None:
        if self._owns_gate:
            self.gate.close()


class PoliteTransport(_Gated[httpx.BaseTransport], httpx.BaseTransport):
    """Wraps ``transport`` (a plain :class:`httpx.HTTPTransport` by default).

    ``agent`` is the robots.txt product token (else the request's User-Agent's); ``store``
    a store URL (``memory://``, ``sqlite:///PATH``, ``redis://...``) or ``service_url`` a
    running ``polite serve`` (``http://:TOKEN@HOST:PORT`` when it has ``--admin-token``);
    ``allow_private`` lets it reach loopback and private addresses (``True``) or those of
    some networks (``["10.1.0.0/16"]``);
    ``gate`` shares one :class:`~polite.integrations.PoliteGate` between transports.
    ``purpose`` (``train-ai``, ``search``, ...) puts the URL's robots.txt AI-usage
    preferences for it in ``response.extensions["polite_usage"]``; with
    ``refuse_by_purpose`` a URL they disallow it for raises :class:`RequestRefused` with
    the deciding line, before any slot is taken. ``sign_with`` an Ed25519 key file signs
    every request (Web Bot Auth), with ``signature_agent`` the URL of its key directory.
    """

    def _default_transport(self) -> httpx.BaseTransport:
        return httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            grant = self.gate.acquire_blocking(str(request.url), _agent(request, self._agent))
        except RobotsDisallowed as refusal:
            if self._forbidden_response:
                return _forbidden(request, refusal)
            raise
        grant = self.gate.depart(str(request.url), grant).result()
        self._sign(request)
        started = time.monotonic()
        response = self._transport.handle_request(request)
        self._report(request, response, time.monotonic() - started, grant)
        if grant.usage is not None:
            response.extensions["polite_usage"] = grant.usage
        return response

    def close(self) -> None:
        try:
            self._transport.close()
        finally:
            self._close_gate()


class AsyncPoliteTransport(_Gated[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport):
    """:class:`PoliteTransport` for :class:`httpx.AsyncClient` (asyncio); the same
    arguments, ``transport`` an :class:`httpx.AsyncHTTPTransport` by default."""

    def _default_transport(self) -> httpx.AsyncBaseTransport:
        return httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            grant = await self.gate.acquire_async(str(request.url),
                                                  _agent(request, self._agent))
        except RobotsDisallowed as refusal:
            if self._forbidden_response:
                return _forbidden(request, refusal)
            raise
        grant = await asyncio.wrap_future(self.gate.depart(str(request.url), grant))
        self._sign(request)
        started = time.monotonic()
        response = await self._transport.handle_async_request(request)
        elapsed_s = time.monotonic() - started
        await self.gate.report_async(str(request.url), response.status_code,
                                     elapsed_s=elapsed_s,
                                     retry_after=response.headers.get("retry-after"),
                                     grant=grant)
        if grant.usage is not None:
            response.extensions["polite_usage"] = grant.usage
        return response

    async def aclose(self) -> None:
        try:
            await self._transport.aclose()
        finally:
            self._close_gate()
