"""DNS rebinding against the proxy's private-address guard: a name that is public when the
guard asks and 127.0.0.1 when the connection is made. The proxy runs in the test's process,
so that the public internet can be stood in for: the resolver answers the test's names as
its table says, and a connection to a public address goes to the loopback site standing in
for it. Everything else is real (the proxy, robots.txt fetched over HTTP, the sites)."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from polite.api import create_app
from polite.clock import WallClock
from polite.fetch.politeness import Politeness
from polite.fetch.robots import RobotsFetcher, create_client
from polite.proxy import Interception, ProxyServer
from polite.storage import open_store
from tests.sites import Reply, Site, serve

if TYPE_CHECKING:
    from polite.proxy.authority import CertificateAuthority

pytestmark = pytest.mark.anyio

PUBLIC = "93.184.216.34"  # a public address; here, the site standing in for it
INTERNAL = Reply(200, b"internal admin page")
OUTSIDE = Reply(200, b"the public site's page")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # its lookups go through socket.getaddrinfo, which the test answers


@dataclass
class Internet:
    """What the resolver answers for the test's names, and where a connection to a public
    address and port really goes."""

    names: dict[str, str] = field(default_factory=dict)  # "": the name does not resolve
    routes: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)


@pytest.fixture
def internet(monkeypatch: pytest.MonkeyPatch) -> Internet:
    world = Internet()
    resolve, connect = socket.getaddrinfo, socket.socket.connect  # the loopback guard's

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if world.names.get(name, "x") == "":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if name in world.names:
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                     (world.names[name], int(port or 0)))]
        return resolve(host, port, *args, **kwargs)

    def routed(self: socket.socket, address: Any) -> None:
        if isinstance(address, tuple):
            address = world.routes.get((address[0], address[1]), address)
        connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", routed)
    return world


@contextmanager
def rebound(internet: Internet, tls: Callable[[str], ssl.SSLContext] | None = None,
            outside_page: Reply = OUTSIDE) -> Iterator[tuple[str, int, Site]]:
    """``rebind.test``: public, served by a site whose robots.txt, once asked for, moves the
    name to 127.0.0.1, where an internal admin page listens on the same port. The name, the
    port, and the internal site. ``tls`` makes the sites' contexts (https)."""
    name = "rebind.test"

    def robots() -> Reply:
        internet.names[name] = "127.0.0.1"  # the attacker's DNS answers otherwise from now
        return Reply(200, b"User-agent: *\nAllow: /\n")

    with serve(Site("127.0.0.1", {"/admin": INTERNAL},
                    tls=tls(name) if tls else None)) as inside, \
            serve(Site("127.0.61.11", {"/robots.txt": robots, "/admin": outside_page},
                       tls=tls(name) if tls else None)) as outside:
        internet.names[name] = PUBLIC
        internet.routes[(PUBLIC, inside.port)] = (outside.host, outside.port)
        yield name, inside.port, inside


@pytest.fixture
def rebinding(internet: Internet) -> Iterator[tuple[str, int, Site]]:
    with rebound(internet) as found:
        yield found


@asynccontextmanager
async def guarded_proxy(authority: CertificateAuthority | None = None) -> AsyncIterator[int]:
    """``polite serve`` as it runs by default (private addresses refused), in this process;
    its port. With ``authority``, TLS is intercepted with it and origins are trusted when
    it signed their certificates."""
    clock = WallClock()
    store = open_store("memory://", clock)
    trust = ssl.create_default_context()
    interception = None
    if authority is not None:
        trust.load_verify_locations(cadata=authority.certificate_pem().decode())
        interception = Interception(authority)
    client = create_client(verify=trust)
    fetcher = RobotsFetcher(client, store, clock, agent="politetest")
    politeness = Politeness(fetcher, store, clock, agent="politetest", default_delay_s=0)
    proxy = ProxyServer(politeness, create_app(politeness, store), upstream_tls=trust,
                        interception=interception)
    port = await proxy.start("127.0.61.10", 0)
    try:
        yield port
    finally:
        await proxy.close()
        await client.aclose()
        await store.close()


async def _read_answer(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.lower().split(b"\r\n")
                  if line.startswith(b"content-length:"))
    return head + await reader.readexactly(length)


async def test_a_proxied_request_goes_to_the_address_that_was_checked(
        rebinding: tuple[str, int, Site]) -> None:
    name, port, inside = rebinding
    async with guarded_proxy() as proxy_port:
        reader, writer = await asyncio.open_connection("127.0.61.10", proxy_port)
        writer.write(f"GET http://{name}:{port}/admin HTTP/1.1\r\nHost: {name}\r\n\r\n"
                     .encode())
        answer = await asyncio.wait_for(_read_answer(reader), 20)
        writer.close()
    assert inside.requests == []
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(OUTSIDE.body)


async def test_a_tunnel_goes_to_the_address_that_was_checked(
        rebinding: tuple[str, int, Site]) -> None:
    """A raw tunnel into loopback would have carried anything, to any internal service."""
    name, port, inside = rebinding
    async with guarded_proxy() as proxy_port:
        reader, writer = await asyncio.open_connection("127.0.61.10", proxy_port)
        writer.write(f"CONNECT {name}:{port} HTTP/1.1\r\nHost: {name}:{port}\r\n\r\n"
                     .encode())
        opened = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
        assert opened.startswith(b"HTTP/1.1 200")
        writer.write(f"GET /admin HTTP/1.1\r\nHost: {name}\r\n\r\n".encode())
        answer = await asyncio.wait_for(_read_answer(reader), 20)
        writer.close()
    assert inside.requests == []
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(OUTSIDE.body)


async def test_requests_inside_an_intercepted_tunnel_go_to_the_address_that_was_checked(
        internet: Internet, tmp_path: Path) -> None:
    """Each request inside is served as a plain one is, on a connection of its own when the
    origin closed the last: that connection went to the name, looked up again. (The internal
    site's certificate verifies here: what is tested is where the connection goes.)"""
    pytest.importorskip("cryptography", reason="the tls extra is not installed")
    from polite.proxy.authority import CertificateAuthority

    authority = CertificateAuthority.open(tmp_path / "ca")
    closing = Reply(200, OUTSIDE.body, {"Connection": "close"})
    with rebound(internet, authority.context_for, closing) as (name, port, inside):
        async with guarded_proxy(authority) as proxy_port:
            reader, writer = await asyncio.open_connection("127.0.61.10", proxy_port)
            writer.write(f"CONNECT {name}:{port} HTTP/1.1\r\nHost: {name}:{port}\r\n\r\n"
                         .encode())
            opened = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
            assert opened.startswith(b"HTTP/1.1 200")
            trust = ssl.create_default_context(cadata=authority.certificate_pem().decode())
            await writer.start_tls(trust, server_hostname=name)
            answers = []
            for _ in range(2):
                writer.write(f"GET /admin HTTP/1.1\r\nHost: {name}:{port}\r\n\r\n".encode())
                answers.append(await asyncio.wait_for(_read_answer(reader), 20))
            writer.close()
    assert inside.requests == []
    assert all(answer.endswith(OUTSIDE.body) for answer in answers), answers


async def test_a_name_found_private_is_refused_naming_its_address_and_one_not_found_is_502(
        internet: Internet) -> None:
    internet.names.update({"intranet.test": "10.1.2.3", "gone.test": ""})
    async with guarded_proxy() as proxy_port:
        reader, writer = await asyncio.open_connection("127.0.61.10", proxy_port)
        answers = []
        for name in ("intranet.test", "gone.test"):
            writer.write(f"GET http://{name}/ HTTP/1.1\r\nHost: {name}\r\n\r\n".encode())
            answers.append(await asyncio.wait_for(_read_answer(reader), 20))
        writer.close()
    assert answers[0].startswith(b"HTTP/1.1 403")
    assert b"intranet.test (10.1.2.3) is a private or loopback address" in answers[0]
    assert answers[1].startswith(b"HTTP/1.1 502")  # on the same connection: it went on
    assert b"gone.test cannot be looked up" in answers[1]
