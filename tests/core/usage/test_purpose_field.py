"""``purpose_field``: the REST answer's fields as one RFC 9651 dictionary, which polite's own
dictionary parser reads back; bounded, and safe whatever a site wrote."""

from __future__ import annotations

from polite.core.robots import parse
from polite.core.robots.usage import combine, from_headers, from_robots, purpose_field
from polite.core.usage.sf import MAX_FIELD_CHARS, InnerList, Item, Token, parse_dictionary

SITE = "https://example.com"


def members(text: str) -> dict[str, tuple[object, dict[str, object]]]:
    out: dict[str, tuple[object, dict[str, object]]] = {}
    for key, member in parse_dictionary(text).items():
        if isinstance(member, Item):
            value = member.value.value if isinstance(member.value, Token) else member.value
            out[key] = (value, dict(member.params))
        else:
            out[key] = ([i.value for i in member.items], {})
    return out


def test_the_answer_and_every_stated_purpose_read_back() -> None:
    robots = parse("License: https://example.com/l.xml\nUser-agent: *\n"
                   "Content-Usage: train-ai=y\nContent-Signal: search=yes, ai-input=no\n")
    prefs = combine(from_robots(robots, SITE + "/", "bot"),
                    from_headers([("Content-Usage", "train-ai=n")], "bot"))
    text = purpose_field(prefs, "search")
    got = members(text)
    assert list(got) == ["search", "train-ai", "ai-input", "license"]
    assert got["search"] == ("allow", {
        "source": "robots.txt Content-Signal line 4: search=yes, ai-input=no",
        "vocabulary": "draft-romm-aipref-contentsignals-00"})
    assert got["train-ai"] == ("disallow", {
        "source": "Content-Usage header: train-ai=n",
        "vocabulary": "draft-ietf-aipref-vocab-07",
        "overruled": "robots.txt Content-Usage line 3: train-ai=y"})
    # The reason names a header once (it said "Content-Usage header header").
    assert prefs.answer("train-ai").reason == (
        "train-ai=disallow by Content-Usage header: train-ai=n (most restrictive wins over "
        "robots.txt Content-Usage line 3)")
    assert got["ai-input"][0] == "disallow"
    assert got["license"] == (["https://example.com/l.xml"], {})
    assert isinstance(parse_dictionary(text)["license"], InnerList)


def test_nothing_stated_is_the_purpose_unknown() -> None:
    prefs = from_robots(parse("User-agent: *\nDisallow: /x\n"), SITE + "/", "bot")
    assert purpose_field(prefs, "train-ai") == "train-ai=unknown"


def test_a_sites_text_cannot_break_the_field_or_grow_it() -> None:
    # Quotes, backslashes, non-ASCII and a long value in what the site wrote.
    value = 'train-ai=n;note="a \\"q\\" \\\\ b", search=y;x=' + "z" * 5000
    prefs = from_headers([("Content-Usage", value)], "bot")
    text = purpose_field(prefs, "train-ai")
    assert len(text) < 1200
    got = members(text)
    source = got["train-ai"][1]["source"]
    assert isinstance(source, str) and source.startswith("Content-Usage header: train-ai=n;")
    assert source.endswith("...")
    licensed = from_headers([("tdm-reservation", "1"), ("tdm-policy", "https://ex.com/é")],
                            "bot")
    assert members(purpose_field(licensed, "train-ai"))["license"][0] == ["https://ex.com/?"]
    many = parse("".join(f"License: https://example.com/{n}\n" for n in range(50)) +
                 "User-agent: *\n" + "Content-Usage: train-ai=n\n" * 200)
    text = purpose_field(from_robots(many, SITE + "/", "bot"), "train-ai")
    assert len(text) < MAX_FIELD_CHARS
    assert len(members(text)["license"][0]) == 4  # type: ignore[arg-type]
