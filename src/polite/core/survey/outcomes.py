"""One outcome per surveyed site, from seed 004's error classes (section 3.2).

The names are those of the data and the report: ``ok`` (a file with rules), ``empty``,
``not_found`` (other 4xx), ``forbidden`` (401, 403), ``server_error`` (5xx, 429), ``html``
(a page served as robots.txt, known by its content: a file of fields is one whatever its
Content-Type), ``charset`` (a charset that is misspelt or unknown, bytes that are not what
was declared, or no field and bytes that are not UTF-8 text: a binary file), ``too_big``
(over the size cap), ``timeout``, ``connection_error``, ``dns_error`` (the name has no
address: NXDOMAIN, or none of the kind), ``resolver_error`` (the resolver gave no answer about
the name, tried again and again: its nameserver silent, refusing or failing; the survey's
trouble, not the site's), ``redirect_loop``.

The classes of an HTTP answer are the rows of the status table every fetch of robots.txt
reads (:mod:`polite.core.robots.lifecycle`), named as the seed names them; the rules a class
puts in force are what that table makes of it, read with RFC 9309's policy (401 and 403
allow everything), as seed 004 read them.
"""

from __future__ import annotations

import codecs
import enum
import re

from polite.core.robots.lifecycle import (
    AllowAll,
    FetchPolicy,
    Received,
    RobotsState,
    StatusClass,
    UnauthorizedMeans,
    Unreachable,
    robots_state,
    status_class,
)
from polite.core.robots.parser import looks_like_html
from polite.core.text import not_text

__all__ = ["READABLE", "SURVEY_POLICY", "Outcome", "body_outcome", "rules_state",
           "status_outcome"]


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
    RESOLVER_ERROR = "resolver_error"
    REDIRECT_LOOP = "redirect_loop"


_CHARSET = re.compile(r"charset\s*=\s*\"?([^\s;\"]+)", re.IGNORECASE)
# A line that holds a field: what makes an answer a robots.txt file "with rules".
_FIELD = re.compile(rb"(?m)^[ \t]*[A-Za-z][A-Za-z0-9_-]*[ \t]*:")


# The status table's rows as seed 004 names them; None: the body decides.
_BY_ROW: dict[StatusClass, Outcome | None] = {
    StatusClass.FILE: None,
    StatusClass.UNAUTHORIZED: Outcome.FORBIDDEN,
    StatusClass.NO_FILE: Outcome.NOT_FOUND,
    StatusClass.UNAVAILABLE: Outcome.SERVER_ERROR,
    StatusClass.UNEXPECTED: None,  # an answer the survey reads by its body, as a 2xx's
}
# robots.txt classes that hold Sitemap lines and rules (a file cut at the cap is read that far).
READABLE = (Outcome.OK, Outcome.TOO_BIG, Outcome.EMPTY)
# No answer, the site's fault: RFC 9309, 2.3.1.4 reads it as everything disallowed. A name
# that does not resolve and a redirect loop are read as no file (seed 004): a request to the
# host fails on its own, or the site answered.
_UNREACHABLE = (Outcome.TIMEOUT, Outcome.CONNECTION_ERROR)
# The survey's reading of the table: RFC 9309's (401 and 403 allow everything).
SURVEY_POLICY = FetchPolicy(unauthorized=UnauthorizedMeans.ALLOW)
# What each class of answer stands for in the status table (a status of its row).
_ROW_STATUS: dict[str, int] = {Outcome.FORBIDDEN: 403, Outcome.NOT_FOUND: 404,
                               Outcome.SERVER_ERROR: 503}


def status_outcome(status: int) -> Outcome | None:
    """The outcome an HTTP status decides alone (``None`` for 2xx: the body decides)."""
    return _BY_ROW[status_class(status)]


def rules_state(outcome: str, body: bytes | None, url: str, now: float) -> RobotsState:
    """The robots.txt state a surveyed class puts in force: what the status table makes of
    the answer the class stands for (a readable file parsed; a charset the survey could not
    read, an HTML page, a loop or an unknown name: no rules)."""
    if outcome in READABLE and body is not None:
        return robots_state(Received(200, body, url=url), now, policy=SURVEY_POLICY)
    if outcome in _UNREACHABLE:
        return robots_state(Unreachable(outcome), now, policy=SURVEY_POLICY)
    row = _ROW_STATUS.get(outcome)
    if row is not None:
        return robots_state(Received(row, b"", url=url), now, policy=SURVEY_POLICY)
    return AllowAll(f"robots.txt {outcome}: no rules", now, now)


def body_outcome(body: bytes, *, content_type: str = "", size: int | None = None,
                 max_bytes: int) -> Outcome:
    """The outcome of a 2xx answer: ``size`` is the true size when ``body`` was cut."""
    if (size if size is not None else len(body)) > max_bytes:
        return Outcome.TOO_BIG
    # Classed by what it holds: a page, or (served as HTML) no field at all; a robots.txt
    # file served as text/html is read by every fetch of robots.txt, and counted so.
    if looks_like_html(body) or ("html" in content_type.lower() and _FIELD.search(body) is None):
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
