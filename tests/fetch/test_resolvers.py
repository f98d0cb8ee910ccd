"""Names to addresses, one way for every product (polite.fetch.resolve): a hosts-format file,
a nameserver on loopback (a real DNS server, dnslib), each behind the cache; and a survey
that runs where aiohttp is not installed, the library it once needed for its DNS alone."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from polite.errors import ConfigError
from polite.fetch.resolve import (
    CachedResolver,
    HostsFile,
    Nameserver,
    ResolverFailure,
    build_resolver,
    system_addresses,
)
from tests.conftest import on_port_80
from tests.sites import Reply, Site, serve
from tests.test_survey_resume import dns_server

pytestmark = pytest.mark.anyio


async def test_a_nameserver_is_asked_once_per_name_within_the_cache() -> None:
    names = {"a.resolve.test": "127.0.6.61"}
    with dns_server("127.0.17.54", 5354, names) as asked:
        resolver = build_resolver(nameserver="127.0.17.54:5354")
        try:
            assert await resolver.addresses("a.resolve.test") == ["127.0.6.61"]
            assert await resolver.addresses("a.resolve.test") == ["127.0.6.61"]
            with pytest.raises(OSError):
                await resolver.addresses("missing.resolve.test")
        finally:
            await resolver.close()
    assert asked.count("a.resolve.test") == 1
    assert "missing.resolve.test" in asked


async def test_a_silent_nameserver_is_asked_again_then_named_as_no_answer() -> None:
    """A nameserver that does not answer says nothing of a name: the lookup is asked again
    after a pause (a name that went unanswered for c-ares's two tries resolves on the next
    lookup), and one never answered raises ResolverFailure, with the tries in its text,
    not the OSError of a name that does not exist."""
    names = {"late.resolve.test": "127.0.6.64", "mute.resolve.test": "127.0.6.65"}
    silent: dict[str, int | None] = {"late.resolve.test": 2, "mute.resolve.test": None}
    with dns_server("127.0.17.56", 5356, names, silent=silent) as asked:
        resolver = CachedResolver(Nameserver("127.0.17.56", 5356, timeout_s=0.2),
                                  pause_s=0.01)
        try:
            assert await resolver.addresses("late.resolve.test") == ["127.0.6.64"]
            with pytest.raises(ResolverFailure, match=r"no answer from the nameserver.*3 tries"):
                await resolver.addresses("mute.resolve.test")
            with pytest.raises(OSError) as missing:
                await resolver.addresses("missing.resolve.test")
        finally:
            await resolver.close()
    assert not isinstance(missing.value, ResolverFailure)
    assert asked.count("late.resolve.test") == 3
    assert asked.count("mute.resolve.test") == 3 * 2
    assert asked.count("missing.resolve.test") == 1


async def test_a_channel_that_cannot_reach_its_nameserver_is_made_anew() -> None:
    """When c-ares cannot send a query at all ("Could not contact DNS servers": no socket,
    or refused at once), the failure names the servers the channel was really using, and
    the next lookup goes through a channel made anew rather than the one that failed. The
    channel here is turned to a port nothing listens on (the state a failing channel was
    suspected to be in); before, every later lookup failed the same way."""
    names = {"back.resolve.test": "127.0.6.66"}
    with dns_server("127.0.17.57", 5357, names) as asked:
        nameserver = Nameserver("127.0.17.57", 5357, timeout_s=0.5)
        try:
            nameserver._resolver.nameservers = ["127.0.17.57:5358"]  # nothing listens there
            with pytest.raises(ResolverFailure) as failed:
                await nameserver.addresses("back.resolve.test")
            assert "the channel's servers: 127.0.17.57" in str(failed.value)
            assert asked == []
            assert await nameserver.addresses("back.resolve.test") == ["127.0.6.66"]
        finally:
            await nameserver.close()
    assert asked == ["back.resolve.test"]


@pytest.mark.parametrize(("code", "failure"), [(socket.EAI_AGAIN, True),
                                               (socket.EAI_FAIL, True),
                                               (socket.EAI_NONAME, False)],
                         ids=["EAI_AGAIN", "EAI_FAIL", "EAI_NONAME"])
async def test_the_system_resolver_s_failures_say_nothing_of_the_name(
        monkeypatch: pytest.MonkeyPatch, code: int, failure: bool) -> None:
    """glibc says EAI_AGAIN for a SERVFAIL or a silence and EAI_FAIL for a REFUSED, FORMERR
    or NOTIMP answer: the nameserver's trouble, not the name's (the system's nameserver
    cannot be pointed at a test's server, so its answer is given here)."""
    def lookup(*args: object, **kwargs: object) -> object:
        raise socket.gaierror(code, "the system resolver's answer")

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    with pytest.raises(OSError) as failed:
        await system_addresses("any.resolve.test")
    assert isinstance(failed.value, ResolverFailure) is failure


async def test_a_hosts_file_answers_its_names_only(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("# the farm\n127.0.6.62 b.resolve.test B2.resolve.test\n")
    resolver = build_resolver(hosts=hosts)
    assert await resolver.addresses("b2.resolve.test") == ["127.0.6.62"]
    with pytest.raises(OSError, match="not in the hosts file"):
        await resolver.addresses("example.com")  # never the world's answer
    hosts.write_text("127.0.6.62 ok.test\nnot-an-address bad.test\n")
    with pytest.raises(ConfigError, match=r"hosts:2: not an address"):
        HostsFile(hosts)


def test_build_resolver_names_a_bad_nameserver() -> None:
    with pytest.raises(ConfigError, match=r"--nameserver 'ns\.example'"):
        build_resolver(nameserver="ns.example")
    with pytest.raises(ConfigError, match="no such port"):
        build_resolver(nameserver="127.0.0.1:70000")


@on_port_80
def test_a_survey_runs_without_aiohttp(tmp_path: Path) -> None:
    """aiohttp made unimportable in the survey's process: its names come from a hosts file
    and its requests go through polite's own client, so it surveys the site all the same."""
    site = Site("127.0.6.63", {"/robots.txt": Reply(200, b"User-agent: *\nDisallow: /x\n")},
                port=80)
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.6.63 nodeps.resolve.test\n")
    listing = tmp_path / "top.txt"
    listing.write_text("nodeps.resolve.test\n")
    script = ("import runpy, sys; sys.modules['aiohttp'] = None; "
              "runpy.run_module('polite', run_name='__main__')")
    with serve(site):
        result = subprocess.run(
            [sys.executable, "-c", script, "survey", str(listing), "--out",
             str(tmp_path / "s"), "--hosts", str(hosts), "--allow-private", "--delay", "0",
             "--no-sitemaps"],
            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "1 of 1 domains surveyed" in result.stdout
    assert site.requests == ["/robots.txt"]


def test_a_nameserver_without_aiodns_names_the_extra(tmp_path: Path) -> None:
    listing = tmp_path / "top.txt"
    listing.write_text("a.example\n")
    script = ("import runpy, sys; sys.modules['aiodns'] = None; "
              "runpy.run_module('polite', run_name='__main__')")
    result = subprocess.run(
        [sys.executable, "-c", script, "survey", str(listing), "--out", str(tmp_path / "s"),
         "--nameserver", "127.0.0.1:9"], capture_output=True, text=True, timeout=60,
        check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "--nameserver needs aiodns: pip install 'polite-web[survey]'" in result.stderr
