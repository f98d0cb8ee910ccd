"""One outcome per surveyed site, from seed 004's error classes (section 3.2).

The names are those of the data and the report: ``ok`` (a file with rules), ``empty``,
``not_found`` (other 4xx), ``forbidden`` (401, 403), ``server_error`` (5xx, 429), ``html``
(a page served as robots.txt), ``charset`` (a charset that is misspelt or unknown, bytes
that are not what was declared, or no field and bytes that are not UTF-8 text: a binary
file), ``too_big`` (over the size cap), ``timeout``,
``connection_error``, ``dns_error``, ``redirect_loop``.
"""

from __future__ import annotations

import codecs
import enum
import re

from polite.core.text import not_text

__all__ = ["Outcome", "body_outcome", "status_outcome"]


class Outcome(enum.StrEnum):
    OK = "ok"
    EMPTY = "empty"
    NOT_FOUND = "not_found"
    FORBIDDEN = "forbidden"
    SERVER_ERROR = "server_error"
    HTML = "html"
    CHARSET = "charset"
    TOO_BIG = "too_big"
    TIMEOUT = "timeout"
    CONNECTION_ERROR = "connection_error"
    DNS_ERROR = "dns_error"
    REDIRECT_LOOP = "redirect_loop"


_HTML = re.compile(rb"\A\s*<(?:!doctype\s+html|html|head|body|!--|title|meta|script)",
                   re.IGNORECASE)
_CHARSET = re.compile(r"charset\s*=\s*\"?([^\s;\"]+)", re.IGNORECASE)
# A line that holds a field: what makes an answer a robots.txt file "with rules".
_FIELD = re.compile(rb"(?m)^[ \t]*[A-Za-z][A-Za-z0-9_-]*[ \t]*:")


def status_outcome(status: int) -> Outcome | None:
    """The outcome an HTTP status decides alone (``None`` for 2xx: the body decides)."""
    if status in (401, 403):
        return Outcome.FORBIDDEN
    if status == 429 or status >= 500:
        return Outcome.SERVER_ERROR
    if status >= 400:
        return Outcome.NOT_FOUND
    return None


def body_outcome(body: bytes, *, content_type: str = "", size: int | None = None,
                 max_bytes: int) -> Outcome:
    """The outcome of a 2xx answer: ``size`` is the true size when ``body`` was cut."""
    if (size if size is not None else len(body)) > max_bytes:
        return Outcome.TOO_BIG
    if _HTML.match(body[:1024]) is not None or "html" in content_type.lower():
        return Outcome.HTML
    declared = _CHARSET.search(content_type)
    if declared is not None:
        try:
            codecs.lookup(declared.group(1))
            body.decode(declared.group(1))
        except (LookupError, UnicodeDecodeError):
            return Outcome.CHARSET
    if _FIELD.search(body) is None:
        # Bytes that are not text are no robots.txt at all, empty or not: classed empty, a
        # binary file would be counted by the report as a file of as many lines as it holds
        # line feeds.
        return Outcome.CHARSET if not_text(body) is not None else Outcome.EMPTY
    return Outcome.OK
