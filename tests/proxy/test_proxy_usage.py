"""The proxy answers a request that has a purpose with the AI-usage preferences that apply
beside the access decision: a ``Polite-Usage`` field (an RFC 9651 dictionary) on the
response it forwards, from the URL's robots.txt group and the response's own Content-Usage,
tdm-reservation and X-Robots-Tag fields, end to end through ``polite serve`` and a loopback
origin."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from polite.core.usage.sf import InnerList, Item, Member, Token, parse_dictionary
from tests.serving import polite_serve, through
from tests.sites import Reply, Site, serve

HOST = "127.0.9.26"
ROBOTS = (f"User-agent: *\nAllow: /\nContent-Usage: train-ai=n\n"
          f"Content-Usage: /ai-ok/ train-ai=y\nContent-Signal: search=yes\n\n"
          f"User-agent: GPTBot\nDisallow: /private/\nContent-Usage: train-ai=y\n\n"
          f"License: http://{HOST}/license.xml\n").encode()
TEXT = {"Content-Type": "text/plain"}
PAGES = {
    "/test": {},
    "/ai-ok/plain": {},
    "/ai-ok/usage-header": {"Content-Usage": "train-ai=n"},
    "/ai-ok/tdm": {"tdm-reservation": "1", "tdm-policy": f"http://{HOST}/policy.json"},
    "/ai-ok/noai": {"X-Robots-Tag": "noai"},
    # A site cannot speak for the proxy: its own Polite-Usage is not what the client reads.
    "/ai-ok/forged": {"Polite-Usage": "train-ai=allow", "Content-Usage": "train-ai=n"},
    "/ai-ok/malformed": {"Content-Usage": "train-ai=n,"},
    # Stored by the proxy's cache.
    "/kept": {"Cache-Control": "max-age=600"},
    "/ai-ok/kept": {"Cache-Control": "max-age=600", "Content-Usage": "search=n"},
}


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    routes: dict[str, Reply] = {"/robots.txt": Reply(200, ROBOTS, TEXT)}
    routes.update((path, Reply(200, b"page", {**TEXT, **fields}))
                  for path, fields in PAGES.items())
    with serve(Site(HOST, dict(routes))) as running:
        yield running


def usage(response: httpx.Response) -> dict[str, Member]:
    assert response.status_code == 200, response.text
    values = response.headers.get_list("polite-usage")
    assert len(values) == 1, values
    return parse_dictionary(values[0])  # the field is a dictionary polite itself reads


def pref(member: Member) -> tuple[str, dict[str, object]]:
    assert isinstance(member, Item) and isinstance(member.value, Token)
    return member.value.value, dict(member.params)


# Each server runs without the adaptive delay: the tests ask one page after another with the
# delay set to 0, and on a loaded machine an answer's own time alone made the next one wait
# (a 429 for a 9 ms adaptive delay).
def test_forwarded_responses_carry_the_preferences(site: Site) -> None:
    with polite_serve("--store", "memory://", "--allow-private", "--default-delay-ms", "0",
                      "--adaptive-factor", "0",
                      "--no-cache") as api, through(api) as client:
        def get(path: str, purpose: str | None = "train-ai", **headers: str
                ) -> httpx.Response:
            if purpose is not None:
                headers["X-Polite-Purpose"] = purpose
            return client.get(f"{site.origin}{path}", headers=headers)

        # No purpose: the response as the origin sent it.
        plain = get("/ai-ok/forged", None)
        assert plain.headers.get_list("polite-usage") == ["train-ai=allow"]
        assert "polite-usage" not in get("/test", None).headers

        # robots.txt: the "*" group's line 3 for /test, with Content-Signal's search and the
        # global License link beside it.
        found = usage(get("/test"))
        assert list(found)[:3] == ["train-ai", "search", "license"]
        value, params = pref(found["train-ai"])
        assert value == "disallow"
        assert params["source"] == "robots.txt Content-Usage line 3: train-ai=n"
        assert params["vocabulary"] == "draft-ietf-aipref-vocab-07"
        assert pref(found["search"])[0] == "allow"
        links = found["license"]
        assert isinstance(links, InnerList)
        assert [i.value for i in links.items] == [f"http://{HOST}/license.xml"]

        value, params = pref(usage(get("/ai-ok/plain"))["train-ai"])
        assert (value, params["source"]) == ("allow", "robots.txt Content-Usage line 4: "
                                                      "/ai-ok/ train-ai=y")
        assert "overruled" not in params

        # The response's own fields: each one refuses, and wins over robots.txt's allow,
        # which the answer shows as overruled.
        for path, source in (("/ai-ok/usage-header", "Content-Usage header: train-ai=n"),
                             ("/ai-ok/tdm", "tdm-reservation header: 1"),
                             ("/ai-ok/noai", "X-Robots-Tag header: noai"),
                             ("/ai-ok/forged", "Content-Usage header: train-ai=n")):
            found = usage(get(path))
            value, params = pref(found["train-ai"])
            assert (value, params["source"]) == ("disallow", source), path
            assert params["overruled"] == ("robots.txt Content-Usage line 4: "
                                           "/ai-ok/ train-ai=y"), path
        tdm = usage(get("/ai-ok/tdm"))["license"]
        assert isinstance(tdm, InnerList)
        assert f"http://{HOST}/policy.json" in [i.value for i in tdm.items]
        # A malformed field is read as absent (robots.txt decides), not a failure.
        assert pref(usage(get("/ai-ok/malformed"))["train-ai"])[0] == "allow"

        # The asked purpose comes first; one nothing speaks of is unknown, with no source.
        found = usage(get("/test", "ai-input"))
        assert list(found)[:2] == ["ai-input", "search"]
        assert pref(found["ai-input"]) == ("unknown", {})
        assert pref(usage(get("/test", "search"))["search"])[0] == "allow"

        # The request's own User-Agent picks the group, as for the access decision.
        value, params = pref(usage(get("/test", **{"User-Agent": "GPTBot/1.1"}))["train-ai"])
        assert (value, params["source"]) == ("allow",
                                             "robots.txt Content-Usage line 9: train-ai=y")


def test_the_default_purpose_and_an_empty_header(site: Site) -> None:
    with polite_serve("--store", "memory://", "--allow-private", "--default-delay-ms", "0",
                      "--adaptive-factor", "0",
                      "--no-cache", "--purpose", "train-ai") as api, through(api) as client:
        found = usage(client.get(f"{site.origin}/test"))
        assert pref(found["train-ai"])[0] == "disallow"
        # X-Polite-Purpose says what this request is for, here nothing in particular.
        bare = client.get(f"{site.origin}/test", headers={"X-Polite-Purpose": ""})
        assert bare.status_code == 200 and "polite-usage" not in bare.headers


def test_a_page_from_the_cache_is_refused_and_answered_as_a_fetched_one(site: Site) -> None:
    with polite_serve("--store", "memory://", "--allow-private", "--default-delay-ms", "0",
                      "--adaptive-factor", "0",
                      "--refuse-by-purpose") as api, through(api) as client:
        for path in ("/kept", "/ai-ok/kept"):  # stored for a request with no purpose
            assert client.get(f"{site.origin}{path}").status_code == 200
        asked = len(site.requests)
        # robots.txt refuses train-ai on /kept: the stored copy is not served either.
        refused = client.get(f"{site.origin}/kept", headers={"X-Polite-Purpose": "train-ai"})
        assert refused.status_code == 403 and "refuse train-ai" in refused.text
        bad = client.get(f"{site.origin}/kept", headers={"X-Polite-Purpose": "sell"})
        assert bad.status_code == 400 and "X-Polite-Purpose" in bad.text
        # Served from the cache with the preferences, its own Content-Usage among them.
        kept = client.get(f"{site.origin}/ai-ok/kept", headers={"X-Polite-Purpose": "search"})
        assert "age" in kept.headers
        found = usage(kept)
        assert pref(found["search"]) == ("disallow", {
            "source": "Content-Usage header: search=n",
            "vocabulary": "draft-ietf-aipref-vocab-07",
            "overruled": "robots.txt Content-Signal line 5: search=yes"})
        assert pref(found["train-ai"])[0] == "allow"
        # The stored copy keeps no answer for the next request's purpose.
        assert "polite-usage" not in client.get(f"{site.origin}/ai-ok/kept").headers
        assert len(site.requests) == asked  # all of it from the cache
