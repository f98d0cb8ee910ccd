"""RFC 9111 decisions, case by case; section numbers are RFC 9111's."""

from __future__ import annotations

import pytest

from polite.core.cache import codec
from polite.core.cache.policy import (
    Stored,
    age_of,
    cache_control,
    choose,
    freshness_lifetime,
    http_date,
    invalidates,
    not_modified,
    storable,
    storable_headers,
    updated,
    vary_key,
)

NOW = 1_700_000_000.0
DATE = b"Tue, 14 Nov 2023 22:13:20 GMT"  # NOW as an HTTP-date


def H(**fields: str) -> list[tuple[bytes, bytes]]:
    return [(k.replace("_", "-").lower().encode(), v.encode()) for k, v in fields.items()]


def stored(headers: list[tuple[bytes, bytes]], *, at: float = NOW, status: int = 200,
           vary: tuple[tuple[bytes, bytes | None], ...] = ()) -> Stored:
    return Stored("http://e.com/", status, b"OK", tuple(storable_headers(headers)), b"body",
                  at, at, vary)


def test_http_dates_are_the_three_forms_only() -> None:
    assert http_date(DATE) == NOW
    assert http_date(b"Tuesday, 14-Nov-23 22:13:20 GMT") == NOW
    assert http_date(b"Tue Nov 14 22:13:20 2023") == NOW
    for bad in (b"0", b"Tue, 14 Nov 2023 22:13:20 UTC", b"Tue, 14 Nov 23 22:13:20 GMT",
                b"Tue 14 Nov 2023 22:13:20 GMT", b"Tue, 14-Nov-2023 22:13:20 GMT",
                b"Tue, 14 Nov 2023 2:13:20 GMT", b"Tue, 31 Feb 2023 22:13:20 GMT"):
        assert http_date(bad) is None, bad


def test_cache_control_parsing() -> None:
    control = cache_control(H(cache_control='max-age="60", No-Cache, private="a, b"'))
    assert control.seconds("max-age") == 60 and "no-cache" in control
    assert control.directives["private"] == "a, b"
    assert cache_control(H(cache_control="max-age=1, max-age=99")).seconds("max-age") == 1
    assert cache_control(H(cache_control="max-age=-1")).seconds("max-age") is None
    assert cache_control(H(cache_control="max-age=99999999999")).seconds("max-age") \
        == 2_147_483_648
    assert "no-cache" in cache_control(H(pragma="no-cache"), pragma=True)
    assert "no-cache" not in cache_control(H(pragma="no-cache", cache_control="max-age=1"),
                                           pragma=True)


@pytest.mark.parametrize("method, request_h, status, response_h, expected", [
    (b"GET", {}, 200, {"cache_control": "max-age=60"}, True),
    (b"GET", {}, 200, {}, False),  # nothing says how long: not stored
    (b"GET", {}, 200, {"last_modified": "Tue, 14 Nov 2023 20:00:00 GMT"}, True),  # heuristic
    (b"GET", {}, 302, {"last_modified": "Tue, 14 Nov 2023 20:00:00 GMT"}, False),
    (b"POST", {}, 200, {"cache_control": "max-age=60"}, False),
    (b"GET", {}, 206, {"cache_control": "max-age=60"}, False),
    (b"GET", {}, 200, {"cache_control": "max-age=60, no-store"}, False),
    (b"GET", {"cache_control": "no-store"}, 200, {"cache_control": "max-age=60"}, False),
    (b"GET", {}, 200, {"cache_control": "max-age=60, private"}, False),
    (b"GET", {"authorization": "x"}, 200, {"cache_control": "max-age=60"}, False),
    (b"GET", {"authorization": "x"}, 200, {"cache_control": "max-age=60, public"}, True),
    (b"GET", {}, 200, {"cache_control": "max-age=60", "set_cookie": "a=1"}, False),
    (b"GET", {}, 200, {"cache_control": "max-age=60", "vary": "*"}, False),
    (b"GET", {}, 200, {"expires": "Tue, 14 Nov 2023 23:00:00 GMT"}, True),
    (b"GET", {}, 200, {"cache_control": "no-cache"}, True),  # stored, revalidated each time
])
def test_storable(method: bytes, request_h: dict[str, str], status: int,
                  response_h: dict[str, str], expected: bool) -> None:
    assert storable(method, H(**request_h), status, H(**response_h)) is expected


def test_no_store_is_kept_only_by_the_explicit_option() -> None:
    assert not storable(b"GET", [], 200, H(cache_control="no-store"))
    assert storable(b"GET", [], 200, H(cache_control="no-store"), keep_no_store_s=86400)


@pytest.mark.parametrize("headers, lifetime", [
    ({"cache_control": "max-age=60, s-maxage=120"}, 120.0),  # a shared cache reads s-maxage
    ({"cache_control": "max-age=60", "expires": "Tue, 14 Nov 2023 23:13:20 GMT"}, 60.0),
    ({"expires": "Tue, 14 Nov 2023 23:13:20 GMT", "date": DATE.decode()}, 3600.0),
    ({"expires": "0", "date": DATE.decode()}, 0.0),
    ({"last_modified": "Tue, 14 Nov 2023 12:13:20 GMT", "date": DATE.decode()}, 3600.0),
    ({"cache_control": "max-age=abc"}, 0.0),
])
def test_freshness_lifetime(headers: dict[str, str], lifetime: float) -> None:
    assert freshness_lifetime(stored(H(**headers))) == lifetime


def test_a_stored_response_reads_its_fields_once_and_keeps_them_through_a_304() -> None:
    """What serving a stored response needs is read when it is made, decoded or freshened,
    and is what the functions that read the fields give."""
    first = stored(H(cache_control='max-age=60, community="a, b"', age="5", date=DATE.decode()),
                   at=NOW + 2)
    assert first.control.seconds("max-age") == 60
    assert first.control.directives["community"] == "a, b"
    assert first.lifetime == freshness_lifetime(first) == 60.0
    assert first.initial_age == 5.0  # the origin's Age beats the 2 s the Date tells
    assert age_of(first, NOW + 12) == 15.0
    (decoded,) = codec.decode(codec.encode([first]))
    assert (decoded.control, decoded.lifetime, decoded.initial_age) == (
        first.control, 60.0, 5.0)
    fresh = updated(first, H(cache_control="max-age=600", date=DATE.decode()), NOW + 100,
                    NOW + 100)
    assert (fresh.lifetime, fresh.initial_age) == (600.0, 100.0)
    assert fresh == updated(first, H(cache_control="max-age=600", date=DATE.decode()),
                            NOW + 100, NOW + 100)


def test_age_counts_the_origins_age_and_the_time_resident() -> None:
    entry = stored(H(date=DATE.decode(), age="30", cache_control="max-age=100"))
    assert age_of(entry, NOW + 10) == 40.0
    old_date = stored(H(date="Tue, 14 Nov 2023 22:12:20 GMT"))  # 60 s before it arrived
    assert age_of(old_date, NOW) == 60.0


def test_fresh_is_served_stale_is_revalidated_with_its_validators() -> None:
    fresh = stored(H(cache_control="max-age=100", etag='"v1"', date=DATE.decode()))
    assert choose(b"GET", [], [fresh], NOW + 50).action == "serve"
    assert choose(b"HEAD", [], [fresh], NOW + 50).action == "serve"
    stale = choose(b"GET", [], [fresh], NOW + 150)
    assert stale.action == "revalidate" and stale.conditional == ((b"if-none-match", b'"v1"'),)
    no_validator = stored(H(cache_control="max-age=100"))
    assert choose(b"GET", [], [no_validator], NOW + 150).action == "fetch"
    assert choose(b"POST", [], [fresh], NOW).action == "fetch"


@pytest.mark.parametrize("request_h, response_cc, at, action", [
    ({"cache_control": "max-age=10"}, "max-age=100", 50, "revalidate"),
    ({"cache_control": "min-fresh=60"}, "max-age=100", 50, "revalidate"),
    ({"cache_control": "min-fresh=40"}, "max-age=100", 50, "serve"),
    ({"cache_control": "max-stale"}, "max-age=100", 500, "serve"),
    ({"cache_control": "max-stale=60"}, "max-age=100", 150, "serve"),
    ({"cache_control": "max-stale=10"}, "max-age=100", 150, "revalidate"),
    ({"cache_control": "max-stale"}, "max-age=100, must-revalidate", 500, "revalidate"),
    ({"cache_control": "no-cache"}, "max-age=100", 1, "revalidate"),
    ({"pragma": "no-cache"}, "max-age=100", 1, "revalidate"),
    ({}, "max-age=100, no-cache", 1, "revalidate"),
    ({"cache_control": "only-if-cached"}, "max-age=100", 500, "gateway_timeout"),
    ({"cache_control": "only-if-cached"}, "max-age=100", 1, "serve"),
])
def test_request_cache_control(request_h: dict[str, str], response_cc: str, at: float,
                               action: str) -> None:
    entry = stored(H(cache_control=response_cc, etag='"v1"', date=DATE.decode()))
    assert choose(b"GET", H(**request_h), [entry], NOW + at).action == action


def test_only_if_cached_with_nothing_stored_is_a_504() -> None:
    assert choose(b"GET", H(cache_control="only-if-cached"), [], NOW).action == \
        "gateway_timeout"


def test_vary_selects_the_variant() -> None:
    response = H(cache_control="max-age=100", vary="Accept-Language")
    german = stored(response, vary=vary_key(response, H(accept_language="de")))
    assert choose(b"GET", H(accept_language="de"), [german], NOW).action == "serve"
    assert choose(b"GET", H(accept_language="fr"), [german], NOW).action == "fetch"
    assert choose(b"GET", [], [german], NOW).action == "fetch"


def test_a_clients_own_conditional_is_answered_304() -> None:
    entry = stored(H(cache_control="max-age=100", etag='W/"v1"',
                     last_modified="Tue, 14 Nov 2023 20:00:00 GMT"))
    assert not_modified(H(if_none_match='"v0", "v1"'), entry)
    assert not not_modified(H(if_none_match='"v2"'), entry)
    assert not_modified(H(if_modified_since="Tue, 14 Nov 2023 21:00:00 GMT"), entry)
    assert not not_modified(H(if_modified_since="Tue, 14 Nov 2023 19:00:00 GMT"), entry)


def test_the_choice_answers_a_conditional_and_takes_the_newest_variant() -> None:
    # A request with none of the fields the choice reads (only others) is served the stored
    # response as it is; one with a matching validator is answered 304, by either field.
    entry = stored(H(cache_control="max-age=100", etag='"v1"',
                     last_modified="Tue, 14 Nov 2023 20:00:00 GMT"))
    plain = choose(b"GET", H(accept="*/*", user_agent="bot"), [entry], NOW + 1)
    assert plain.action == "serve" and not plain.not_modified
    for conditional in (H(if_none_match='"v1"'),
                        H(if_modified_since="Tue, 14 Nov 2023 21:00:00 GMT")):
        answer = choose(b"GET", [*H(accept="*/*"), *conditional], [entry], NOW + 1)
        assert answer.action == "serve" and answer.not_modified
    older = stored(H(cache_control="max-age=100", etag='"v0"'), at=NOW - 10)
    for variants in ([older, entry], [entry, older]):
        assert choose(b"GET", [], variants, NOW + 1).stored is entry


def test_a_304_updates_the_stored_fields() -> None:
    entry = stored(H(cache_control="max-age=1", etag='"v1"', x_kept="yes", age="50"),
                   at=NOW - 100)
    assert age_of(updated(entry, H(cache_control="max-age=500"), NOW, NOW), NOW) == 0.0
    fresh = updated(entry, H(cache_control="max-age=500", etag='"v2"', content_length="0"),
                    NOW, NOW)
    fields = dict(fresh.headers)
    assert fields[b"cache-control"] == b"max-age=500" and fields[b"x-kept"] == b"yes"
    assert fields[b"etag"] == b'"v1"' and fresh.body == b"body"
    assert fresh.response_time == NOW


def test_hop_by_hop_and_connection_named_fields_are_not_stored() -> None:
    kept = dict(storable_headers(H(connection="x-secret", x_secret="1", keep_alive="5",
                                   x_fine="2")))
    assert kept == {b"x-fine": b"2"}


def test_unsafe_methods_invalidate() -> None:
    assert invalidates(b"POST", 200) and invalidates(b"DELETE", 303)
    assert not invalidates(b"POST", 500) and not invalidates(b"GET", 200)


def test_codec_round_trip_and_garbage() -> None:
    response = H(cache_control="max-age=1", vary="accept")
    entries = [stored(response, vary=vary_key(response, H(accept="a"))),
               stored(H(etag='"\xe9"'), status=404)]
    assert codec.decode(codec.encode(entries)) == entries
    assert codec.decode(b"") == [] and codec.decode(b"PC1\n\x00\x00\x00\x05xx") == []
    assert codec.decode(codec.encode(entries)[:-2]) == []
