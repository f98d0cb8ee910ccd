"""Wiring for ``polite serve``: reads the options, builds the store, fetcher, driver and app,
and runs them on one port (the proxy's server, with the REST app behind it). Nothing below
this reads options or the environment."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import ssl
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from urllib.parse import urlsplit

from polite._listen import is_loopback, listen_problem
from polite._loop import freeze_start_up, new_event_loop
from polite.api import create_app
from polite.api.app import MAX_BODY_BYTES
from polite.clock import WallClock
from polite.config import (
    DELAY,
    FLAGS,
    ROBOTS_MEMORY_MB,
    SERVE,
    check_float,
    check_int,
    from_environment,
    read_config,
)
from polite.core._documents import read_toml_config
from polite.core.robots import MAX_ROBOTS_BYTES
from polite.core.robots.lifecycle import FetchPolicy, UnauthorizedMeans
from polite.core.urls import host_name_problem
from polite.errors import ConfigError
from polite.fetch.activity import Activity
from polite.fetch.cache import PageCache
from polite.fetch.politeness import Politeness
from polite.fetch.resolve import HostsFile, Resolver, build_resolver, first_address
from polite.fetch.robots import PublicHosts, RobotsFetcher, create_client, networks
from polite.fetch.sitemaps import SitemapWalker
from polite.fetch.trust import client_context
from polite.identity.options import require_identity_extra, signer_from
from polite.proxy import Interception, Mode, ProxyServer, ProxySettings
from polite.storage import open_store, read_store_url

if TYPE_CHECKING:
    from starlette.routing import Route

    from polite.proxy.authority import CertificateAuthority

__all__ = ["Settings", "default_ca_dir", "listen_problem", "masked_env", "open_authority",
           "open_store", "proxy_settings", "run_server", "settings_from", "upstream_context"]


@dataclass
class Settings:
    """What ``polite serve`` runs with: the command line over the environment over
    ``--config`` over these defaults, as :data:`polite.config.SERVE` declares them
    (tests/test_settings_table.py keeps the two alike)."""

    host: str = "127.0.0.1"
    port: int = 8080
    store: str = "sqlite:///polite.sqlite"
    default_delay_s: float = 1.0
    max_crawl_delay_s: float = 60.0
    agent: str = "polite"
    allow_private: bool = False
    allow_network: list[str] = field(default_factory=list)  # private networks allowed
    on_401_403: str = "disallow"
    mode: str = "reject"
    max_wait_s: float = 60.0
    hosts: str | None = None  # names from this hosts-format file only
    nameserver: str | None = None  # names from this DNS server (IP[:PORT])
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 30.0  # an origin that stops sending: the client gets a 504
    purpose: str | None = None  # what proxied requests are for, unless X-Polite-Purpose says
    refuse_by_purpose: bool = False  # proxy: 403 for what the preferences disallow it
    backoff: bool = True
    cache: bool = True
    cache_max_mb: float = 256.0
    loop: str = "auto"  # the event loop: uvloop when installed (auto), asyncio, uvloop
    cache_keep_no_store_s: float = 0.0  # Riemer 2017's "no-store for a day" is 86400
    adaptive_factor: float = 1.0
    admin_token: str | None = None
    # Host names the REST API and dashboard answer to besides IP addresses and localhost
    # (a name pointed at this machine by someone else's DNS is refused: DNS rebinding).
    allowed_host: list[str] = field(default_factory=list)
    max_robots_bytes: int = MAX_ROBOTS_BYTES  # robots.txt is read up to this size
    robots_memory_mb: float = ROBOTS_MEMORY_MB  # parsed robots.txt files kept in memory
    intercept_tls: bool = False  # read inside CONNECT tunnels (the local CA's certificates)
    ca_dir: str | None = None  # the local CA's folder; None: default_ca_dir()
    upstream_ca: str | None = None  # a CA file origins are also trusted by
    no_intercept: list[str] = field(default_factory=list)  # hosts left as plain tunnels
    trace_size: int = 1000  # exchanges GET /trace keeps (0: none)
    node: str | None = None  # this node's name on the dashboard (default host:port)
    key: str | None = None  # an Ed25519 key whose directory is served (Web Bot Auth)
    sign_with: str | None = None  # an Ed25519 key that signs every forwarded request
    signature_agent: str | None = None  # its directory's URL, sent as Signature-Agent
    delays_s: dict[str, float] = field(default_factory=dict)  # domain -> s, from --config


# The config file's tables of delays per domain, and how many of each one's unit make a
# second: [delays_s] in seconds like every other duration, and [delays], Riemer 2017's
# milliseconds, read as before with a deprecation note.
DELAY_TABLES = {"delays_s": 1, "delays": 1000}


def _delays(value: object, where: str, table: str) -> dict[str, float]:
    """A config file's ``[delays_s]`` (``[delays]``: in milliseconds): domain = delay, each
    within the bounds of every delay setting (a day at most)."""
    per = DELAY_TABLES[table]
    unit = "seconds" if per == 1 else "milliseconds"
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{table}] must be a table of domain = {unit}")
    found: dict[str, float] = {}
    for domain, given in value.items():
        knob = f"{where}: {table}.{domain}"
        if per == 1:
            found[domain.lower()] = check_float(given, DELAY, knob=knob, unit="s")
        else:  # whole milliseconds, as before (2500.0 among them)
            if isinstance(given, float) and given.is_integer() and abs(given) < 2 ** 53:
                given = int(given)
            found[domain.lower()] = check_int(given, DELAY.scaled(per), knob=knob,
                                              unit="ms") / per
    return found


def settings_from(args: argparse.Namespace) -> Settings:
    """The effective settings: what the command line gave, else the environment, else the
    config file, else the defaults; each checked as its surface spells it. A Namespace made
    by hand (not by the parser) is checked too, by the flags' names."""
    given = argparse.Namespace(**vars(args))
    for setting in SERVE.on("cli"):
        value = getattr(given, setting.name, None)
        if value is not None and not setting.positional:
            setting.check(value, f"{setting.flag}")
    config: dict[str, object] = {}
    path = getattr(given, "config", None)
    if path:
        config, notes = read_config(path, SERVE, tables=tuple(DELAY_TABLES),
                                    read=read_toml_config)
        for note in notes:
            print(f"polite: {note}", file=sys.stderr)
    environment = from_environment(SERVE, dict(os.environ))
    settings = Settings()
    for item in fields(Settings):
        if item.name == "delays_s":
            continue  # the config file's tables, read below
        value = getattr(given, item.name, None)
        if value is None:
            value = environment.get(item.name, config.get(item.name))
        if value is not None:
            setattr(settings, item.name, list(value) if isinstance(value, list) else value)
    for table in DELAY_TABLES:
        if table in config:
            if table != "delays_s":
                print(f"polite: --config {path}: [{table}] (milliseconds) is deprecated; use "
                      "[delays_s] (seconds)", file=sys.stderr)
            settings.delays_s.update(_delays(config[table], f"--config {path}", table))
    networks(settings.allow_network)  # a clear error now, not at the first request
    if settings.hosts and settings.nameserver:
        raise ConfigError("give --hosts or --nameserver, not both")
    if not all(isinstance(host, str) and host for host in settings.no_intercept):
        raise ConfigError("no_intercept must be a list of host names")
    for name in settings.allowed_host:
        if not isinstance(name, str) or host_name_problem(name.strip().lower().rstrip(".")):
            raise ConfigError(f"--allowed-host {name!r} is not a host name")
    return settings


MASK = "******"


def _mask_url(url: str) -> str:
    """A store URL with its password (and a user alone, as Redis takes it) hidden."""
    try:
        parts = urlsplit(url)
        if parts.password is None and not parts.username:
            return url
        user = parts.username if parts.password is not None else None
        host = parts.netloc.rsplit("@", 1)[-1]
        auth = f"{user}:{MASK}" if user else f":{MASK}" if parts.password is not None \
            else MASK
        return parts._replace(netloc=f"{auth}@{host}").geturl()
    except ValueError:
        return MASK  # not readable: shown as nothing rather than as it is


def masked_env(settings: Settings) -> dict[str, object]:
    """Riemer 2017's ``GET /env``: every setting in force, secrets masked. The default
    delay is also given in milliseconds under its former name, for the readers of the
    earlier ``/env``."""
    env: dict[str, object] = asdict(settings)
    env["default_delay_ms"] = round(settings.default_delay_s * 1000)
    if settings.admin_token:
        env["admin_token"] = MASK
    env["store"] = _mask_url(settings.store)
    return env


async def _check_redis(url: str) -> None:
    from polite.storage.redis import RedisStore

    store = RedisStore.from_url(url, knob=FLAGS.store)
    try:
        await store.ping()
    finally:
        await store.close()


def default_ca_dir() -> Path:
    """Where the local CA is kept: $XDG_STATE_HOME/polite/ca, else ~/.local/state/polite/ca
    (the XDG Base Directory specification's state folder)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join("~", ".local", "state")
    return Path(state).expanduser() / "polite" / "ca"


def open_authority(ca_dir: str | None) -> CertificateAuthority:
    """The local CA (made on first use), or a ConfigError saying which extra is missing."""
    try:
        from polite.proxy.authority import CertificateAuthority
    except ImportError as exc:
        raise ConfigError("TLS interception needs the cryptography library: "
                          "pip install 'polite-web[tls]'") from exc
    return CertificateAuthority.open(Path(ca_dir) if ca_dir else default_ca_dir())


def upstream_context(ca_file: str | None) -> ssl.SSLContext:
    """How origins' certificates are checked: the system's trust, and ``ca_file`` too."""
    context = client_context()
    if ca_file:
        try:
            context.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"--upstream-ca {ca_file}: not a readable PEM file of "
                              f"certificates ({exc})") from exc
    return context


def directory_served(key_file: str) -> Route:
    """The route ``polite serve --key`` serves: the key's directory, each answer signed
    with the key for the authority it was asked at."""
    require_identity_extra("polite serve --key")
    from polite.api.directory import directory_route
    from polite.core.identity import directory_document
    from polite.identity.keys import load_signing_key, public_bytes
    from polite.identity.signatures import RequestSigner as Signer
    from polite.identity.signatures import sign_directory

    signer = Signer(load_signing_key(Path(key_file), "--key"))
    document = directory_document([public_bytes(signer.key)])
    return directory_route(document, lambda url: sign_directory([signer], url, document))


def _interception(settings: Settings) -> Interception | None:
    if not settings.intercept_tls:
        return None
    plain = frozenset(host.lower().strip("[]") for host in settings.no_intercept)
    return Interception(open_authority(settings.ca_dir), plain)


def proxy_settings(settings: Settings) -> ProxySettings:
    """The proxy's part of ``settings``. Beyond loopback, proxied requests and tunnels need
    the admin token: open, the proxy would fetch (and sign, with --sign-with) for anyone."""
    return ProxySettings(
        mode=Mode(settings.mode), max_wait_s=settings.max_wait_s,
        origin_read_s=settings.read_timeout_s, connect_s=settings.connect_timeout_s,
        max_api_body_bytes=MAX_BODY_BYTES, purpose=settings.purpose,
        refuse_usage=settings.refuse_by_purpose,
        token=None if is_loopback(settings.host) else settings.admin_token)


def run_server(settings: Settings, out: TextIO) -> int:
    """Run the service with ``settings`` until interrupted; its exit status."""
    problem = listen_problem("--host", settings.host)
    if problem is not None:
        raise ConfigError(problem)
    if not is_loopback(settings.host) and not settings.admin_token:
        raise ConfigError(f"--host {settings.host} is not loopback: give --admin-token so "
                          "that writes are not open to the network")
    if read_store_url(settings.store, FLAGS.store).shared:
        asyncio.run(_check_redis(settings.store))  # fail now, not at the first request
    interception = _interception(settings)  # the CA refused before anything is opened
    key_directory = directory_served(settings.key) if settings.key else None
    signer = signer_from(settings.sign_with, settings.signature_agent, knobs=FLAGS)
    clock = WallClock()
    store = open_store(settings.store, clock, knob=FLAGS.store)
    node = settings.node or f"{socket.gethostname()}:{settings.port or os.getpid()}"
    env = masked_env(settings)
    activity = Activity(store, node=node, trace_size=settings.trace_size,
                        info={"address": f"{settings.host}:{settings.port}",
                              "mode": settings.mode, "pid": os.getpid()})
    # Names resolved as --hosts or --nameserver say, for the guard and every connection;
    # the resolver is made on the server's loop, at its first use.
    names: list[Resolver] = []

    async def addresses(host: str) -> list[str]:
        if not names:
            names.append(build_resolver(
                hosts=Path(settings.hosts) if settings.hosts else None,
                nameserver=settings.nameserver or None))
        return await names[0].addresses(host)

    if settings.hosts:  # unreadable or malformed: said now, not at the first request
        try:
            HostsFile(Path(settings.hosts))
        except OSError as exc:
            raise ConfigError(f"--hosts {settings.hosts}: {exc.strerror or exc}") from None
    # One guard for the checks and for robots.txt's, sitemaps' and the proxy's connections,
    # which go to the address it checked.
    hosts = PublicHosts(clock, allowed=networks(settings.allow_network), resolve=addresses)
    # One context for the client and the proxy: each one made loads the system's CA
    # certificates again (60 ms of CPU, at its first connection). The client sets its ALPN
    # protocols on it, http/1.1 alone (it does not speak h2), which is what the proxy speaks
    # to origins too.
    upstream_tls = upstream_context(settings.upstream_ca)
    # robots.txt and sitemaps are signed as well as what is forwarded
    client = create_client(verify=upstream_tls,
                           guard=None if settings.allow_private else hosts,
                           resolve=first_address(addresses),
                           connect_timeout_s=settings.connect_timeout_s,
                           read_timeout_s=settings.read_timeout_s,
                           sign=None if signer is None else signer.headers)
    policy = FetchPolicy(unauthorized=UnauthorizedMeans(settings.on_401_403))
    fetcher = RobotsFetcher(client, store, clock, agent=settings.agent, policy=policy,
                            allow_private=settings.allow_private,
                            max_bytes=settings.max_robots_bytes, public_hosts=hosts,
                            max_memory_bytes=int(settings.robots_memory_mb * 1024 * 1024))
    politeness = Politeness(fetcher, store, clock, agent=settings.agent,
                            default_delay_s=settings.default_delay_s,
                            max_crawl_delay_s=settings.max_crawl_delay_s,
                            allow_private=settings.allow_private,
                            adaptive_factor=settings.adaptive_factor,
                            backoff=settings.backoff, activity=activity, public_hosts=hosts,
                            private_hint=FLAGS.allow_private)
    beating: list[asyncio.Task[None]] = []

    async def startup() -> None:
        # Delays from the config file fill in; what was set at run time (PUT /delays) and
        # persisted stays.
        for domain, delay_s in settings.delays_s.items():
            if await store.get_delay(domain) is None:
                await store.set_delay(domain, delay_s)
        # Counters to the store and this node's heartbeat, once a second.
        beating.append(asyncio.get_running_loop().create_task(activity.run(1.0)))

    async def shutdown() -> None:
        for task in beating:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await client.aclose()
        await store.close()
        for resolver in names:
            await resolver.close()

    walker = SitemapWalker(client, politeness)
    cache = PageCache(store, max_total_bytes=int(settings.cache_max_mb * 1024 * 1024),
                      keep_no_store_s=settings.cache_keep_no_store_s) if settings.cache \
        else None
    # Beyond loopback, deciding, proxying (signed with --sign-with's key) and what shows
    # the clients' traffic are the token's holders' only (the proxy's in proxy_settings).
    app = create_app(politeness, store, admin_token=settings.admin_token, sitemaps=walker,
                     cache=cache, on_startup=startup, on_shutdown=shutdown, env=env,
                     allowed_hosts=[*settings.allowed_host, settings.host],
                     private_reads=not is_loopback(settings.host),
                     key_directory=key_directory)
    proxy = ProxyServer(politeness, app, cache=cache, settings=proxy_settings(settings),
                        upstream_tls=upstream_tls,
                        interception=interception, public_hosts=hosts,
                        sign=None if signer is None else signer.headers,
                        resolve=first_address(addresses))

    async def run() -> None:
        freeze_start_up()  # before the first request can wait for its collection
        port = await proxy.start(settings.host, settings.port)
        out.write(f"polite serve: listening on http://{settings.host}:{port} "
                  f"(REST API and HTTP proxy; store {env['store']}, agent "
                  f"{settings.agent!r}, mode {settings.mode}, "
                  f"loop {type(asyncio.get_running_loop()).__module__.split('.')[0]})\n")
        if interception is not None:
            folder = settings.ca_dir or default_ca_dir()
            out.write(f"polite serve: intercepting TLS with the CA in {folder} (polite ca "
                      "export prints its certificate)\n")
        out.flush()
        try:
            await proxy.serve_forever()
        finally:
            await proxy.close()

    loop = new_event_loop(settings.loop)
    main = loop.create_task(run())
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, main.cancel)
    try:
        loop.run_until_complete(main)
    except asyncio.CancelledError:
        pass
    except OSError as exc:
        raise ConfigError(f"cannot listen on {settings.host}:{settings.port}: "
                          f"{exc.strerror or exc}") from exc
    finally:
        loop.close()
    return 0
