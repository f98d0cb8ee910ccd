"""The guard against relaying to private addresses, with a host's public answer kept a
minute: the resolver is a stand-in (names cannot be looked up here), the rest is real."""

from __future__ import annotations

import re

import pytest

from polite.core.politeness import RefusalReason, Refused
from polite.errors import ConfigError, PrivateAddress
from polite.fetch import create_client
from polite.fetch.politeness import Politeness, message
from polite.fetch.robots import (
    PUBLIC_HOST_TTL_S,
    PublicHosts,
    RobotsFetcher,
    is_public_host,
    networks,
)
from polite.storage import MemoryStore, RobotsRecord
from tests.fetch.test_activity import Clock

pytestmark = pytest.mark.anyio


class Resolver:
    """What the names resolve to (a name missing: the lookup fails), and who asked."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def __call__(self, host: str) -> list[str]:
        self.asked.append(host)
        if host not in self.answers:
            raise OSError(f"no such name: {host}")
        return self.answers[host]


async def test_a_public_answer_is_kept_for_its_time_then_asked_again() -> None:
    clock, resolver = Clock(), Resolver({"shop.example": ["93.184.216.34"]})
    hosts = PublicHosts(clock, resolve=resolver)
    assert await hosts.is_public("shop.example")
    clock.now += PUBLIC_HOST_TTL_S - 1
    assert await hosts.is_public("shop.example")
    assert resolver.asked == ["shop.example"]
    clock.now += 1
    assert await hosts.is_public("shop.example")
    assert resolver.asked == ["shop.example"] * 2


async def test_a_private_answer_is_refused_every_time_and_never_kept() -> None:
    clock = Clock()
    resolver = Resolver({"intranet.example": ["93.184.216.34", "10.1.2.3"],
                         "rebound.example": ["93.184.216.34"]})
    hosts = PublicHosts(clock, resolve=resolver)
    for _ in range(3):
        assert not await hosts.is_public("intranet.example")
    assert resolver.asked == ["intranet.example"] * 3
    # A host that turns private is refused once its public answer is too old.
    assert await hosts.is_public("rebound.example")
    resolver.answers["rebound.example"] = ["127.0.0.1"]
    clock.now += PUBLIC_HOST_TTL_S
    assert not await hosts.is_public("rebound.example")
    assert not await hosts.is_public("rebound.example")
    assert resolver.asked.count("rebound.example") == 3


async def test_a_failed_lookup_is_not_kept_and_addresses_need_none() -> None:
    clock, resolver = Clock(), Resolver({})
    hosts = PublicHosts(clock, resolve=resolver)
    assert await hosts.is_public("gone.example")  # fails to connect later, reported there
    resolver.answers["gone.example"] = ["192.168.0.7"]
    assert not await hosts.is_public("gone.example")  # the failure was not remembered
    for address, public in [("127.0.40.1", False), ("10.0.0.1", False), ("::1", False),
                            ("fe80::1", False), ("93.184.216.34", True),
                            ("2606:2800:220:1::", True)]:
        assert await hosts.is_public(address) is public
        assert await is_public_host(address) is public
    assert resolver.asked == ["gone.example"] * 2


async def test_only_so_many_hosts_are_kept() -> None:
    clock = Clock()
    resolver = Resolver({f"h{n}.example": ["93.184.216.34"] for n in range(3)})
    hosts = PublicHosts(clock, resolve=resolver, max_hosts=2)
    for n in (0, 1, 2, 2, 1, 0):
        assert await hosts.is_public(f"h{n}.example")
    assert resolver.asked == ["h0.example", "h1.example", "h2.example", "h0.example"]


async def test_politeness_asks_the_resolver_once_per_host_and_refuses_private_ones() -> None:
    """Politeness.check with private addresses refused (the default): a loopback address
    or a name resolving to a private one is refused on every call; a public name is looked
    up once for many calls."""
    clock = Clock()
    resolver = Resolver({"intranet.example": ["10.1.2.3"], "shop.example": ["93.184.216.34"]})
    store = MemoryStore(clock)
    async with create_client() as client:
        robots = RobotsFetcher(client, store, clock, agent="politetest")
        politeness = Politeness(robots, store, clock, agent="politetest",
                                public_hosts=PublicHosts(clock, resolve=resolver))
        for _ in range(3):
            verdicts = await politeness.check(["http://127.0.40.2/a",
                                               "http://intranet.example/a"])
            assert [v.cause for v in verdicts] == ["invalid", "invalid"]
            assert all(v.decision == Refused(RefusalReason.PRIVATE_ADDRESS, message(v) or "")
                       and "private or loopback" in (message(v) or "") for v in verdicts)
        assert resolver.asked == ["intranet.example"] * 3
        # shop.example passes the guard, looked up once for three calls (its robots.txt
        # known already: nothing is fetched from beyond loopback).
        await store.save_robots(RobotsRecord("http://shop.example", "allow", 404, b"",
                                             clock.now, clock.now + 3600))
        causes = [(await politeness.check(["http://shop.example/a"], reserve=True))[0].cause
                  for _ in range(3)]
        assert causes == ["allowed", "delay", "delay"]
    assert resolver.asked.count("shop.example") == 1


async def test_the_address_to_connect_to_is_looked_up_every_time_and_checked() -> None:
    """address() is the guard at connection time: never the kept answer, every address of
    the name checked, the first given back; an allowed network lets its addresses through
    and no other."""
    clock = Clock()
    resolver = Resolver({"shop.example": ["93.184.216.34"],
                         "mixed.example": ["93.184.216.34", "169.254.169.254"],
                         "intranet.example": ["10.1.2.3"]})
    hosts = PublicHosts(clock, resolve=resolver, allowed=networks(["10.1.0.0/16"]))
    assert await hosts.is_public("shop.example")
    assert await hosts.address("shop.example") == "93.184.216.34"
    resolver.answers["shop.example"] = ["127.0.0.1"]  # rebound within the kept minute
    assert await hosts.is_public("shop.example")  # the kept answer: a check, not a connection
    with pytest.raises(PrivateAddress, match=r"shop\.example \(127\.0\.0\.1\) is a private"):
        await hosts.address("shop.example")
    with pytest.raises(PrivateAddress, match=re.escape("169.254.169.254")):
        await hosts.address("mixed.example")
    assert await hosts.address("intranet.example") == "10.1.2.3"
    assert await hosts.address("10.1.9.9") == "10.1.9.9"
    with pytest.raises(PrivateAddress, match=re.escape("10.2.0.1 is a private")):
        await hosts.address("10.2.0.1")
    with pytest.raises(OSError, match="no such name"):
        await hosts.address("gone.example")
    assert resolver.asked.count("shop.example") == 3


def test_networks_are_read_or_refused_by_name() -> None:
    assert [str(n) for n in networks(["10.1.0.0/16", " 127.0.6.1 ", "fd00::/8"])] == \
        ["10.1.0.0/16", "127.0.6.1/32", "fd00::/8"]
    for bad in ("10.1.0.0/33", "intranet", ""):
        with pytest.raises(ConfigError, match=re.escape(f"--allow-network {bad!r}: not a network")):
            networks([bad])
