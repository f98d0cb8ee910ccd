"""CONNECT tunnels: opened once robots.txt allows the site's root and the host's slot is
free, then bytes pass both ways; with interception (``--intercept-tls``) the tunnel's TLS
ends here and the requests inside are served as plain ones."""

from __future__ import annotations

import asyncio
import contextlib
import math
import ssl
import time
from dataclasses import dataclass
from typing import Any, Protocol

from polite.fetch.wire import END, Channel, Head, ProtocolError, response_head
from polite.proxy.base import _VIA, Key, Mode, _host_problem, _product_token, _UpstreamError
from polite.proxy.forward import Forwarding

__all__ = ["Interception", "TunnelCertificates", "Tunnels"]

_TUNNEL_DEFAULTS = frozenset({b"x-polite-mode", b"x-polite-timeout", b"x-polite-client"})


class TunnelCertificates(Protocol):
    """Where an intercepted tunnel's certificate comes from (the local CA)."""

    def context_for(self, host: str) -> ssl.SSLContext:
        """A server-side TLS context presenting a certificate for ``host``."""
        ...


@dataclass(frozen=True, slots=True)
class Interception:
    """``--intercept-tls``: CONNECT tunnels are opened with a certificate of the local CA, so
    the requests inside get what plain http requests get; hosts in ``plain`` (clients that
    pin certificates) stay tunnels."""

    certificates: TunnelCertificates
    plain: frozenset[str] = frozenset()


class _InsideChannel(Channel):
    """The client side inside an intercepted tunnel (over TLS, which has no half-close)."""

    def eof_received(self) -> bool | None:
        super().eof_received()
        return None



class Tunnels(Forwarding):
    """CONNECT, plain or intercepted."""

    _interception: Interception | None

    async def _tunnel(self, client: Channel, head: Head, peer: tuple[Any, ...]) -> bool:
        """A CONNECT tunnel. What passes through it is encrypted, so politeness is kept per
        host: robots.txt must allow the site's root, and opening the tunnel takes the host's
        slot once, however many requests then travel inside it. Intercepted, its requests
        are read and each is served as a plain one is."""
        authority = head.target.decode("latin-1")
        host, _, port_text = authority.rpartition(":")
        host = host.strip("[]").lower()
        if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            self._send_error(client, 400, "CONNECT needs host:port", close=True)
            return False
        port = int(port_text)
        problem = _host_problem(host)
        if problem is not None:
            self._send_error(client, 400, problem, close=True)
            return False
        if (host, port) in self._addresses:
            self._send_error(client, 508, "this tunnel leads to the proxy itself: refused, "
                             "not looped", close=True)
            return False
        asked = await self._admit(client, host, head, "tunnel")
        if not isinstance(asked, tuple):
            return False
        mode, wait_s, address = asked
        netloc = f"[{host}]" if ":" in host else host
        interception = self._interception
        if interception is not None and host not in interception.plain:
            intercepted = await self._intercept(client, interception, head, host, port,
                                                netloc, peer, address)
            if intercepted is not None:
                return intercepted
        # Tunnels carry TLS on 443 and 8443; anything else is read as plain HTTP's robots.txt.
        scheme = "https" if port in (443, 8443) else "http"
        default = 443 if scheme == "https" else 80
        root = f"{scheme}://{netloc}/" if port == default else f"{scheme}://{netloc}:{port}/"
        agent = _product_token(head.get(b"user-agent"))
        # A plain tunnel is traced as one exchange (CONNECT, the site's root, the decision,
        # how long it stayed open) and counted for its host, as the dashboard shows requests.
        activity = self._politeness.activity
        watch = activity.watch("CONNECT", root, host, held=mode is not Mode.REJECT)
        decision, status, delay_ms = "error", 0, 0  # what the trace says of it at the end
        try:
            started = time.monotonic()
            verdict = await self._verdict(root, agent, mode, wait_s)
            activity.decided(watch, verdict.cause)
            held_ms = 0 if mode is Mode.REJECT else math.ceil(
                (time.monotonic() - started) * 1000)
            if not verdict.allowed:
                self._refuse(client, verdict)
                decision, status = verdict.cause, verdict.status
                delay_ms = max(0, verdict.retry_ms)
                await client.drain()
                return False
            try:
                upstream = await self._open(host, port, None, raw=True, address=address)
            except _UpstreamError as exc:
                self._send_error(client, exc.status, str(exc), close=True)
                status, delay_ms = exc.status, held_ms
                return False
            self.stats["tunnels"] += 1
            client.write(response_head(200, b"Connection Established", [(b"via", _VIA)]))
            if client.trailing:
                upstream.write(client.trailing)
            idle = self.settings.tunnel_idle_s

            async def pump(source: Channel, sink: Channel) -> None:
                with contextlib.suppress(ConnectionError, TimeoutError, OSError,
                                         ProtocolError):
                    while True:
                        event = await source.next(idle)
                        if type(event) is not bytes:
                            if event is END:  # the CONNECT request's own end
                                continue
                            break
                        sink.write(event)
                        await sink.drain()
                sink.write_eof()

            decision, status, delay_ms = verdict.cause, 200, held_ms
            try:
                await asyncio.gather(pump(client, upstream), pump(upstream, client))
            finally:
                upstream.close()
            return False
        finally:
            activity.ended(watch, decision, status, delay_ms)

    async def _intercept(self, client: Channel, interception: Interception, head: Head,
                         host: str, port: int, netloc: str, peer: tuple[Any, ...],
                         address: str | None) -> bool | None:
        """Terminates the tunnel's TLS with a certificate of the local CA, then serves the
        requests inside as plain ones (robots.txt per URL, the slot per request, the cache).

        The origin is reached over TLS first: one that cannot be reached gets the CONNECT a
        502 or 504; one whose certificate does not verify gets every request inside the 502
        naming why (a client reads that body; it cannot read the body of a refused
        CONNECT); one with which no TLS comes about (SSH, SMTP, plain HTTP) is left to a
        plain tunnel (None). Else whether the connection goes on (it does not)."""
        key: Key = ("https", host, port)
        failure: _UpstreamError | None = None
        try:
            upstream = await self._open(host, port, self._tls, address=address)
        except _UpstreamError as exc:
            if exc.tls == "handshake":
                return None
            if not exc.tls:
                self._send_error(client, exc.status, str(exc), close=True)
                return False
            failure = exc
        else:
            self._release(key, upstream, None)  # the first request inside takes it
        if client.trailing:
            # Bytes sent before the tunnel was open cannot be handed to the TLS layer.
            self._send_error(client, 400, "data sent before the tunnel was open", close=True)
            return False
        try:
            context = interception.certificates.context_for(host)
        except (ValueError, OSError, ssl.SSLError) as exc:
            self._send_error(client, 500, f"no certificate for {host}: {exc}", close=True)
            return False
        assert client.transport is not None
        # Nothing more is read for the old protocol: the client's first TLS bytes may come
        # as soon as it reads the 200, and they are the TLS layer's.
        client.transport.pause_reading()
        client.write(response_head(200, b"Connection Established", [(b"via", _VIA)]))
        client.flush()  # in the clear, before the TLS layer takes the transport
        inside = _InsideChannel("request", max_head_bytes=self.settings.max_head_bytes)
        try:
            transport = await asyncio.get_running_loop().start_tls(
                client.transport, inside, context, server_side=True,
                ssl_handshake_timeout=self.settings.client_read_s)
        except (OSError, TimeoutError):  # ssl.SSLError is an OSError: the client gave up
            return False
        if transport is None:
            return False
        inside.connection_made(transport)
        self.stats["intercepted"] += 1
        try:
            if failure is not None:
                event = await inside.next(self.settings.client_idle_s)
                if isinstance(event, Head):
                    self.stats["errors"] += 1
                    self._send_error(inside, failure.status, str(failure), close=True)
                    await inside.drain()
            else:
                origin = f"https://{netloc}" + ("" if port == 443 else f":{port}")
                # Options set on the CONNECT (curl --proxy-header) hold for the requests.
                defaults = [(k, v) for k, v in head.headers if k in _TUNNEL_DEFAULTS]
                await self._requests(inside, peer, origin.encode("latin-1"), defaults,
                                     address)
        except (ProtocolError, ConnectionError, TimeoutError):
            pass
        finally:
            inside.close()
        return False

