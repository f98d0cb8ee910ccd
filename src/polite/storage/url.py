"""Store URLs, read in one place for every product: where the politeness store, the
frontier and a shared survey keep their state.

- ``memory://``: this process only;
- ``sqlite:///PATH``: a file, shared by the processes of one machine;
- ``redis://[:PASSWORD@]HOST:PORT/DB``, ``rediss://...`` (TLS) or ``unix:///SOCKET?db=DB``:
  a Redis database that processes on several machines share; ``?prefix=P`` starts every key
  (several crawls or surveys in one database), ``?cluster=1`` asks for a Redis Cluster, of
  which HOST:PORT is any node.

A URL that names none of them raises :class:`~polite.errors.StoreURLError`, which names no
setting: each caller says which of its own settings was wrong (:func:`read_store_url`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from polite.errors import SettingError, StoreURLError

__all__ = ["DEFAULT_PREFIX", "Kind", "StoreURL", "parse_store_url", "read_store_url"]

Kind = Literal["memory", "sqlite", "redis"]
DEFAULT_PREFIX = "polite:"
_REDIS_SCHEMES = ("redis", "rediss", "unix")
# What is said when the scheme is none of the kinds asked for.
_EXPECTED: dict[frozenset[Kind], str] = {
    frozenset({"memory", "sqlite", "redis"}):
        "expected sqlite:///PATH, redis://HOST:PORT/DB or memory://",
    frozenset({"redis"}): "expected redis://HOST:PORT/DB, rediss://HOST:PORT/DB or "
                          "unix:///SOCKET",
}
_TRUE, _FALSE = ("1", "true", "yes"), ("0", "false", "no")


@dataclass(frozen=True, slots=True)
class StoreURL:
    """A store URL read. ``path`` is an SQLite store's file; ``client_url`` what a Redis
    client is given (the URL without ``prefix`` and ``cluster``, which are polite's)."""

    url: str
    kind: Kind
    path: Path | None = None
    client_url: str = ""
    prefix: str = DEFAULT_PREFIX
    cluster: bool = False

    @property
    def shared(self) -> bool:
        """Whether processes on several machines can share it (Redis)."""
        return self.kind == "redis"


def parse_store_url(url: str, *, kinds: frozenset[Kind] = frozenset(("memory", "sqlite",
                                                                     "redis"))) -> StoreURL:
    """``url`` read as a store of one of ``kinds``; :class:`StoreURLError` when it is not
    one (a scheme of another kind, a cluster flag that is neither 1 nor 0, a Cluster over
    a Unix socket or with a database other than 0)."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if url == "memory":
        scheme = "memory"
    kind: Kind | None = ("memory" if scheme == "memory" else "sqlite" if scheme == "sqlite"
                         else "redis" if scheme in _REDIS_SCHEMES else None)
    if kind is None or kind not in kinds:
        raise StoreURLError(url, _EXPECTED.get(kinds) or "expected " + " or ".join(
            sorted(kinds)))
    if kind == "memory":
        return StoreURL(url, "memory")
    if kind == "sqlite":
        if not url.startswith("sqlite:///"):
            raise StoreURLError(url, "expected sqlite:///PATH (three slashes, then the file)")
        path = url[len("sqlite:///"):]
        if not path:
            raise StoreURLError(url, "sqlite:/// needs the file's path after it")
        return StoreURL(url, "sqlite", path=Path(path))
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise StoreURLError(url, str(exc)) from exc
    query = parse_qs(parts.query)
    prefix = query.pop("prefix", [DEFAULT_PREFIX])[0]
    flag = query.pop("cluster", ["0"])[0].lower()
    if flag not in _TRUE + _FALSE:
        raise StoreURLError(url, f"cluster= takes 1 or 0, not {flag!r}")
    cluster = flag in _TRUE
    rest = "&".join(f"{k}={v}" for k, vs in query.items() for v in vs)
    if cluster:
        if parts.scheme == "unix":
            raise StoreURLError(url, "a Redis Cluster is reached over TCP")
        if parts.path.strip("/") not in ("", "0"):
            raise StoreURLError(url, "a Redis Cluster has database 0 only")
        # the database is the Cluster's one: a client of a Cluster takes no path
        client_url = parts._replace(query=rest, path="").geturl()
    else:
        if parts.scheme == "unix" and not parts.path.strip("/"):
            raise StoreURLError(url, "unix:// needs the socket's path: unix:///SOCKET")
        # the URL as given but its query (urlsplit's geturl writes unix:/PATH for
        # unix:///PATH, which some clients do not read)
        client_url = url.partition("?")[0] + (f"?{rest}" if rest else "")
    return StoreURL(url, "redis", client_url=client_url, prefix=prefix, cluster=cluster)


def read_store_url(url: str, knob: str, *,
                   kinds: frozenset[Kind] = frozenset(("memory", "sqlite", "redis"))
                   ) -> StoreURL:
    """:func:`parse_store_url` for a setting: its error names ``knob`` as the caller's
    surface spells it (``--store``, ``POLITE_STORE``, ``store=``)."""
    try:
        return parse_store_url(url, kinds=kinds)
    except StoreURLError as exc:
        raise SettingError(knob, url, exc.problem) from exc
