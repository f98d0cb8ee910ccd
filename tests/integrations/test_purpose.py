"""The httpx and requests drop-ins with a purpose: each response carries the URL's
robots.txt AI-usage preferences, and with refuse_by_purpose what they disallow is refused
before any request, in this process and through a running ``polite serve``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
import requests

from polite.errors import RequestRefused, SettingError
from polite.integrations import PoliteGate
from polite.integrations.httpx import AsyncPoliteTransport, PoliteTransport
from polite.integrations.requests import PoliteAdapter
from tests.serving import polite_serve
from tests.sites import Reply, Site, serve

# draft-ietf-aipref-attach-05's example file.
ROBOTS = Reply(200, b"User-Agent: *\nAllow: /\nDisallow: /never/\nContent-Usage: train-ai=n\n"
                    b"Content-Usage: /ai-ok/ train-ai=y\n")
PAGE = Reply(200, b"page", {"Content-Type": "text/plain"})
OPTIONS = {"agent": "ExampleCrawler", "allow_private": True, "default_delay_s": 0.0}


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serve(Site("127.0.9.31", {"/robots.txt": ROBOTS, "/test": PAGE,
                                   "/ai-ok/test": PAGE})) as running:
        yield running


def test_responses_carry_the_preferences(site: Site) -> None:
    transport = PoliteTransport(**OPTIONS, purpose="train-ai")
    with httpx.Client(transport=transport) as client:
        test = client.get(site.origin + "/test")
        ok = client.get(site.origin + "/ai-ok/test")
    assert test.status_code == 200  # told, not refused
    usage = test.extensions["polite_usage"]
    assert (usage["purpose"], usage["pref"]) == ("train-ai", "disallow")
    assert "Content-Usage line 4" in usage["reason"]
    assert ok.extensions["polite_usage"]["pref"] == "allow"


def test_refuse_by_purpose_sends_nothing(site: Site) -> None:
    before = site.requests.count("/test")
    transport = AsyncPoliteTransport(**OPTIONS, purpose="train-ai",
                                     refuse_by_purpose=True)

    async def run() -> int:
        async with httpx.AsyncClient(transport=transport) as client:
            with pytest.raises(RequestRefused, match=r"refuse train-ai.*line 4"):
                await client.get(site.origin + "/test")
            return (await client.get(site.origin + "/ai-ok/test")).status_code

    assert asyncio.run(run()) == 200
    assert site.requests.count("/test") == before


def test_through_a_polite_serve(site: Site) -> None:
    with polite_serve("--store", "memory://", "--allow-private", "--default-delay-ms",
                      "0") as api:
        gate = PoliteGate(service_url=str(api.base_url), purpose="train-ai",
                          refuse_by_purpose=True)
        try:
            with httpx.Client(transport=PoliteTransport(gate=gate)) as client:
                with pytest.raises(RequestRefused, match="refuse train-ai"):
                    client.get(site.origin + "/test")
                answer = client.get(site.origin + "/ai-ok/test")
            assert answer.extensions["polite_usage"]["pref"] == "allow"
        finally:
            gate.close()


def test_an_unknown_purpose_is_refused_by_name() -> None:
    with pytest.raises(SettingError, match="purpose="):
        PoliteGate(purpose="sell")


def test_requests_adapter_carries_and_refuses(site: Site) -> None:
    session = requests.Session()
    session.mount("http://", PoliteAdapter(**OPTIONS, purpose="train-ai",
                                           refuse_by_purpose=True))
    with session:
        with pytest.raises(RequestRefused, match="refuse train-ai"):
            session.get(site.origin + "/test")
        answer = session.get(site.origin + "/ai-ok/test")
    assert answer.status_code == 200
    assert answer.polite_usage["pref"] == "allow"
