"""Robots META tags and ``X-Robots-Tag`` headers: what a page lets an agent do with it.

Seed 002 names the classic directives (``noindex``, ``nofollow``, ``noarchive``, ``all``,
``none``); search engines added more (``nosnippet``, ``max-snippet``, ``unavailable_after``,
...; Google Search Central, "Robots meta tag, data-nosnippet, and X-Robots-Tag"). Where two
directives disagree the more restrictive one wins, as Google documents. Nothing here
raises on bad input: unreadable tokens are listed in ``issues``.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_tz
from html.parser import HTMLParser

from polite.core.robots.robotstxt import product_token

__all__ = [
    "MAX_HTML_CHARS",
    "RobotsDirectives",
    "combine",
    "meta_contents",
    "parse_meta_content",
    "parse_meta_tags",
    "parse_x_robots_tag",
    "x_robots_values",
]

# META tags belong in the head; 512 KiB of a page is far past any real head.
MAX_HTML_CHARS = 512 * 1024

_FLAGS = ("noindex", "nofollow", "noarchive", "nosnippet", "noimageindex", "notranslate",
          "indexifembedded")
_VALUED = ("max-snippet", "max-image-preview", "max-video-preview", "unavailable_after")
_NO_OP = ("all", "index", "follow", "noodp", "noydir", "archive", "snippet")
_IMAGE_PREVIEWS = ("none", "standard", "large")
_IMAGE_ORDER = {name: i for i, name in enumerate(_IMAGE_PREVIEWS)}


@dataclass(frozen=True, slots=True)
class RobotsDirectives:
    """What the page allows. ``max_snippet`` and ``max_video_preview`` use -1 for "no
    limit"; ``unavailable_after`` is in seconds since the epoch."""

    noindex: bool = False
    nofollow: bool = False
    noarchive: bool = False
    nosnippet: bool = False
    noimageindex: bool = False
    notranslate: bool = False
    indexifembedded: bool = False
    max_snippet: int | None = None
    max_image_preview: str | None = None
    max_video_preview: int | None = None
    unavailable_after: float | None = None
    issues: tuple[str, ...] = ()

    @property
    def can_index(self) -> bool:
        return not self.noindex

    @property
    def can_follow(self) -> bool:
        return not self.nofollow

    def can_index_at(self, now: float) -> bool:
        """Whether the page may be indexed at ``now`` (``unavailable_after`` counted)."""
        return not self.noindex and (self.unavailable_after is None
                                     or now < self.unavailable_after)


NONE = RobotsDirectives()


def _limit(a: int | None, b: int | None) -> int | None:
    """The tighter of two limits where -1 means none and None means unset."""
    if a is None or a == -1:
        return b if b is not None else a
    if b is None or b == -1:
        return a
    return min(a, b)


def combine(*parts: RobotsDirectives) -> RobotsDirectives:
    """Everything the parts say, the most restrictive value winning each conflict."""
    out = NONE
    for part in parts:
        image = out.max_image_preview
        if part.max_image_preview is not None and (
                image is None or _IMAGE_ORDER[part.max_image_preview] < _IMAGE_ORDER[image]):
            image = part.max_image_preview
        after = [t for t in (out.unavailable_after, part.unavailable_after) if t is not None]
        out = RobotsDirectives(
            noindex=out.noindex or part.noindex,
            nofollow=out.nofollow or part.nofollow,
            noarchive=out.noarchive or part.noarchive,
            nosnippet=out.nosnippet or part.nosnippet,
            noimageindex=out.noimageindex or part.noimageindex,
            notranslate=out.notranslate or part.notranslate,
            indexifembedded=out.indexifembedded or part.indexifembedded,
            max_snippet=_limit(out.max_snippet, part.max_snippet),
            max_image_preview=image,
            max_video_preview=_limit(out.max_video_preview, part.max_video_preview),
            unavailable_after=min(after) if after else None,
            issues=out.issues + part.issues,
        )
    return out


def _parse_when(text: str) -> float | None:
    text = text.strip()
    parsed = parsedate_tz(text)
    if parsed is not None:
        try:
            return float(calendar.timegm(parsed[:6]) - (parsed[9] or 0))
        except (OverflowError, ValueError):
            return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _parse_int(text: str) -> int | None:
    text = text.strip()
    if not text.lstrip("-").isdigit():
        return None
    value = int(text)
    return value if value >= -1 else None


def _tokens(content: str) -> list[str]:
    """Comma-separated tokens; a date with a comma ("Friday, 25-Jun-10 ...") stays whole."""
    out: list[str] = []
    for raw in content.split(","):
        token = raw.strip()
        if not token:
            continue
        name = token.partition(":")[0].strip().lower()
        known = name in _FLAGS or name in _VALUED or name in _NO_OP or name == "none"
        if not known and out and out[-1].lower().startswith("unavailable_after"):
            out[-1] += "," + raw
            continue
        out.append(token)
    return out


def parse_meta_content(content: str) -> RobotsDirectives:
    """The directives in one ``content`` attribute (or one header value without an agent)."""
    flags: dict[str, bool] = {}
    values: dict[str, object] = {}
    issues: list[str] = []
    for token in _tokens(content):
        name, colon, value = token.partition(":")
        name = name.strip().lower()
        if name in _FLAGS and not colon:
            flags[name] = True
        elif name == "none" and not colon:
            flags["noindex"] = flags["nofollow"] = True
        elif name in _NO_OP and not colon:
            continue
        elif name in ("max-snippet", "max-video-preview") and colon:
            number = _parse_int(value)
            if number is None:
                issues.append(f"cannot read {token!r}")
            else:
                key = name.replace("-", "_")
                values[key] = _limit(values.get(key), number)  # type: ignore[arg-type]
        elif name == "max-image-preview" and colon:
            level = value.strip().lower()
            if level not in _IMAGE_ORDER:
                issues.append(f"cannot read {token!r}")
            else:
                known = values.get("max_image_preview")
                if known is None or _IMAGE_ORDER[level] < _IMAGE_ORDER[str(known)]:
                    values["max_image_preview"] = level
        elif name == "unavailable_after" and colon:
            when = _parse_when(value)
            if when is None:
                issues.append(f"cannot read the date in {token!r}")
            else:
                known_when = values.get("unavailable_after")
                values["unavailable_after"] = (when if known_when is None
                                               else min(when, float(known_when)))  # type: ignore[arg-type]
        else:
            issues.append(f"unknown directive {token!r}")
    return replace(NONE, **flags, **values, issues=tuple(issues))  # type: ignore[arg-type]


def _known_name(text: str) -> bool:
    name = text.strip().lower()
    return name in _FLAGS or name in _VALUED or name in _NO_OP or name == "none"


def parse_x_robots_tag(values: Iterable[str], agent: str) -> RobotsDirectives:
    """The ``X-Robots-Tag`` header values that apply to ``agent``, combined.

    A value may name the agent it is for (``googlebot: noindex``); it then applies only when
    that name is the agent's product token. ``unavailable_after: ...`` names a directive, not
    an agent.
    """
    return combine(*(parse_meta_content(value) for value in x_robots_values(values, agent)))


def x_robots_values(values: Iterable[str], agent: str) -> list[str]:
    """The ``X-Robots-Tag`` values that apply to ``agent``, each without its agent name."""
    token = product_token(agent).lower()
    found: list[str] = []
    for value in values:
        head, colon, rest = value.partition(":")
        if colon and head.strip() and not _known_name(head) and " " not in head.strip() \
                and "," not in head:
            if head.strip().lower() != token:
                continue
            value = rest
        found.append(value)
    return found


class _MetaCollector(HTMLParser):
    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__(convert_charrefs=True)
        self.names = names
        self.contents: list[tuple[str, str]] = []
        self.done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.done:
            return
        if tag == "body":
            self.done = True
            return
        if tag != "meta":
            return
        fields = {key.lower(): (value or "") for key, value in attrs}
        name = fields.get("name", "").strip().lower()
        if name in self.names and "content" in fields:
            self.contents.append((name, fields["content"]))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)


def parse_meta_tags(html: str | bytes, agent: str) -> RobotsDirectives:
    """The robots META tags of a page that apply to ``agent``: ``name="robots"`` and
    ``name="<agent's product token>"``, combined. Reads up to ``<body>`` or
    :data:`MAX_HTML_CHARS`."""
    names = ("robots", product_token(agent).lower())
    return combine(*(parse_meta_content(c) for _, c in meta_contents(html, names)))


def meta_contents(html: str | bytes, names: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(name, content)`` of the head's META tags whose name (lower case) is in ``names``,
    in document order. Reads up to ``<body>`` or :data:`MAX_HTML_CHARS`."""
    if isinstance(html, bytes):
        html = html[:MAX_HTML_CHARS].decode("utf-8", "replace")
    collector = _MetaCollector(names)
    collector.feed(html[:MAX_HTML_CHARS])
    collector.close()
    return collector.contents
