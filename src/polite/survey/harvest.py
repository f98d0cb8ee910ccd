"""Fetching robots.txt for many domains, seed 004's way (section 3.2): ``http://DOMAIN/
robots.txt`` first; when that answers HTML (a home page served instead) or redirects to
one, ``www.DOMAIN`` next. Redirects are followed by hand, five at most, each recorded;
names are resolved by aiohttp's resolver, or from a hosts-format file (``--hosts``), so a
farm of named sites can run on loopback.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from polite.core.robots import MAX_ROBOTS_BYTES
from polite.core.survey.outcomes import Outcome, body_outcome, status_outcome
from polite.errors import ConfigError
from polite.fetch.robots import is_public_host
from polite.survey.store import SiteRecord, SurveyStore

__all__ = ["Harvester", "HostsFile", "read_domains"]

MAX_REDIRECTS = 5


def read_domains(path: Path) -> list[tuple[int | None, str]]:
    """``rank,domain`` lines (Tranco, Alexa) or one domain a line; blank lines and ``#``
    comments skipped; :class:`ConfigError` with the line number for a line that is neither."""
    domains = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        rank_text, comma, name = line.partition(",")
        rank: int | None = None
        if comma:
            if not rank_text.strip().isdigit():
                raise ConfigError(f"{path}:{number}: expected 'rank,domain', got {line!r}")
            rank = int(rank_text)
        else:
            name = rank_text
        name = name.strip().lower().rstrip(".")
        if not name or "/" in name or " " in name:
            raise ConfigError(f"{path}:{number}: not a domain: {line!r}")
        domains.append((rank, name))
    return domains


class HostsFile(aiohttp.abc.AbstractResolver):
    """Names from a hosts-format file (``ADDRESS NAME...``); a name it lacks does not
    resolve (a survey of a farm must not reach the world)."""

    def __init__(self, path: Path) -> None:
        self.names: dict[str, str] = {}
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            try:
                ipaddress.ip_address(fields[0])
            except ValueError:
                raise ConfigError(f"{path}:{number}: not an address: {fields[0]!r}") from None
            for name in fields[1:]:
                self.names.setdefault(name.lower(), fields[0])

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[Any]:
        address = self.names.get(host.lower())
        if address is None:
            raise OSError(f"{host} is not in the hosts file")
        return [{"hostname": host, "host": address, "port": port, "family": socket.AF_INET,
                 "proto": 0, "flags": socket.AI_NUMERICHOST}]

    async def close(self) -> None:
        return None


@dataclass(slots=True)
class _Answer:
    outcome: Outcome
    status: int | None = None
    error: str | None = None
    url: str | None = None
    body: bytes | None = None
    size: int | None = None
    redirects: tuple[str, ...] = ()


class Harvester:
    """robots.txt of many domains, ``concurrency`` at once, each recorded as it ends."""

    def __init__(self, store: SurveyStore, clock: Callable[[], float], *,
                 resolver: aiohttp.abc.AbstractResolver | None = None,
                 concurrency: int = 100, https: bool = False, agent: str = "polite",
                 connect_timeout_s: float = 10.0, read_timeout_s: float = 30.0,
                 max_bytes: int = MAX_ROBOTS_BYTES, allow_private: bool = False) -> None:
        self._store = store
        self._clock = clock
        self._resolver = resolver
        self._concurrency = max(1, concurrency)
        self._scheme = "https" if https else "http"
        self._agent = agent
        self._timeout = aiohttp.ClientTimeout(total=connect_timeout_s + read_timeout_s,
                                              sock_connect=connect_timeout_s,
                                              sock_read=read_timeout_s)
        self._max_bytes = max_bytes
        self._allow_private = allow_private
        self.done: dict[str, int] = {}  # outcome -> sites, this run

    async def run(self, domains: Iterable[tuple[int | None, str]]) -> int:
        """Survey every domain not recorded yet; returns how many were."""
        todo = [(rank, name) for rank, name in domains if not self._store.recorded(name)]
        connector = aiohttp.TCPConnector(limit=self._concurrency, limit_per_host=1,
                                         resolver=self._resolver, force_close=True)
        async with aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, auto_decompress=True,
                cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
                headers={"User-Agent": self._agent}) as session:
            queue: asyncio.Queue[tuple[int | None, str]] = asyncio.Queue()
            for item in todo:
                queue.put_nowait(item)

            async def worker() -> None:
                while not queue.empty():
                    rank, name = queue.get_nowait()
                    await self._site(session, rank, name)

            await asyncio.gather(*(worker() for _ in range(min(self._concurrency,
                                                               len(todo) or 1))))
        return len(todo)

    async def _site(self, session: aiohttp.ClientSession, rank: int | None,
                    domain: str) -> None:
        answer = await self._fetch(session, f"{self._scheme}://{domain}/robots.txt")
        if answer.outcome is Outcome.HTML and not domain.startswith("www."):
            # Seed 004's second step: the www name, when the bare one served a home page.
            second = await self._fetch(session, f"{self._scheme}://www.{domain}/robots.txt")
            if second.outcome not in (Outcome.DNS_ERROR, Outcome.CONNECTION_ERROR):
                answer = _Answer(second.outcome, second.status, second.error, second.url,
                                 second.body, second.size,
                                 (*answer.redirects, f"www.{domain}", *second.redirects))
        error = answer.error
        if answer.redirects:
            error = json.dumps({"error": error, "redirects": list(answer.redirects)})
        self._store.record(SiteRecord(domain, rank, str(answer.outcome), answer.status, error,
                                      answer.url, None, answer.size), answer.body,
                           self._clock())
        self.done[str(answer.outcome)] = self.done.get(str(answer.outcome), 0) + 1

    async def _fetch(self, session: aiohttp.ClientSession, url: str) -> _Answer:
        redirects: list[str] = []
        seen = {url}
        for _ in range(MAX_REDIRECTS + 1):
            host = urlsplit(url).hostname or ""
            if not self._allow_private and not await self._is_public(host):
                return _Answer(Outcome.CONNECTION_ERROR, error=f"{host} is a private or "
                               "loopback address (--allow-private)", url=url,
                               redirects=tuple(redirects))
            try:
                async with session.get(url, allow_redirects=False) as response:
                    status = response.status
                    location = response.headers.get("Location")
                    if status in (301, 302, 303, 307, 308) and location:
                        target = urljoin(url, location)
                        redirects.append(target)
                        if target in seen:
                            return _Answer(Outcome.REDIRECT_LOOP, status, url=url,
                                           redirects=tuple(redirects))
                        seen.add(target)
                        url = target
                        continue
                    decided = status_outcome(status)
                    if decided is not None:
                        return _Answer(decided, status, url=url, redirects=tuple(redirects))
                    body = bytearray()
                    async for chunk in response.content.iter_chunked(1 << 16):
                        body += chunk
                        if len(body) > self._max_bytes:
                            break
                    size = len(body)
                    if size > self._max_bytes:  # count the rest, keep none of it
                        async for chunk in response.content.iter_chunked(1 << 16):
                            size += len(chunk)
                    kept = bytes(body[:self._max_bytes])
                    outcome = body_outcome(kept, content_type=response.headers.get(
                        "Content-Type", ""), size=size, max_bytes=self._max_bytes)
                    return _Answer(outcome, status, url=url, body=kept, size=size,
                                   redirects=tuple(redirects))
            except TimeoutError:
                return _Answer(Outcome.TIMEOUT, error="timed out", url=url,
                               redirects=tuple(redirects))
            except aiohttp.ClientConnectorDNSError as exc:
                return _Answer(Outcome.DNS_ERROR, error=str(exc), url=url,
                               redirects=tuple(redirects))
            except aiohttp.ClientConnectorError as exc:
                if isinstance(exc.os_error, OSError) and "hosts file" in str(exc.os_error):
                    return _Answer(Outcome.DNS_ERROR, error=str(exc), url=url,
                                   redirects=tuple(redirects))
                return _Answer(Outcome.CONNECTION_ERROR, error=str(exc), url=url,
                               redirects=tuple(redirects))
            except aiohttp.ClientError as exc:
                return _Answer(Outcome.CONNECTION_ERROR, error=f"{type(exc).__name__}: {exc}",
                               url=url, redirects=tuple(redirects))
        return _Answer(Outcome.REDIRECT_LOOP, error=f"more than {MAX_REDIRECTS} redirects",
                       url=url, redirects=tuple(redirects))


    async def _is_public(self, host: str) -> bool:
        """Whether every address of ``host`` is public (a name that does not resolve is
        let through: it fails as a DNS error)."""
        if self._resolver is None:
            return await is_public_host(host)
        try:
            infos = await self._resolver.resolve(host)
        except OSError:
            return True
        return all(ipaddress.ip_address(str(info["host"])).is_global for info in infos)
