"""robots.txt captures from a WARC file (Common Crawl publishes its robots.txt fetches so),
recorded as if fetched: each response record whose target URI's path is ``/robots.txt`` is
one site (the URI's host), classified by its status, headers and body like a fetch.

A redirect is followed inside the file: the site takes the outcome of the capture its
``Location`` leads to (five hops at most, each recorded, a loop is ``redirect_loop``); a
redirect whose target was not captured counts as unavailable (``not_found``; RFC 9309,
2.3.1.2 lets a crawler treat a robots.txt it cannot reach by redirects so). A name and its
``www.`` twin that lead to one capture are one site, under the name without ``www.`` (as
a survey of a list fetches ``DOMAIN`` and reaches ``www.DOMAIN`` from it): ``c.example``
redirected to ``www.c.example`` is recorded with that capture's outcome and the redirect,
and ``www.c.example`` is not a site of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from polite.core.robots import MAX_ROBOTS_BYTES
from polite.core.survey.outcomes import Outcome, body_outcome, status_outcome
from polite.errors import ConfigError
from polite.survey.store import SiteRecord, SurveyStore

__all__ = ["import_robots_warc"]

MAX_REDIRECTS = 5
# A body is read to its end to know its true size, up to this much.
_MAX_COUNTED_BYTES = 256 << 20


def import_robots_warc(path: Path, store: SurveyStore, now: float, *,
                       max_bytes: int = MAX_ROBOTS_BYTES) -> tuple[int, int]:
    """Record every robots.txt capture of the WARC file at ``path`` whose host is not
    recorded yet; returns (sites recorded, records skipped: not a robots.txt response)."""
    try:
        from warcio.archiveiterator import ArchiveIterator
        from warcio.exceptions import ArchiveLoadFailed
    except ImportError as exc:
        raise ConfigError("--warc needs warcio: pip install 'polite-web[survey]'") from exc
    added = skipped = 0
    redirects: dict[str, tuple[str, int, str]] = {}  # host -> (its URI, status, target)
    try:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.format != "warc":  # warcio reads any text as an ARC file
                    raise ConfigError(f"{path}: not a WARC file (a {record.format} record "
                                      "first)")
                if record.rec_type != "response" or record.http_headers is None:
                    skipped += record.rec_type == "response"
                    continue
                uri = record.rec_headers.get_header("WARC-Target-URI") or ""
                parts = urlsplit(uri)
                host = (parts.hostname or "").lower()
                if parts.path != "/robots.txt" or not host:
                    skipped += 1
                    continue
                if store.recorded(host) or host in redirects or _folded(store, host, uri):
                    continue  # the first capture of a host is its survey
                try:
                    status = int(record.http_headers.get_statuscode())
                except ValueError:
                    skipped += 1
                    continue
                location = record.http_headers.get_header("Location")
                if status in (301, 302, 303, 307, 308) and location:
                    redirects[host] = (uri, status, urljoin(uri, location))
                    continue
                decided = status_outcome(status)
                body: bytes | None = None
                size: int | None = None
                if decided is None:
                    content = record.content_stream()
                    kept = bytearray()
                    size = 0
                    while chunk := content.read(1 << 16):
                        size += len(chunk)
                        if len(kept) < max_bytes:
                            kept += chunk[:max_bytes - len(kept)]
                        if size >= _MAX_COUNTED_BYTES:
                            break
                    body = bytes(kept)
                    decided = body_outcome(body, content_type=record.http_headers.get_header(
                        "Content-Type") or "", size=size, max_bytes=max_bytes)
                store.record(SiteRecord(host, None, str(decided), status, None, uri, None,
                                        size), body, now)
                added += 1
    except ArchiveLoadFailed as exc:
        # warcio's message quotes the first lines whole: of a binary file, kilobytes of bytes
        why = str(exc)
        raise ConfigError(f"{path}: not a WARC file "
                          f"({why[:120] + ' ...' if len(why) > 120 else why})") from exc
    for host in redirects:
        site, reached = _followed(store, redirects, host)
        if reached is not None and reached == _twin(host):
            if host.startswith("www."):
                continue  # www.c.example -> c.example: the site is c.example's capture
            store.forget(reached)  # c.example -> www.c.example: one site, c.example
            added -= 1
        store.record(site, None, now)
        added += 1
    return added, skipped


def _twin(host: str) -> str:
    """The same site's other name: with ``www.`` or without it."""
    return host[4:] if host.startswith("www.") else f"www.{host}"


def _folded(store: SurveyStore, host: str, uri: str) -> bool:
    """Whether ``host``'s capture is the site of its name without ``www.`` (recorded by an
    earlier import, reached by its redirect)."""
    if not host.startswith("www."):
        return False
    bare = store.site(host[4:])
    return bare is not None and bare.robots_url == uri


def _followed(store: SurveyStore, redirects: dict[str, tuple[str, int, str]], host: str
              ) -> tuple[SiteRecord, str | None]:
    """A redirecting capture's record, the outcome of the capture its hops lead to, and that
    capture's host (None: no capture reached)."""
    uri, status, target = redirects[host]
    hops = [target]
    seen = {uri}
    while True:
        if target in seen or len(hops) > MAX_REDIRECTS:
            return SiteRecord(host, None, str(Outcome.REDIRECT_LOOP), status,
                              json.dumps({"error": None, "redirects": hops}), uri), None
        seen.add(target)
        parts = urlsplit(target)
        target_host = (parts.hostname or "").lower()
        hop = redirects.get(target_host)
        if hop is not None and hop[0] == target:  # the target redirects too
            target = hop[2]
            hops.append(target)
            continue
        found = store.site(target_host) if parts.path == "/robots.txt" else None
        if found is None or found.error is not None:
            return SiteRecord(host, None, str(Outcome.NOT_FOUND), status, json.dumps(
                {"error": "the redirect's target was not captured", "redirects": hops}),
                uri), None
        return SiteRecord(host, None, found.outcome, found.status, json.dumps(
            {"error": None, "redirects": hops}), found.robots_url, found.robots_hash,
            found.robots_bytes), target_host
