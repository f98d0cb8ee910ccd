"""``polite serve`` with a purpose: the REST answer carries the robots.txt AI-usage
preferences beside the access decision, and the proxy told to refuse by purpose answers 403
with the reason (X-Polite-Purpose per request, --purpose by default)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.serving import polite_serve, through
from tests.sites import Reply, Site, serve

# draft-ietf-aipref-attach-05's example file.
ROBOTS = Reply(200, b"User-Agent: *\nAllow: /\nDisallow: /never/\nContent-Usage: train-ai=n\n"
                    b"Content-Usage: /ai-ok/ train-ai=y\n")
PAGE = Reply(200, b"page", {"Content-Type": "text/plain"})
# Each request through the proxy goes at once: no delay, nor the adaptive one, which a busy
# machine's slow answers would set (a request 429 where these tests ask for the page).
NO_SPACING = ("--default-delay-ms", "0", "--adaptive-factor", "0")


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    routes: dict[str, Reply] = {"/robots.txt": ROBOTS, "/test": PAGE, "/ai-ok/test": PAGE,
                                "/never/test": PAGE}
    with serve(Site("127.0.9.21", dict(routes))) as running:
        yield running


def test_rest_answers_preferences_beside_access(site: Site) -> None:
    with polite_serve("--store", "memory://", "--allow-private") as api:
        urls = [f"{site.origin}{p}" for p in ("/test", "/never/test", "/ai-ok/test")]
        answer = api.post("/politeness/verbose", json=urls, params={"purpose": "train-ai"})
        assert answer.status_code == 200, answer.text
        test, never, ok = answer.json()
        assert (test["allowed"], test["usage"]["pref"]) == (True, "disallow")
        assert "Content-Usage line 4" in test["usage"]["reason"]
        assert test["usage"]["sources"][0]["vocabulary"] == "draft-ietf-aipref-vocab-07"
        assert (never["allowed"], never["usage"]["pref"]) == (False, "unknown")
        # the group states train-ai=n: not "no preference stated", but why none applies
        assert never["usage"]["reason"] == (
            "train-ai: none applies: robots.txt disallows this URL for politetest, and its usage "
            "preferences attach only to the URLs it allows (draft-ietf-aipref-attach, 3.1)")
        assert ok["usage"]["pref"] == "allow"
        plain = api.post("/politeness/verbose", json=urls[:1]).json()[0]
        assert "usage" not in plain
        bad = api.post("/politeness/verbose", json=urls[:1], params={"purpose": "sell"})
        assert bad.status_code == 400 and "purpose" in bad.text


def test_proxy_refuses_what_the_purpose_is_not_allowed(site: Site) -> None:
    with polite_serve("--store", "memory://", "--allow-private", *NO_SPACING,
                      "--refuse-by-purpose") as api, through(api) as client:
        before = site.requests.count("/test")
        refused = client.get(f"{site.origin}/test", headers={"X-Polite-Purpose": "train-ai"})
        assert refused.status_code == 403
        assert "refuse train-ai" in refused.text and "Content-Usage line 4" in refused.text
        assert site.requests.count("/test") == before  # never reached the origin
        assert client.get(f"{site.origin}/ai-ok/test",
                          headers={"X-Polite-Purpose": "train-ai"}).status_code == 200
        # No purpose, or one the file says nothing of: the page goes through.
        assert client.get(f"{site.origin}/test").status_code == 200
        assert client.get(f"{site.origin}/test",
                          headers={"X-Polite-Purpose": "search"}).status_code == 200
        bad = client.get(f"{site.origin}/test", headers={"X-Polite-Purpose": "sell"})
        assert bad.status_code == 400 and "X-Polite-Purpose" in bad.text


def test_proxy_default_purpose_from_the_command_line(site: Site) -> None:
    with polite_serve("--store", "memory://", "--allow-private", *NO_SPACING,
                      "--purpose", "train-ai", "--refuse-by-purpose") as api, \
            through(api) as client:
        assert client.get(f"{site.origin}/test").status_code == 403
        assert api.get("/env").json()["purpose"] == "train-ai"
    plain: httpx.Response
    with polite_serve("--store", "memory://", "--allow-private", *NO_SPACING,
                      "--purpose", "train-ai") as api, through(api) as client:
        plain = client.get(f"{site.origin}/test")  # a purpose alone refuses nothing
    assert plain.status_code == 200
