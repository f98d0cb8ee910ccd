"""HTTP caching as a shared cache does it (RFC 9111), decided purely.

The proxy asks three questions and carries out the answers: may this response be stored
(:func:`storable`), what to do with a request given what is stored (:func:`choose`: serve it,
revalidate it, or go to the origin; ``only-if-cached`` answered 504), and how a 304 updates
what is stored (:func:`updated`). Time enters as ``now``, seconds since the epoch (HTTP dates
are wall-clock dates). Section numbers are RFC 9111's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from operator import itemgetter

__all__ = [
    "HEURISTIC_FRACTION",
    "MAX_DELTA_SECONDS",
    "CacheControl",
    "Choice",
    "Stored",
    "age_of",
    "cache_control",
    "choose",
    "conditional_headers",
    "freshness_lifetime",
    "header",
    "http_date",
    "invalidates",
    "not_modified",
    "storable",
    "storable_headers",
    "updated",
    "vary_key",
]

Headers = Sequence[tuple[bytes, bytes]]

# 1.2.2: a delta-seconds too large to hold is read as 2^31.
MAX_DELTA_SECONDS = 2_147_483_648
# 4.2.2: a typical heuristic is 10% of the time since Last-Modified.
HEURISTIC_FRACTION = 0.1
# 4.2.2: status codes that are heuristically cacheable (RFC 9110, 15.1).
_HEURISTIC_STATUSES = frozenset({200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501})
# Statuses this cache stores when the response says how long it stays fresh.
_UNDERSTOOD = frozenset({200, 203, 204, 300, 301, 302, 303, 307, 308, 400, 403, 404, 405, 410,
                         414, 451, 500, 501, 502, 503, 504})
_SAFE_METHODS = frozenset({b"GET", b"HEAD", b"OPTIONS", b"TRACE"})
# 3.1 / 4.3.4: fields not stored, and fields a 304 does not update.
_NOT_STORED = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                         b"transfer-encoding", b"upgrade", b"proxy-authenticate",
                         b"proxy-authentication-info", b"age"})
# The origin's Age, kept under a name of ours: the Age sent to clients is the cache's own.
_ORIGIN_AGE = b"x-polite-origin-age"
_NOT_UPDATED = frozenset({b"content-length", b"content-encoding", b"content-range",
                          b"content-type", b"transfer-encoding", b"etag"}) | _NOT_STORED


def header(headers: Headers, name: bytes) -> bytes | None:
    """The field's lines joined with commas (RFC 9110, 5.3), or None."""
    values = [value for key, value in headers if key == name]
    if not values:
        return None
    return b", ".join(values)


_MONTHS = {name: number for number, name in enumerate(
    (b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
     b"Dec"), 1)}
_DAY = rb"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_LONG_DAY = rb"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_MONTH = rb"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_TIME = rb"([0-9]{2}):([0-9]{2}):([0-9]{2})"
# RFC 9110, 5.6.7: IMF-fixdate, and the two obsolete forms a recipient must read.
_IMF_FIXDATE = re.compile(_DAY + rb", ([0-9]{2}) " + _MONTH + rb" ([0-9]{4}) " + _TIME
                          + rb" GMT")
_RFC850 = re.compile(_LONG_DAY + rb", ([0-9]{2})-" + _MONTH + rb"-([0-9]{2}) " + _TIME
                     + rb" GMT")
_ASCTIME = re.compile(_DAY + rb" " + _MONTH + rb" ([0-9 ][0-9]) " + _TIME + rb" ([0-9]{4})")


def http_date(value: bytes | None) -> float | None:
    """An HTTP-date (RFC 9110, 5.6.7) as epoch seconds; None when it is not one. Only the
    three forms HTTP defines are read (no other zone than GMT, no two-digit years outside
    the RFC 850 form), so a malformed Expires counts as already expired."""
    if not value:
        return None
    text = value.strip()
    if m := _IMF_FIXDATE.fullmatch(text):
        day, month, year, hour, minute, second = m.groups()
    elif m := _RFC850.fullmatch(text):
        day, month, short_year, hour, minute, second = m.groups()
        # RFC 9110: a two-digit year more than 50 years in the future is in the past.
        year = str(2000 + int(short_year)).encode()
    elif m := _ASCTIME.fullmatch(text):
        month, day, hour, minute, second, year = m.groups()
    else:
        return None
    try:
        when = datetime(int(year), _MONTHS[month], int(day), int(hour), int(minute),
                        int(second), tzinfo=UTC)
    except ValueError:
        return None
    return when.timestamp()


def _split_list(value: bytes) -> list[bytes]:
    """Comma-separated members, commas inside quoted strings kept."""
    if b'"' not in value:  # the usual field: no quoted string, so every comma splits
        return [member for member in (part.strip() for part in value.split(b",")) if member]
    out: list[bytes] = []
    current = bytearray()
    quoted = escaped = False
    for byte in value:
        char = bytes((byte,))
        if escaped:
            escaped = False
        elif quoted and char == b"\\":
            escaped = True
        elif char == b'"':
            quoted = not quoted
        elif char == b"," and not quoted:
            out.append(bytes(current).strip())
            current = bytearray()
            continue
        current += char
    out.append(bytes(current).strip())
    return [member for member in out if member]


@dataclass(frozen=True, slots=True)
class CacheControl:
    """Cache-Control directives: name (lower case) -> argument (None when there is none).
    The first occurrence of a directive counts (4.2.1)."""

    directives: dict[str, str | None]

    def __contains__(self, name: str) -> bool:
        return name in self.directives

    def seconds(self, name: str) -> int | None:
        """A delta-seconds argument (1.2.2); None when absent or not a number."""
        value = self.directives.get(name)
        if value is None or not value.isdigit() or not value.isascii():
            return None
        return min(int(value), MAX_DELTA_SECONDS)


def cache_control(headers: Headers, *, pragma: bool = False) -> CacheControl:
    """The Cache-Control of a message; for a request, ``pragma`` reads ``Pragma: no-cache``
    as ``no-cache`` when there is no Cache-Control (5.4)."""
    directives: dict[str, str | None] = {}
    raw = header(headers, b"cache-control")
    for member in _split_list(raw or b""):
        name, _, argument = member.partition(b"=")
        key = name.strip().lower().decode("latin-1")
        if not key or key in directives:
            continue
        text = argument.strip().decode("latin-1") if _ else None
        if text is not None and len(text) >= 2 and text[0] == text[-1] == '"':
            text = text[1:-1]
        directives[key] = text
    if pragma and raw is None:
        value = header(headers, b"pragma") or b""
        if b"no-cache" in value.lower():
            directives["no-cache"] = None
    return CacheControl(directives)


@dataclass(frozen=True, slots=True)
class Stored:
    """A stored response: what came from the origin and when (4.2.3)."""

    url: str
    status: int
    reason: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    request_time: float  # when the request that fetched it was sent
    response_time: float  # when its response arrived
    vary: tuple[tuple[bytes, bytes | None], ...] = ()  # the request's values of Vary's fields
    stored_for_s: float | None = None  # a no-store response kept by the operator's option
    # Read from the fields once, as the response is made (stored, freshened or decoded), so
    # that serving it parses nothing: its Cache-Control, its freshness lifetime and its age
    # when it arrived (4.2.3's corrected_initial_age).
    control: CacheControl = field(init=False, repr=False, compare=False)
    lifetime: float = field(init=False, repr=False, compare=False)
    initial_age: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        control = cache_control(self.headers)
        object.__setattr__(self, "control", control)
        object.__setattr__(self, "lifetime", freshness_lifetime(self, control))
        object.__setattr__(self, "initial_age", _initial_age(self))


def storable(method: bytes, request_headers: Headers, status: int, response_headers: Headers,
             *, keep_no_store_s: float = 0.0) -> bool:
    """Whether a shared cache may store this response (3, 3.5)."""
    if method != b"GET" or status not in _UNDERSTOOD:
        return False
    if keep_no_store_s <= 0 and _FRESHNESS_FIELDS.isdisjoint(map(_NAME, response_headers)):
        return False  # nothing says how long it stays fresh, nor lets a heuristic guess
    request = cache_control(request_headers)
    response = cache_control(response_headers)
    if ("no-store" in request or "no-store" in response) and keep_no_store_s <= 0:
        return False
    if "private" in response:
        return False
    vary = header(response_headers, b"vary")
    if vary is not None and b"*" in {v.strip() for v in vary.split(b",")}:
        return False
    if header(request_headers, b"authorization") is not None and not (
            "public" in response or "s-maxage" in response or "must-revalidate" in response):
        return False
    if header(response_headers, b"set-cookie") is not None and "public" not in response:
        return False  # one client's cookie must not reach another through the cache
    return ("public" in response or "max-age" in response or "s-maxage" in response
            or header(response_headers, b"expires") is not None
            or "no-cache" in response
            or (status in _HEURISTIC_STATUSES
                and header(response_headers, b"last-modified") is not None)
            or keep_no_store_s > 0)


def freshness_lifetime(stored: Stored, control: CacheControl | None = None) -> float:
    """How long the response stays fresh, in seconds (4.2.1, 4.2.2); ``control`` is its
    Cache-Control, for a caller that has read it already."""
    if stored.stored_for_s is not None:
        return stored.stored_for_s
    if control is None:
        control = cache_control(stored.headers)
    for name in ("s-maxage", "max-age"):
        if name in control:
            seconds = control.seconds(name)
            return float(seconds) if seconds is not None else 0.0  # invalid: stale
    expires_raw = header(stored.headers, b"expires")
    if expires_raw is not None:
        expires = http_date(expires_raw)
        if expires is None:
            return 0.0  # an invalid Expires (such as "0") means already expired
        date = http_date(header(stored.headers, b"date")) or stored.response_time
        return max(0.0, expires - date)
    last_modified = http_date(header(stored.headers, b"last-modified"))
    if last_modified is not None and stored.status in _HEURISTIC_STATUSES:
        date = http_date(header(stored.headers, b"date")) or stored.response_time
        return max(0.0, (date - last_modified) * HEURISTIC_FRACTION)
    return 0.0


def age_of(stored: Stored, now: float) -> float:
    """The response's current age (4.2.3)."""
    resident_s = now - stored.response_time
    # not max(): a builtin's call of its own, about 700 instructions of a cache hit
    return stored.initial_age + (resident_s if resident_s > 0.0 else 0.0)


def _initial_age(stored: Stored) -> float:
    """The response's age when it arrived: corrected_initial_age (4.2.3)."""
    date = http_date(header(stored.headers, b"date"))
    apparent = max(0.0, stored.response_time - date) if date is not None else 0.0
    age_value = 0.0
    raw_age = header(stored.headers, _ORIGIN_AGE)
    if raw_age is not None and raw_age.strip().isdigit():
        age_value = float(min(int(raw_age.strip()), MAX_DELTA_SECONDS))
    response_delay = stored.response_time - stored.request_time
    return max(apparent, age_value + response_delay)


def vary_key(response_headers: Headers, request_headers: Headers
             ) -> tuple[tuple[bytes, bytes | None], ...]:
    """The request's values of the fields the response varies on (4.1), normalised."""
    vary = header(response_headers, b"vary")
    if vary is None:
        return ()
    names = sorted({name.strip().lower() for name in vary.split(b",") if name.strip()})
    return tuple((name, _normal(header(request_headers, name))) for name in names)


def _normal(value: bytes | None) -> bytes | None:
    if value is None:
        return None
    return b",".join(part.strip() for part in value.split(b","))


def _matches(stored: Stored, request_headers: Headers) -> bool:
    return all(_normal(header(request_headers, name)) == value for name, value in stored.vary)


# Not frozen: one is made per lookup, and a frozen dataclass's __init__ sets each field
# through object.__setattr__ (about 4,500 instructions of a cache hit's 170,000).
@dataclass(slots=True)
class Choice:
    """What to do with a request. ``action`` is one of:

    * ``serve``: answer with ``stored`` (``age`` seconds old; ``not_modified`` when the
      client's own conditional matches it);
    * ``revalidate``: ask the origin with ``conditional`` headers added; a 304 keeps
      ``stored``;
    * ``fetch``: go to the origin as if nothing were stored;
    * ``gateway_timeout``: ``only-if-cached`` and nothing usable is stored (5.2.1.7).
    """

    action: str
    stored: Stored | None = None
    age: float = 0.0
    conditional: tuple[tuple[bytes, bytes], ...] = ()
    not_modified: bool = False


_FETCH = Choice("fetch")
# Fields without which a response is not stored (3: an explicit lifetime, a validator for
# a heuristic one, or a directive that allows storing): storable()'s last condition read
# as field names, so a new way to be storable goes into both.
_FRESHNESS_FIELDS = frozenset({b"cache-control", b"expires", b"last-modified"})
_NAME = itemgetter(0)  # a field's name, read without a Python step per field


# The request's fields choose() reads besides Vary's: a request with none of them (the
# usual one) asks for nothing but a fresh response, and nothing of it is parsed.
_CHOICE_FIELDS = frozenset({b"cache-control", b"pragma", b"if-none-match",
                            b"if-modified-since"})
_NO_DIRECTIVES = CacheControl({})


def choose(method: bytes, request_headers: Headers, variants: Iterable[Stored],
           now: float) -> Choice:
    """Serve, revalidate or fetch (4, 4.2, 4.3, 5.2.1)."""
    # Loops, not a comprehension's function and frame nor a map over the fields: a cache
    # hit passes here, and the two cost 3,000 instructions more. A variant stored without
    # Vary matches any request: no field of it to compare.
    candidates = []
    for variant in variants:
        if not variant.vary or _matches(variant, request_headers):
            candidates.append(variant)
    plain = True
    for name, _ in request_headers:
        if name in _CHOICE_FIELDS:
            plain = False
            break
    if not candidates and (plain or header(request_headers, b"cache-control") is None):
        return _FETCH  # nothing stored, and no only-if-cached to answer 504
    request = _NO_DIRECTIVES if plain else cache_control(request_headers, pragma=True)
    # The directives are asked of their dictionaries: CacheControl's ``in`` is a Python
    # call each time, and a hit asks four.
    asked = request.directives
    if method not in (b"GET", b"HEAD") or not candidates:
        if "only-if-cached" in asked and method in (b"GET", b"HEAD"):
            return Choice("gateway_timeout")
        return Choice("fetch")
    # the most recent (4.1)
    stored = candidates[0] if len(candidates) == 1 else max(candidates,
                                                            key=lambda s: s.response_time)
    response = stored.control.directives
    age = age_of(stored, now)
    lifetime = stored.lifetime
    fresh = age < lifetime
    if "max-age" in asked:
        limit = request.seconds("max-age")
        if limit is None or age > limit:
            fresh = False
    if "min-fresh" in asked:
        wanted = request.seconds("min-fresh")
        if wanted is None or lifetime - age < wanted:
            fresh = False
    usable = fresh
    if not fresh and "max-stale" in asked and not (
            "must-revalidate" in response or "proxy-revalidate" in response
            or "s-maxage" in response or "no-cache" in response):
        allowance = asked["max-stale"]
        seconds = request.seconds("max-stale")
        usable = allowance is None or (seconds is not None and age - lifetime <= seconds)
    must_ask = "no-cache" in asked or "no-cache" in response
    if usable and not must_ask:
        # positional: a keyword is a dictionary made for the call (900 instructions)
        return Choice("serve", stored, age, (),
                      not plain and not_modified(request_headers, stored))
    if "only-if-cached" in asked:
        return Choice("gateway_timeout")
    conditional = conditional_headers(stored)
    if not conditional:
        return Choice("fetch")
    return Choice("revalidate", stored, age, conditional)


def conditional_headers(stored: Stored) -> tuple[tuple[bytes, bytes], ...]:
    """If-None-Match and If-Modified-Since from the stored validators (4.3.1)."""
    out = []
    etag = header(stored.headers, b"etag")
    if etag is not None:
        out.append((b"if-none-match", etag))
    last_modified = header(stored.headers, b"last-modified")
    if last_modified is not None:
        out.append((b"if-modified-since", last_modified))
    return tuple(out)


def _weak_equal(a: bytes, b: bytes) -> bool:
    return a.strip().removeprefix(b"W/") == b.strip().removeprefix(b"W/")


def not_modified(request_headers: Headers, stored: Stored) -> bool:
    """Whether the client's own conditional request matches the stored response, so a 304
    answers it (RFC 9110, 13.1.2 and 13.1.3; If-None-Match wins)."""
    if stored.status != 200:
        return False
    if_none_match = header(request_headers, b"if-none-match")
    if if_none_match is not None:
        etag = header(stored.headers, b"etag")
        if if_none_match.strip() == b"*":
            return True
        if etag is None:
            return False
        return any(_weak_equal(tag, etag) for tag in _split_list(if_none_match))
    since = http_date(header(request_headers, b"if-modified-since"))
    if since is None:
        return False
    last_modified = http_date(header(stored.headers, b"last-modified"))
    return last_modified is not None and last_modified <= since


def updated(stored: Stored, response_headers: Headers, request_time: float,
            response_time: float) -> Stored:
    """The stored response freshened by a 304 (4.3.4): the 304's fields replace the stored
    ones of the same name."""
    fresh = {key for key, _ in response_headers if key not in _NOT_UPDATED}
    fresh.add(_ORIGIN_AGE)  # the age the origin gave before is replaced by the 304's, if any
    kept = [(k, v) for k, v in stored.headers if k not in fresh]
    kept += [(k, v) for k, v in storable_headers(response_headers) if k in fresh]
    return replace(stored, headers=tuple(kept), request_time=request_time,
                   response_time=response_time)


def storable_headers(headers: Headers) -> tuple[tuple[bytes, bytes], ...]:
    """The fields kept with a stored response; the origin's Age is kept aside (4.2.3)."""
    named = {n.strip().lower() for v in (header(headers, b"connection") or b"").split(b",")
             for n in [v] if n.strip()}
    out = [(k, v) for k, v in headers if k not in _NOT_STORED and k not in named]
    age = header(headers, b"age")
    if age is not None:
        out.append((_ORIGIN_AGE, age.split(b",")[0].strip()))
    return tuple(out)


def invalidates(method: bytes, status: int) -> bool:
    """Whether a response to ``method`` invalidates what is stored for its URL (4.4)."""
    return method not in _SAFE_METHODS and 200 <= status < 400
