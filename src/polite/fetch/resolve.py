"""Names to addresses, one way for every product: the system's resolver, a hosts-format
file, or a nameserver of the user's (``--nameserver``, asked through c-ares by aiodns),
each behind a small cache. The private-address guard (:class:`~polite.fetch.robots.PublicHosts`)
checks what a resolver answers and the HTTP client connects to it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from polite.core.text import decode_text
from polite.errors import ConfigError

if TYPE_CHECKING:
    import aiodns

__all__ = ["CachedResolver", "HostsFile", "Nameserver", "Resolver", "ResolverFailure",
           "SystemResolver", "build_resolver", "first_address", "system_addresses"]

# How many resolved names are remembered, and for how long (a name is looked up twice per
# request: the address check and the connection).
CACHE_NAMES = 4_096
CACHE_TTL_S = 60.0
NAMESERVER_TIMEOUT_S = 5.0  # a nameserver's answer to one query, each of its tries
# A lookup the resolver gave no answer to (ResolverFailure) is asked again this many times
# in all, the pause between two tries doubling from the second figure: a resolver's hiccup
# (a dropped packet, a nameserver restarting) is over within seconds, and a survey of
# 100,000 domains must not record a name it never heard about as one that does not exist.
RESOLVER_TRIES = 3
RESOLVER_PAUSE_S = 1.0


class ResolverFailure(OSError):
    """The resolver gave no answer about a name: its nameserver was silent, refused or
    failed (SERVFAIL), or the system's resolver said to try again (EAI_AGAIN). Unlike a
    definite answer (no such name, no address) it says nothing of the name."""


class Resolver(Protocol):
    """A host name's addresses; ``OSError`` when it has none."""

    async def addresses(self, host: str) -> list[str]: ...

    async def close(self) -> None: ...


async def system_addresses(host: str) -> list[str]:
    """``host``'s addresses from the system's resolver (getaddrinfo, in a thread);
    :class:`ResolverFailure` when it could not tell: EAI_AGAIN (a nameserver silent or
    failing, SERVFAIL) and EAI_FAIL (its answer refused or unusable: REFUSED, FORMERR,
    NOTIMP), neither of which says anything of the name."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None,
                                                             type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if exc.errno in (socket.EAI_AGAIN, socket.EAI_FAIL):
            raise ResolverFailure(f"{host}: no answer from the resolver ({exc.strerror})"
                                  ) from exc
        raise
    return [str(info[4][0]) for info in infos]


class SystemResolver:
    """The system's resolver (its hosts file, its nameservers)."""

    async def addresses(self, host: str) -> list[str]:
        return await system_addresses(host)

    async def close(self) -> None:
        return None


class HostsFile:
    """Names from a hosts-format file (``ADDRESS NAME...``); a name it lacks does not
    resolve (a survey of a farm must not reach the world)."""

    def __init__(self, path: Path) -> None:
        self.names: dict[str, str] = {}
        text = decode_text(path.read_bytes(), str(path))
        for number, line in enumerate(text.splitlines(), 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            try:
                ipaddress.ip_address(fields[0])
            except ValueError:
                raise ConfigError(f"{path}:{number}: not an address: {fields[0]!r}") from None
            for name in fields[1:]:
                self.names.setdefault(name.lower(), fields[0])

    async def addresses(self, host: str) -> list[str]:
        address = self.names.get(host.lower())
        if address is None:
            raise OSError(f"{host} is not in the hosts file")
        return [address]

    async def close(self) -> None:
        return None


class Nameserver:
    """One nameserver asked directly (its IPv4 answers), not the system's hosts file
    first. Made within a running loop."""

    def __init__(self, address: str, port: int = 53, *,
                 timeout_s: float = NAMESERVER_TIMEOUT_S) -> None:
        try:
            import aiodns
        except ImportError as exc:
            raise ConfigError("--nameserver needs aiodns: pip install 'polite-web[survey]'"
                              ) from exc
        self._named = f"{address}:{port}"
        self._address, self._port, self._timeout_s = address, port, timeout_s
        self._resolver: aiodns.DNSResolver = self._channel()
        self._error = aiodns.error.DNSError
        codes = aiodns.error
        # c-ares's definite answers: no such name (NXDOMAIN), no address of the family, a
        # name that cannot be one. Every other error is the nameserver's silence, refusal
        # or failure (SERVFAIL), or c-ares's own: nothing said of the name.
        self._definite = frozenset({codes.ARES_ENOTFOUND, codes.ARES_ENODATA,
                                    codes.ARES_EBADNAME, codes.ARES_ENONAME})
        self._unreached = codes.ARES_ECONNREFUSED

    def _channel(self) -> aiodns.DNSResolver:
        import aiodns

        # lookups="b": the nameserver only, not /etc/hosts first.
        return aiodns.DNSResolver(nameservers=[self._address], udp_port=self._port,
                                  tcp_port=self._port, lookups="b",
                                  timeout=self._timeout_s, tries=2)

    async def addresses(self, host: str) -> list[str]:
        resolver = self._resolver
        try:
            answer = await resolver.getaddrinfo(host, family=socket.AF_INET,
                                                type=socket.SOCK_STREAM)
        except self._error as exc:
            said = exc.args[-1] if exc.args else exc
            if exc.args and exc.args[0] in self._definite:
                raise OSError(f"{host}: {said}") from None
            if exc.args and exc.args[0] == self._unreached and resolver is self._resolver:
                # c-ares could not send to the nameserver at all (no socket, or refused at
                # once): the next lookup gets a channel made anew, not one whose state
                # (its servers, their failure counts, its sockets) may be what failed.
                said = f"{said}; the channel's servers: {','.join(resolver.nameservers)}"
                self._resolver = self._channel()
                await resolver.close()
            raise ResolverFailure(f"{host}: no answer from the nameserver {self._named} "
                                  f"({said})") from None
        found = list(dict.fromkeys(_text(node.addr[0]) for node in answer.nodes))
        if not found:
            raise OSError(f"no address for {host}")
        return found

    async def close(self) -> None:
        await self._resolver.close()


def _text(address: str | bytes) -> str:
    return address.decode("ascii") if isinstance(address, bytes) else address


class CachedResolver:
    """Answers of another resolver kept a minute, for a bounded number of names, so that a
    survey of 100,000 domains neither asks twice per request nor grows without end. A
    lookup it gave no answer to (:class:`ResolverFailure`) is asked again, ``tries`` times
    in all, ``pause_s`` then twice that between them; the last failure is raised, with the
    number of tries in its text, and none is kept."""

    def __init__(self, inner: Resolver, *, names: int = CACHE_NAMES,
                 ttl_s: float = CACHE_TTL_S, tries: int = RESOLVER_TRIES,
                 pause_s: float = RESOLVER_PAUSE_S) -> None:
        self._inner = inner
        self._names = names
        self._ttl_s = ttl_s
        self._tries = max(1, tries)
        self._pause_s = pause_s
        self._known: OrderedDict[str, tuple[float, list[str]]] = OrderedDict()

    async def addresses(self, host: str) -> list[str]:
        now = time.monotonic()
        known = self._known.get(host)
        if known is not None and known[0] > now:
            return known[1]
        tried, pause = 1, self._pause_s
        while True:
            try:
                found = await self._inner.addresses(host)
            except ResolverFailure as exc:
                if tried >= self._tries:
                    raise ResolverFailure(f"{exc}; {tried} tries") from None
                await asyncio.sleep(pause)
                tried, pause = tried + 1, pause * 2
                continue
            break
        now = time.monotonic()
        self._known[host] = (now + self._ttl_s, found)
        self._known.move_to_end(host)
        while len(self._known) > self._names:
            self._known.popitem(last=False)
        return found

    async def close(self) -> None:
        await self._inner.close()


def build_resolver(*, hosts: Path | None = None, nameserver: str | None = None) -> Resolver:
    """A hosts-format file, a nameserver (``IP`` or ``IP:PORT``), or the system's resolver;
    each behind a small cache. Call within a running loop."""
    inner: Resolver
    if hosts is not None:
        inner = HostsFile(hosts)
    elif nameserver is not None:
        inner = Nameserver(*_split_nameserver(nameserver))
    else:
        inner = SystemResolver()
    return CachedResolver(inner)


def first_address(addresses: Callable[[str], Awaitable[list[str]]]
                  ) -> Callable[[str], Awaitable[str]]:
    """The address a client connects to for a host when no guard checks it: the first
    ``addresses`` gives (private addresses allowed, names still resolved the user's way)."""

    async def address(host: str) -> str:
        return (await addresses(host))[0]

    return address


def _split_nameserver(text: str) -> tuple[str, int]:
    host, _, port_text = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    try:
        ipaddress.ip_address(host)
        port = int(port_text) if port_text else 53
    except ValueError:
        raise ConfigError(f"--nameserver {text!r}: expected IP or IP:PORT") from None
    if not 0 < port < 65536:
        raise ConfigError(f"--nameserver {text!r}: no such port")
    return host, port
