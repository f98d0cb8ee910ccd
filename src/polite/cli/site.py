"""``polite site serve``: the configuration page of a site's robots.txt (Jasani & Kumbharana, 4.11);
the work is :mod:`polite.site`."""

from __future__ import annotations

import argparse
import os
import secrets
import socket
from typing import TextIO

from polite.cli.common import add_command, add_group, fetch_client
from polite.config import SITE_IMPORT, SITE_PRUNE, SITE_RANGES_UPDATE, SITE_SERVE
from polite.errors import ConfigError

__all__ = ["add_site_commands"]

TOKEN_ENV = SITE_SERVE["token"].env


def add_site_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _, site_commands = add_group(
        commands, "site", help="a site's own robots.txt: rules in SQLite, the configuration page")
    add_command(
        site_commands, SITE_SERVE, _serve,
        help="the configuration page: rules in sections, versions, robot visits",
        description="Serve the configuration page over DB (created when missing). The "
                    "site's application serves the same rules through polite.site's "
                    "middleware, reading DB. Off loopback the page needs a token: "
                    f"--token, ${TOKEN_ENV}, or one made up and printed.")
    add_command(
        site_commands, SITE_IMPORT, _import,
        help="keep an existing robots.txt as the hand-written part",
        description="Save a new version whose hand-written part is FILE: the managed "
                    "rules (empty at first) go in a block before it.")
    add_command(
        site_commands, SITE_PRUNE, _prune,
        help="forget robot visits older than some days (the log grows otherwise)")
    _, ranges_commands = add_group(
        site_commands, "ranges",
        help="crawler operators' published IP ranges, kept in the site's file")
    add_command(
        ranges_commands, SITE_RANGES_UPDATE, _ranges_update,
        help="read the operators' range files (JAFAR, Google's, Bing's shape)",
        description="Read each FILE or URL (NAME=FILE|URL says whose; a name such as "
                    "googlebot.json is matched to the crawler that publishes it) and keep "
                    "its prefixes with its creationTime; with none, fetch every crawler's "
                    "published file. A URL is fetched at most once an hour. A file without "
                    "a creationTime is refused: its addresses cannot be dated.")


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    try:
        import uvicorn
    except ImportError as exc:
        raise ConfigError("polite site serve needs the site extra: "
                          "pip install 'polite-web[site]'") from exc
    from polite._listen import is_loopback, listen_problem  # polite serve's own rules
    from polite.core.urls import host_name_problem
    from polite.site import SiteStore
    from polite.site.page import create_site_app

    problem = listen_problem("--host", args.host)
    if problem is not None:
        raise ConfigError(problem)
    allowed = args.allowed_host or []
    for name in allowed:
        if host_name_problem(name.strip().lower().rstrip(".")):
            raise ConfigError(f"--allowed-host {name!r} is not a host name")
    token = args.token or os.environ.get(TOKEN_ENV) or None
    made_up = token is None and not is_loopback(args.host)
    if made_up:
        token = secrets.token_urlsafe(24)
    # The port is taken before the page is announced: a busy one is one line and exit 2,
    # not the success line followed by the server's own error.
    listener = _listen(args.host, args.port)
    try:
        store = SiteStore(args.db)
        app = create_site_app(store, token=token, allowed_hosts=[*allowed, args.host])
        port = listener.getsockname()[1]
        host = f"[{args.host}]" if ":" in args.host else args.host
        # Only a token made up here is printed: one given is the operator's, and a start-up
        # line ends up in logs that others read.
        shown = f"?token={token}" if made_up else \
            " (open it once with ?token= and the token given)" if token else ""
        print(f"polite site: the configuration page of {args.db} on http://{host}:{port}/"
              f"{shown}", file=out, flush=True)
        try:
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
            server.run(sockets=[listener])
        finally:
            store.close()
    finally:
        listener.close()
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port``; :class:`ConfigError` naming them when it
    cannot be (the port taken, an address not this machine's)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        listener = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except OSError as exc:
        listener.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return listener


def _import(args: argparse.Namespace, out: TextIO) -> int:
    import dataclasses
    import time

    from polite.core.robots import MAX_ROBOTS_BYTES
    from polite.site import SiteStore

    with open(args.file, "rb") as handle:
        body = handle.read(MAX_ROBOTS_BYTES + 1)
    if len(body) > MAX_ROBOTS_BYTES:
        raise ConfigError(f"{args.file} is over {MAX_ROBOTS_BYTES:,} bytes, the most "
                          "crawlers read")
    from polite.core.text import decode_text

    # Not text is refused, not kept with its bytes replaced: the site would serve what its
    # webmaster never wrote. A byte order mark is dropped: read only at the start of a file,
    # kept mid-file it would make the hand-written part's first line one no crawler reads.
    text = decode_text(body, args.file)
    store = SiteStore(args.db)
    try:
        rules = dataclasses.replace(store.current().rules, manual_text=text)
        version = store.save(rules, now=time.time(), author="polite site import",
                             note=f"hand-written part from {args.file}")
    finally:
        store.close()
    print(f"version {version.id}: {args.file} kept after the managed block "
          f"({len(text.splitlines())} lines)", file=out)
    return 0


def _prune(args: argparse.Namespace, out: TextIO) -> int:
    import time

    from polite.site import SiteStore

    store = SiteStore(args.db)
    try:
        removed = store.prune_visits(time.time() - args.days * 86_400)
    finally:
        store.close()
    print(f"{removed:,} robot visits older than {args.days:g} days forgotten", file=out)
    return 0


def _ranges_update(args: argparse.Namespace, out: TextIO) -> int:
    import time

    from polite.site import SiteStore, load_crawlers
    from polite.site.ranges import update_ranges

    crawlers = load_crawlers(args.crawlers)
    now = time.time()
    store = SiteStore(args.db)
    try:
        results = update_ranges(store, crawlers, args.sources, now=now,
                                allow_private=args.allow_private,
                                client=lambda: fetch_client(args)[0])
    finally:
        store.close()
    if not results:
        print("no range files to read: the crawler list names no published ranges "
              "(ranges_urls); give FILE or NAME=FILE", file=out)
    failed = refused = 0
    for result in results:
        if result.file is not None:
            made = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(result.file.creation_time))
            extra = f", {result.file.skipped} entries passed over" if result.file.skipped else ""
            print(f"{result.crawler}: {len(result.file.prefixes)} prefixes from "
                  f"{result.source}, made {made}{extra}", file=out)
            for bad in result.file.refused:
                where = f":{bad.line}" if bad.line is not None else f": entry {bad.entry}"
                print(f"{result.source}{where}: {bad.text} refused: {bad.reason}", file=out)
            if result.file.refused:
                refused += len(result.file.refused)
        elif result.skipped is not None:
            print(f"{result.crawler}: {result.source} left alone ({result.skipped})", file=out)
        else:
            failed += 1
            print(f"{result.crawler}: {result.source} not read: {result.error}", file=out)
    if refused:
        print(f"{refused} prefixes refused and not kept; the rest were kept", file=out)
    return 1 if failed or refused else 0
