"""The AI-usage preferences a proxied response goes out with.

A request with a purpose (its ``X-Polite-Purpose``, else ``polite serve --purpose``) gets
the preferences that apply beside the access decision, as ``POST /politeness/verbose
?purpose=`` gives them: a ``Polite-Usage`` response field, an RFC 9651 dictionary
(:func:`polite.core.robots.usage.purpose_field`), e.g.
``Polite-Usage: train-ai=disallow;source="robots.txt Content-Usage line 4: train-ai=n";
vocabulary="draft-ietf-aipref-vocab-07"``. Its sources are the URL's robots.txt group and
the response's own fields (``Content-Usage``, ``Content-Signal``, ``tdm-reservation`` /
``tdm-policy``, ``X-Robots-Tag: noai``); the body streams through unread, so its META tags
are not among them. A ``Polite-Usage`` field of the origin's own is dropped: the client is to
read the proxy's answer, not one a site wrote for it.
"""

from __future__ import annotations

import dataclasses

from polite.core.cache.policy import Stored
from polite.core.robots.lifecycle import Parsed
from polite.core.robots.usage import combine, from_headers, purpose_field
from polite.core.usage.vocab import PURPOSES
from polite.fetch.politeness import Politeness
from polite.fetch.robots import robots_usage
from polite.fetch.wire import Head, Headers

__all__ = ["FIELD", "asked_purpose", "stored_with_usage", "with_usage"]

FIELD = b"polite-usage"


def asked_purpose(request: Head, default: str | None) -> str | None:
    """The request's purpose as it asks: its ``X-Polite-Purpose`` (empty: none), else
    ``default``; not checked against :data:`PURPOSES` (the proxy answers 400 for a value
    that is none of them)."""
    asked = request.get(b"x-polite-purpose")
    if asked is None:
        return default
    return asked.decode("latin-1").strip().lower() or None


async def with_usage(politeness: Politeness, default: str | None, request: Head, url: str,
                     response: Headers) -> Headers:
    """``response``, the fields of a response to forward, with ``Polite-Usage`` added when
    the request has a purpose; as they were when it has none."""
    purpose = asked_purpose(request, default)
    if purpose is None or purpose not in PURPOSES:  # a bad one was refused with 400 before
        return response
    user_agent = (request.get(b"user-agent") or b"").decode("latin-1").strip()
    agent = user_agent or politeness.agent  # as the access decision was taken
    fields = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response]
    parts = [from_headers(fields, agent)]
    state = await politeness.robots_state(url)  # already loaded for the access decision
    if isinstance(state, Parsed):
        parts.extend(await robots_usage(state.robots, [url], agent))
    value = purpose_field(combine(*parts), purpose)
    return [(k, v) for k, v in response if k != FIELD] + [(FIELD, value.encode("ascii"))]


async def stored_with_usage(politeness: Politeness, default: str | None, request: Head,
                            url: str, stored: Stored) -> Stored:
    """A stored response about to be served from the cache, its fields as
    :func:`with_usage` makes them (the copy in the cache stays as the origin sent it)."""
    if asked_purpose(request, default) is None:
        return stored  # no purpose: served as stored
    fields = await with_usage(politeness, default, request, url, list(stored.headers))
    return dataclasses.replace(stored, headers=tuple(fields))
