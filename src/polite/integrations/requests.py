"""A requests adapter that waits for each host's slot and obeys robots.txt.

>>> session = requests.Session()  # doctest: +SKIP
>>> adapter = PoliteAdapter(agent="ExampleBot")  # doctest: +SKIP
>>> session.mount("https://", adapter); session.mount("http://", adapter)  # doctest: +SKIP

The same behaviour as :class:`polite.integrations.httpx.PoliteTransport`, synchronous; its
refusals are :class:`requests.RequestException` s as well as polite's own errors.
"""

from __future__ import annotations

from typing import Any

try:
    import requests
    from requests.adapters import HTTPAdapter
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("polite.integrations.requests needs requests: "
                      "pip install 'polite-web[scrapy]'") from exc

import polite.errors as errors
from polite.core.politeness.rules import DEFAULT_DELAY_S
from polite.errors import ConfigError
from polite.integrations._gate import MAX_WAIT_S, PoliteGate, identity, unexpected_keywords

__all__ = ["PoliteAdapter", "RequestRefused", "RobotsDisallowed", "SlotNotReady"]


class RequestRefused(errors.RequestRefused, requests.RequestException):
    """:class:`polite.errors.RequestRefused` as requests raises its errors."""

    def __init__(self, url: str, reason: str, *,
                 request: requests.PreparedRequest | None = None) -> None:
        super().__init__(url, reason)
        self.request = request


class RobotsDisallowed(RequestRefused, errors.RobotsDisallowed):
    """:class:`polite.errors.RobotsDisallowed` as requests raises its errors."""


class SlotNotReady(errors.SlotNotReady, requests.RequestException):
    """:class:`polite.errors.SlotNotReady` as requests raises its errors."""

    def __init__(self, url: str, wait_s: float, reason: str, *,
                 request: requests.PreparedRequest | None = None) -> None:
        super().__init__(url, wait_s, reason)
        self.request = request


def _refusal(refused: errors.PoliteError, request: requests.PreparedRequest
             ) -> requests.RequestException:
    """The gate's refusal as the requests error of its kind (its own when it is none)."""
    match refused:
        case errors.RobotsDisallowed():
            return RobotsDisallowed(refused.url, refused.reason, request=request)
        case errors.RequestRefused():
            return RequestRefused(refused.url, refused.reason, request=request)
        case errors.SlotNotReady():
            return SlotNotReady(refused.url, refused.wait_s, refused.reason, request=request)
    raise refused


class PoliteAdapter(HTTPAdapter):
    """An :class:`~requests.adapters.HTTPAdapter` that asks polite before each request.

    ``agent`` is the robots.txt product token (else the request's User-Agent's); ``store`` a
    store URL or ``service_url`` a running ``polite serve``; ``allow_private`` lets it reach
    loopback and private addresses; ``wait=False`` raises :class:`SlotNotReady` instead of
    waiting; ``forbidden_response`` answers a robots.txt refusal with a 403 response rather than
    raising :class:`RobotsDisallowed`. ``purpose`` (``train-ai``, ``search``, ...) sets
    ``response.polite_usage`` to the URL's robots.txt AI-usage preferences for it; with
    ``refuse_by_purpose`` a URL they disallow it for raises :class:`RequestRefused` before any
    slot is taken. ``sign_with`` an Ed25519 key file signs every request (Web Bot Auth),
    robots.txt included, with ``signature_agent`` the URL of its key directory (with ``gate``,
    the gate's key signs). ``agent`` given, a request whose User-Agent does not name it
    (``python-requests/2.32.3``) is sent with ``User-Agent: agent``; robots.txt goes under the
    User-Agent its site's requests carry (the session's). The refusals are
    :class:`requests.RequestException` s and polite's errors alike. Other keyword arguments go
    to HTTPAdapter.
    """

    def __init__(self, *, agent: str = "", store: str = "memory://",
                 service_url: str | None = None, allow_private: bool = False,
                 dialect: str = "auto", default_delay_s: float = DEFAULT_DELAY_S,
                 wait: bool = True, max_wait_s: float = MAX_WAIT_S,
                 forbidden_response: bool = False, gate: PoliteGate | None = None,
                 purpose: str | None = None, refuse_by_purpose: bool = False,
                 sign_with: str | None = None, signature_agent: str | None = None,
                 **adapter_options: Any) -> None:
        # A misspelt argument is named with this class, not HTTPAdapter that would refuse it.
        unexpected_keywords(type(self).__name__, adapter_options, PoliteAdapter.__init__,
                            HTTPAdapter.__init__)
        if gate is not None and (sign_with or signature_agent):
            raise ConfigError("sign_with= with gate=: the key is the gate's, for it signs the "
                              "robots.txt it fetches too: PoliteGate(sign_with=...)")
        super().__init__(**adapter_options)
        self._agent = agent
        self._forbidden_response = forbidden_response
        self._owns_gate = gate is None
        self.gate = gate or PoliteGate(agent=agent, store=store, service_url=service_url,
                                       allow_private=allow_private, dialect=dialect,
                                       default_delay_s=default_delay_s, wait=wait,
                                       max_wait_s=max_wait_s, purpose=purpose,
                                       refuse_by_purpose=refuse_by_purpose,
                                       sign_with=sign_with, signature_agent=signature_agent)
        self._signer = self.gate.signer

    def send(self, request: requests.PreparedRequest, stream: bool = False,
             timeout: float | tuple[float | None, float | None] | None = None,
             verify: bool | str = True, cert: str | tuple[str, str] | None = None,
             proxies: dict[str, str] | None = None) -> requests.Response:
        url = request.url or ""
        given = request.headers.get("User-Agent", "")
        agent, user_agent = identity(given.decode("latin-1") if isinstance(given, bytes)
                                     else str(given), self._agent)
        request.headers["User-Agent"] = user_agent
        try:
            grant = self.gate.acquire_blocking(url, agent, user_agent=user_agent)
        except errors.RobotsDisallowed as refusal:
            if self._forbidden_response:
                return self._forbidden(request, refusal)
            raise _refusal(refusal, request) from None
        except (errors.RequestRefused, errors.SlotNotReady) as refusal:
            raise _refusal(refusal, request) from None
        grant = self.gate.depart(url, grant).result()
        if self._signer is not None:  # as it leaves: its created time is now
            request.headers.update(self._signer.headers(request.method or "GET", url))
        try:
            response = super().send(request, stream=stream, timeout=timeout, verify=verify,
                                    cert=cert, proxies=proxies)
        except BaseException:
            self.gate.abandon(url)  # no response: the host's lease ends
            raise
        self.gate.report(url, response.status_code,
                         elapsed_s=response.elapsed.total_seconds(),
                         retry_after=response.headers.get("Retry-After"), grant=grant).result()
        if grant.usage is not None:
            # requests' Response has no place for extensions: an attribute of its own
            response.polite_usage = grant.usage  # type: ignore[attr-defined]
        return response

    def _forbidden(self, request: requests.PreparedRequest,
                   refusal: errors.RobotsDisallowed) -> requests.Response:
        response = requests.Response()
        response.status_code = 403
        response.reason = "Forbidden"
        response._content = f"Blocked by robots.txt: {refusal.reason}\n".encode()
        response.headers["Content-Type"] = "text/plain; charset=utf-8"
        response.url = request.url or ""
        response.request = request
        return response

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._owns_gate:
                self.gate.close()
