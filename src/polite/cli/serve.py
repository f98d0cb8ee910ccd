"""``polite serve`` and ``polite ca``: the options; the wiring is :mod:`polite.serve`."""

from __future__ import annotations

import argparse
from typing import TextIO

from polite.cli.common import EXIT_OK
from polite.config import SERVE_NUMBERS
from polite.core.usage.vocab import PURPOSES
from polite.robots import MAX_ROBOTS_BYTES

__all__ = ["add_serve_commands"]


def add_serve_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve", help="run the politeness service: the polite HTTP proxy and the REST API "
                      "on one port",
        description="Listens on loopback by default. Robots.txt of private and loopback "
                    "addresses is not fetched unless --allow-private is given.")
    # Defaults live in polite.serve.Settings: an option not given falls back to --config,
    # then to those defaults.
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=SERVE_NUMBERS["port"], help="default 8080")
    serve.add_argument("--store", help="sqlite:///PATH (default sqlite:///polite.sqlite), "
                       "redis://HOST:PORT/DB (shared by several nodes) or memory://")
    serve.add_argument("--default-delay-ms", type=SERVE_NUMBERS["default_delay_ms"],
                       help="delay where neither the operator nor the site sets one "
                            "(default 1000)")
    serve.add_argument("--max-crawl-delay-s", type=SERVE_NUMBERS["max_crawl_delay_s"],
                       help="robots.txt delays above this are read as this (default 60)")
    serve.add_argument("--agent", help="the product token robots.txt is read for "
                       "(default polite)")
    serve.add_argument("--allow-private", action="store_true", default=None,
                       help="also fetch from private and loopback addresses")
    serve.add_argument("--allow-network", dest="allow_networks", action="append",
                       metavar="NETWORK", help="also fetch from the private addresses in "
                       "NETWORK (10.1.0.0/16, or one address; repeatable): the others stay "
                       "refused")
    serve.add_argument("--on-401-403", choices=["disallow", "allow"],
                       help="what a robots.txt answered with 401 or 403 means: disallow all "
                            "(the default, as Koster 1996 and Riemer 2017 do) or allow all "
                            "(RFC 9309)")
    serve.add_argument("--mode", choices=["reject", "wait", "ordered"],
                       help="proxy: a request whose host's slot is taken gets 429 with "
                            "Retry-After (reject, the default), is held until its slot (wait), "
                            "or is held and answered in its client's order (ordered; the "
                            "client is X-Polite-Client or its address)")
    serve.add_argument("--max-wait-s", type=SERVE_NUMBERS["max_wait_s"],
                       help="wait mode: the longest a request is held (default 60)")
    serve.add_argument("--origin-timeout-s", type=SERVE_NUMBERS["origin_timeout_s"],
                       help="proxy: an origin silent this long gets the client a 504 "
                            "(default 30)")
    serve.add_argument("--purpose", choices=PURPOSES,
                       help="proxy: what requests are for, unless their X-Polite-Purpose says")
    serve.add_argument("--refuse-by-purpose", action="store_true", default=None,
                       help="proxy: answer 403 with the reason when the URL's robots.txt "
                            "AI-usage preferences disallow the request's purpose")
    serve.add_argument("--no-backoff", dest="backoff", action="store_false", default=None,
                       help="do not pause a host after a 429 or 503 (for origins of your own)")
    serve.add_argument("--no-cache", dest="cache", action="store_false", default=None,
                       help="turn the proxy's page cache off")
    serve.add_argument("--cache-max-mb", type=SERVE_NUMBERS["cache_max_mb"],
                       help="the page cache's size in the store; least recently used pages "
                       "go first (default 256)")
    serve.add_argument("--loop", choices=["auto", "asyncio", "uvloop"],
                       help="the event loop: uvloop when installed (auto, the default), or "
                            "the standard library's asyncio")
    serve.add_argument("--cache-keep-no-store-s", type=SERVE_NUMBERS["cache_keep_no_store_s"],
                       help="keep responses marked no-store this many seconds (default 0: "
                       "no-store is honoured; Riemer 2017 kept them a day, 86400)")
    serve.add_argument("--adaptive-factor", type=SERVE_NUMBERS["adaptive_factor"],
                       help="the adaptive delay is this many times a host's running response "
                            "time (default 1; 0 turns it off)")
    serve.add_argument("--admin-token", help="required (Bearer) for writes: PUT and DELETE "
                       "/delays, /politeness/feedback, reserve=true; mandatory when --host "
                       "is not a loopback address, and then /trace, /env, /delays and the "
                       "dashboard need it too (open /dashboard?token=TOKEN once)")
    serve.add_argument("--allowed-host", metavar="NAME", action="append", default=None,
                       help="a host name the REST API and dashboard answer to, besides IP "
                            "addresses, localhost and --host (a request naming another "
                            "Host is refused: DNS rebinding); repeatable")
    serve.add_argument("--max-bytes", type=SERVE_NUMBERS["max_bytes"],
                       help="read each robots.txt up to this many bytes; answers from a file "
                            f"cut there say so (default {MAX_ROBOTS_BYTES})")
    serve.add_argument("--intercept-tls", action="store_true", default=None,
                       help="read inside CONNECT tunnels, so https requests get per-URL "
                            "robots.txt, delays and the cache: clients must trust the local "
                            "CA (polite ca export); needs polite[tls]")
    serve.add_argument("--ca-dir", metavar="DIR", help="the local CA's folder, made once "
                       "(default $XDG_STATE_HOME/polite/ca or ~/.local/state/polite/ca)")
    serve.add_argument("--upstream-ca", metavar="FILE",
                       help="also trust origins whose certificates this CA file signed")
    serve.add_argument("--no-intercept", metavar="HOST", action="append", default=None,
                       help="leave tunnels to HOST plain (clients that pin certificates); "
                            "repeatable")
    serve.add_argument("--trace-size", type=SERVE_NUMBERS["trace_size"],
                       help="exchanges GET /trace keeps, newest first (default 1000; 0: none)")
    serve.add_argument("--node", help="this node's name on the dashboard (default "
                       "HOSTNAME:PORT)")
    serve.add_argument("--key", metavar="FILE", help="serve the key directory of this "
                       "Ed25519 key (polite keys new) at /.well-known/http-message-signatures-"
                       "directory, for the Signature-Agent of a signing crawler")
    serve.add_argument("--sign-with", metavar="KEY", help="sign every forwarded request, "
                       "https ones read under --intercept-tls too, with this Ed25519 key "
                       "(Web Bot Auth); needs polite[identity]")
    serve.add_argument("--signature-agent", metavar="URL", help="with --sign-with: the URL "
                       "of the key's directory, sent as Signature-Agent")
    serve.add_argument("--config", metavar="FILE",
                       help="a TOML file with any of the options above (with _ for -) and a "
                            "[delays] table of domain = milliseconds")
    serve.set_defaults(handler=_serve)
    ca = commands.add_parser("ca", help="the local CA of polite serve --intercept-tls")
    ca.set_defaults(group=ca)
    ca_commands = ca.add_subparsers(title="ca commands", metavar="COMMAND")
    export = ca_commands.add_parser(
        "export", help="print the CA's certificate (PEM) for clients to trust; the CA is "
                       "made if there is none")
    export.add_argument("--ca-dir", metavar="DIR", help="as for polite serve")
    export.set_defaults(handler=_ca_export)


def _serve(args: argparse.Namespace, out: TextIO) -> int:
    # Imported here: the service's dependencies are not needed for the robots commands.
    from polite.serve import run_server

    return run_server(args, out)


def _ca_export(args: argparse.Namespace, out: TextIO) -> int:
    from polite.serve import open_authority

    out.write(open_authority(args.ca_dir).certificate_pem().decode("ascii"))
    return EXIT_OK
