"""The drop-ins refuse numbers that cannot work (NaN, the infinities, negatives) and name
every setting as their user wrote it: ``POLITE_*`` in Scrapy, the keyword argument in the
gates and adapters; never a command-line flag."""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import subprocess
import sys
import textwrap
from typing import Any

import pytest
import requests

from polite.errors import RequestRefused, SettingError
from polite.integrations import LoopGate, PoliteGate
from polite.integrations.httpx import AsyncPoliteTransport, PoliteTransport
from polite.integrations.requests import PoliteAdapter
from tests.sites import Reply, Site, serve

SURFACES = [PoliteGate, LoopGate, PoliteTransport, AsyncPoliteTransport, PoliteAdapter]
BAD = [math.nan, math.inf, -math.inf, -1.0, 1e308]  # 1e308: finite, but past every bound


def _numeric_keywords(surface: type) -> list[str]:
    """The keyword arguments that take a number, read from the signature: a new one is
    tested as soon as it is added."""
    return [name for name, parameter in inspect.signature(surface).parameters.items()
            if isinstance(parameter.default, float)]


def _close(made: object) -> None:
    if isinstance(made, LoopGate):
        asyncio.run(made.close())
    elif isinstance(made, AsyncPoliteTransport):
        asyncio.run(made.aclose())
    else:
        made.close()  # type: ignore[attr-defined]


CASES = [pytest.param(surface, name, value, id=f"{surface.__name__} {name}={value}")
         for surface in SURFACES for name in _numeric_keywords(surface) for value in BAD]


def test_the_surfaces_have_numeric_keywords() -> None:
    assert {name for surface in SURFACES for name in _numeric_keywords(surface)} == {
        "default_delay_s", "max_crawl_delay_s", "adaptive_factor", "max_wait_s"}


@pytest.mark.parametrize(("surface", "name", "value"), CASES)
def test_a_bad_number_is_refused_by_its_keyword(surface: type, name: str,
                                                value: float) -> None:
    try:
        made = surface(**{name: value})
    except SettingError as exc:
        assert str(exc).startswith(f"{name}={value!r}: must be a finite number from 0 to ")
        return
    _close(made)
    pytest.fail(f"{surface.__name__}({name}={value!r}) was taken")


@pytest.mark.parametrize("surface", [PoliteTransport, PoliteAdapter, PoliteGate])
def test_a_bad_store_is_named_by_its_keyword(surface: type) -> None:
    with pytest.raises(SettingError) as refused:
        surface(store="foo://x")
    assert str(refused.value) == ("store='foo://x': expected sqlite:///PATH, "
                                  "redis://HOST:PORT/DB or memory://")


def test_a_private_address_names_the_keyword_that_allows_it() -> None:
    site = Site("127.0.44.2", {"/robots.txt": Reply(404), "/": Reply(body=b"hello")})
    with serve(site), requests.Session() as session:
        adapter = PoliteAdapter(agent="bot")
        session.mount("http://", adapter)
        with pytest.raises(RequestRefused) as refused:
            session.get(f"{site.origin}/")
    assert "private or loopback" in refused.value.reason
    assert "(allow_private=True)" in refused.value.reason
    assert "--allow-private" not in refused.value.reason
    assert site.requests == []


# -- Scrapy: the middleware built by a real Scrapy crawler, its reactor installed ------------

BUILD = textwrap.dedent("""
    import json, sys
    from scrapy.utils.reactor import install_reactor
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy.utils.test import get_crawler
    from polite.integrations.scrapy import PoliteDownloaderMiddleware
    answers = []
    for settings in json.load(sys.stdin):
        try:
            middleware = PoliteDownloaderMiddleware.from_crawler(
                get_crawler(settings_dict=settings))
        except Exception as exc:
            answers.append([type(exc).__name__, str(exc)])
        else:
            import asyncio
            asyncio.get_event_loop().run_until_complete(middleware._gate.close())
            answers.append(None)
    print(json.dumps(answers))
""")


def build_middlewares(settings: list[dict[str, Any]]) -> list[list[str] | None]:
    done = subprocess.run([sys.executable, "-c", BUILD], input=json.dumps(settings),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answers: list[list[str] | None] = json.loads(done.stdout)
    return answers


SCRAPY_NUMBERS = ["POLITE_DEFAULT_DELAY", "POLITE_ADAPTIVE_FACTOR", "POLITE_MAX_WAIT"]


def test_scrapy_settings_are_checked_and_named_as_set() -> None:
    pytest.importorskip("scrapy")
    # As settings.py gives them (numbers) and as -s NAME=VALUE gives them (text).
    bad = [(name, value) for name in SCRAPY_NUMBERS
           for value in [math.nan, math.inf, -1.0, "nan", "inf", "-1", "1e400", "soon"]]
    cases = [{name: value} for name, value in bad]
    cases += [{"POLITE_STORE": "foo://x"}, {"POLITE_SERVICE_URL": "ftp://x"},
              {"POLITE_DEFAULT_DELAY": "0", "POLITE_ADAPTIVE_FACTOR": 0, "POLITE_MAX_WAIT": "30"}]
    answers = build_middlewares(cases)
    for (name, value), answer in zip(bad, answers, strict=False):
        assert answer is not None, f"{name}={value!r} was taken"
        kind, message = answer
        assert kind == "SettingError", answer
        assert message.startswith(f"{name} "), answer
        assert "must be a " in message, answer
    store, service, good = answers[len(bad):]
    assert store == ["SettingError", "POLITE_STORE 'foo://x': expected sqlite:///PATH, "
                     "redis://HOST:PORT/DB or memory://"]
    assert service == ["SettingError", "POLITE_SERVICE_URL 'ftp://x': expected "
                       "http://HOST:PORT"]
    assert good is None


def test_scrapy_purpose_is_checked_and_named_as_set() -> None:
    pytest.importorskip("scrapy")
    bad, good = build_middlewares([{"POLITE_PURPOSE": "sell-it"},
                                   {"POLITE_PURPOSE": "train-ai",
                                    "POLITE_REFUSE_BY_PURPOSE": True}])
    assert bad is not None and bad[0] == "SettingError"
    assert bad[1].startswith("POLITE_PURPOSE 'sell-it': one of search, train-ai")
    assert good is None
