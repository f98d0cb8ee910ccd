"""Pay-per-crawl (Cloudflare's HTTP 402 with ``crawler-price``): ``polite crawl`` records
the price and skips the page, or with ``--max-price`` asks again offering a signed
``crawler-max-price`` and records what it was charged. The loopback site charges only
signed requests whose signature covers the offer, as Cloudflare's documentation says."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from polite.cli import main
from polite.cli.keys import directory_of
from polite.core.identity import SignatureOutcome, directory_keys, parse_price
from polite.identity.signatures import KeyDirectory, verify_signature
from tests.commands import run
from tests.site_servers import serve_asgi

HOST = "127.0.28.1"
PRICES = {"/paid": "USD 0.01", "/expensive": "USD 5.00"}


def _site(directory: KeyDirectory, seen: list[tuple[str, dict[str, str]]]) -> Starlette:
    async def lookup(url: str) -> KeyDirectory:
        return directory

    async def page(request: Request) -> Response:
        path = request.url.path
        headers = {k.lower(): v for k, v in request.headers.items()}
        seen.append((path, headers))
        if path == "/robots.txt":
            return PlainTextResponse("User-agent: *\nAllow: /\n")
        if path == "/":
            return Response('<a href="/free">f</a> <a href="/paid">p</a> '
                            '<a href="/expensive">e</a>', media_type="text/html")
        price = PRICES.get(path)
        if price is None:
            return PlainTextResponse("free page")
        check = await verify_signature(request.method, str(request.url),
                                       list(request.headers.items()), lookup)
        offer = parse_price(headers.get("crawler-max-price"))
        covered = "crawler-max-price" in headers.get("signature-input", "")
        asked = parse_price(price)
        assert asked is not None
        if check.outcome is SignatureOutcome.VERIFIED and covered and offer is not None \
                and offer[1] >= asked[1]:
            return PlainTextResponse("paid page", headers={"crawler-charged": price})
        return PlainTextResponse("payment required", 402, headers={"crawler-price": price})

    return Starlette(routes=[Route("/{p:path}", page)])


@pytest.fixture
def key(tmp_path: Path) -> tuple[str, KeyDirectory]:
    path = tmp_path / "robot.pem"
    assert main(["keys", "new", str(path)]) == 0
    return str(path), KeyDirectory(directory_keys(directory_of([str(path)], "--key")))


def _crawl(url: str, out: Path, *options: str) -> dict[str, dict[str, object]]:
    done = run("crawl", url + "/", "--out", str(out), "--allow-network", HOST,
               "--default-delay-ms", "0", "--json", *options, timeout=120)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]
    return {str(r["url"]).removeprefix(url): r for r in records if "url" in r}


def test_priced_pages_are_skipped_with_their_price(tmp_path: Path,
                                                   key: tuple[str, KeyDirectory]) -> None:
    seen: list[tuple[str, dict[str, str]]] = []
    with serve_asgi(_site(key[1], seen), HOST) as url:
        pages = _crawl(url, tmp_path / "out")
    assert pages["/free"]["outcome"] == "fetched"
    for path, price in PRICES.items():
        assert pages[path]["outcome"] == "skipped"
        assert pages[path]["price"] == price
        assert "payment required" in str(pages[path]["reason"])
    assert [p for p, _ in seen].count("/paid") == 1  # not asked again


def test_with_max_price_it_pays_what_it_may(tmp_path: Path,
                                            key: tuple[str, KeyDirectory]) -> None:
    path, directory = key
    seen: list[tuple[str, dict[str, str]]] = []
    with serve_asgi(_site(directory, seen), HOST) as url:
        pages = _crawl(url, tmp_path / "out", "--sign-with", path, "--signature-agent",
                       "https://bot.example.test/.well-known/http-message-signatures-directory",
                       "--max-price", "0.05")
    paid = pages["/paid"]
    assert paid["outcome"] == "fetched" and paid["status"] == 200
    assert (paid["price"], paid["charged"]) == ("USD 0.01", "USD 0.01")
    expensive = pages["/expensive"]
    assert expensive["outcome"] == "skipped" and expensive["price"] == "USD 5.00"
    assert "over --max-price" in str(expensive["reason"])
    asked = [headers for p, headers in seen if p == "/paid"]
    assert len(asked) == 2
    assert "crawler-max-price" not in asked[0]
    assert parse_price(asked[1]["crawler-max-price"]) == ("USD", Decimal("0.05"))
    assert "crawler-max-price" in asked[1]["signature-input"]
    assert [p for p, _ in seen].count("/expensive") == 1


def test_max_price_needs_a_key(tmp_path: Path) -> None:
    done = run("crawl", f"http://{HOST}/", "--out", str(tmp_path / "out"), "--max-price",
               "0.05", timeout=60)
    assert done.returncode == 2 and "--max-price needs --sign-with" in done.stderr
    done = run("crawl", f"http://{HOST}/", "--out", str(tmp_path / "out"), "--max-price",
               "nan", timeout=60)
    assert done.returncode == 2 and "--max-price" in done.stderr
