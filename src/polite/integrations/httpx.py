"""httpx transports that wait for each host's slot and obey robots.txt.

>>> client = httpx.Client(transport=PoliteTransport(agent="ExampleBot"))  # doctest: +SKIP

Every request asks polite first: a URL robots.txt forbids raises :class:`RobotsDisallowed`
naming the rule and its line (or answers 403 with ``forbidden_response=True``); otherwise
it waits for its host's slot (or raises :class:`SlotNotReady` with ``wait=False``). The
refusals are :class:`httpx.RequestError` s as well as polite's own errors, so an
``except httpx.HTTPError`` already in place catches them. The response's status and time
are fed back: a 429 or 503 holds the host (``Retry-After`` honoured), times feed the
adaptive delay. Every request to a site, robots.txt included, carries one User-Agent and,
with ``sign_with``, a signature.
"""

from __future__ import annotations

import asyncio
import time
from typing import Generic, TypeVar

import httpx

import polite.errors as errors
from polite.core.politeness.rules import DEFAULT_DELAY_S
from polite.errors import ConfigError
from polite.integrations._gate import (
    MAX_WAIT_S,
    AllowPrivate,
    Grant,
    PoliteGate,
    identity,
    unexpected_keywords,
)

__all__ = ["AsyncPoliteTransport", "PoliteTransport", "RequestRefused", "RobotsDisallowed",
           "SlotNotReady"]

_Transport = TypeVar("_Transport", httpx.BaseTransport, httpx.AsyncBaseTransport)


class RequestRefused(errors.RequestRefused, httpx.RequestError):
    """:class:`polite.errors.RequestRefused` as httpx raises its request errors."""

    def __init__(self, url: str, reason: str, *, request: httpx.Request | None = None
                 ) -> None:
        super().__init__(url, reason)
        if request is not None:
            self.request = request


class RobotsDisallowed(RequestRefused, errors.RobotsDisallowed):
    """:class:`polite.errors.RobotsDisallowed` as httpx raises its request errors."""


class SlotNotReady(errors.SlotNotReady, httpx.RequestError):
    """:class:`polite.errors.SlotNotReady` as httpx raises its request errors."""

    def __init__(self, url: str, wait_s: float, reason: str, *,
                 request: httpx.Request | None = None) -> None:
        super().__init__(url, wait_s, reason)
        if request is not None:
            self.request = request


def _refusal(refused: errors.PoliteError, request: httpx.Request) -> httpx.RequestError:
    """The gate's refusal as the httpx error of its kind (its own when it is none)."""
    match refused:
        case errors.RobotsDisallowed():
            return RobotsDisallowed(refused.url, refused.reason, request=request)
        case errors.RequestRefused():
            return RequestRefused(refused.url, refused.reason, request=request)
        case errors.SlotNotReady():
            return SlotNotReady(refused.url, refused.wait_s, refused.reason, request=request)
    raise refused


def _identify(request: httpx.Request, agent: str) -> tuple[str, str]:
    """The request's product token, its User-Agent set to the one its site sees."""
    token, user_agent = identity(request.headers.get("user-agent", ""), agent)
    request.headers["User-Agent"] = user_agent
    return token, user_agent


def _forbidden(request: httpx.Request, refusal: errors.RobotsDisallowed) -> httpx.Response:
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
        if gate is not None and (sign_with or signature_agent):
            raise ConfigError("sign_with= with gate=: the key is the gate's, for it signs the "
                              "robots.txt it fetches too: PoliteGate(sign_with=...)")
        self._agent = agent
        self._owns_gate = gate is None
        self.gate = gate or PoliteGate(agent=agent, store=store, service_url=service_url,
                                       allow_private=allow_private, dialect=dialect,
                                       default_delay_s=default_delay_s, wait=wait,
                                       max_wait_s=max_wait_s, purpose=purpose,
                                       refuse_by_purpose=refuse_by_purpose,
                                       sign_with=sign_with, signature_agent=signature_agent)
        self._signer = self.gate.signer
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
    every request (Web Bot Auth), robots.txt included, with ``signature_agent`` the URL of
    its key directory (with ``gate``, the gate's key signs). ``agent`` given, a request
    whose User-Agent does not name it (httpx's own, ``python-httpx/0.28.1``) is sent with
    ``User-Agent: agent``; robots.txt goes under the User-Agent its site's requests carry.
    Refusals raise :class:`RobotsDisallowed`, :class:`RequestRefused` or
    :class:`SlotNotReady`: :class:`httpx.RequestError` s and polite's errors alike.
    """

    def _default_transport(self) -> httpx.BaseTransport:
        return httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        token, user_agent = _identify(request, self._agent)
        try:
            grant = self.gate.acquire_blocking(str(request.url), token, user_agent=user_agent)
        except errors.RobotsDisallowed as refusal:
            if self._forbidden_response:
                return _forbidden(request, refusal)
            raise _refusal(refusal, request) from None
        except (errors.RequestRefused, errors.SlotNotReady) as refusal:
            raise _refusal(refusal, request) from None
        grant = self.gate.depart(str(request.url), grant).result()
        self._sign(request)
        started = time.monotonic()
        try:
            response = self._transport.handle_request(request)
        except BaseException:
            self.gate.abandon(str(request.url))  # no response: the host's lease ends
            raise
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
        token, user_agent = _identify(request, self._agent)
        try:
            grant = await self.gate.acquire_async(str(request.url), token,
                                                  user_agent=user_agent)
        except errors.RobotsDisallowed as refusal:
            if self._forbidden_response:
                return _forbidden(request, refusal)
            raise _refusal(refusal, request) from None
        except (errors.RequestRefused, errors.SlotNotReady) as refusal:
            raise _refusal(refusal, request) from None
        grant = await asyncio.wrap_future(self.gate.depart(str(request.url), grant))
        self._sign(request)
        started = time.monotonic()
        try:
            response = await self._transport.handle_async_request(request)
        except BaseException:
            self.gate.abandon(str(request.url))  # no response: the host's lease ends
            raise
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
