"""``polite demo``: a small site on loopback to try polite on; the sites are
:mod:`polite.demo`."""

from __future__ import annotations

import argparse
import contextlib
from typing import TextIO

from polite.cli.common import EXIT_OK
from polite.config import AT_LEAST_ONE, PORT, IntFlag

__all__ = ["add_demo_commands", "demo_commands"]


def add_demo_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser(
        "demo", help="a small site on loopback to try polite on, no internet needed",
        description="Without a command: the news site of the REGP paper (Ge & Ding 2016) "
                    "with a plain robots.txt on loopback, and the commands to try against "
                    "it, until interrupted.")
    demo.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    demo.add_argument("--port", type=IntFlag(PORT), default=8089, help="default 8089; 0 for any")
    demo.set_defaults(handler=_demo)
    demo_commands = demo.add_subparsers(title="demo commands", metavar="[COMMAND]")
    site = demo_commands.add_parser(
        "regp-site", help="serve the news website of the REGP paper (Ge & Ding 2016, "
                          "section 4.1) with one of the robots.txt files of its section 5",
        description="Serves until interrupted, printing each request as it arrives: its "
                    "time, the gap since the one before, its status and path.")
    site.add_argument("--robots", choices=["none", "rep", "regp"], default="regp",
                      help="no robots.txt (Table 9), the REGP file (Table 10, the default) "
                           "or the old REP file (Table 11)")
    site.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    site.add_argument("--port", type=IntFlag(PORT), default=8089,
                      help="default 8089; 0 for any")
    site.add_argument("--news", type=IntFlag(AT_LEAST_ONE), default=10,
                      help="news items (default 10)")
    site.add_argument("--visit-time", metavar="VALUE",
                      help="add a Visit-time line to the REGP file, e.g. "
                           "'21:00:00 +0800-08:00:00 +0800'")
    site.add_argument("--language", help="the REGP file's Language in place of zh-CN "
                      "(e.g. fr)")
    site.set_defaults(handler=_demo_regp_site)


def demo_commands(origin: str, service: str = "localhost:8080") -> list[str]:
    """What ``polite demo`` tells a newcomer to try against the site at ``origin`` (and the
    README's first success): a check of the site's robots.txt, and a question to the
    service (make serve ARGS=--allow-private) about two of its pages."""
    return [f"polite robots check {origin} --allow-private -a MyBot /login.do /news.do",
            f"curl -s {service}/politeness/verbose -d "
            f"'[\"{origin}/news.do\", \"{origin}/newsItem.do?id=1\"]'"]


def _demo(args: argparse.Namespace, out: TextIO) -> int:
    import contextlib
    import threading

    from polite.demo import start_site

    with start_site(args.host, args.port, robots="rep") as site:
        robots = site.robots_txt() or ""
        out.write(f"polite demo: a small news site on {site.origin}/ until Ctrl-C; its "
                  "robots.txt:\n\n" + "".join(f"  {line}\n" for line in robots.splitlines())
                  + "\nTry, in another terminal (the service: make serve "
                    "ARGS=--allow-private):\n\n"
                  + "".join(f"  {command}\n" for command in demo_commands(site.origin)))
        out.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return EXIT_OK


def _demo_regp_site(args: argparse.Namespace, out: TextIO) -> int:
    import threading

    from polite.demo import Request, start_site

    last: list[float] = []
    lock = threading.Lock()

    def show(request: Request, status: int) -> None:
        with lock:
            gap = f"+{request.at - last[-1]:.3f}" if last else ""
            last.append(request.at)
            out.write(f"{request.at - last[0]:9.3f} s {gap:>9} {status} {request.path}\n")
            out.flush()

    with start_site(args.host, args.port, robots=args.robots, news=args.news,
                    visit_time=args.visit_time, language=args.language,
                    on_request=show) as site:
        robots = site.robots_txt()
        out.write(f"the REGP paper's news site on {site.origin}/ ({args.news} news items), "
                  f"robots.txt: {args.robots}\n")
        out.write("".join(f"  {line}\n" if line else "\n" for line in robots.splitlines())
                  if robots
                  else "  (none: /robots.txt answers 404)\n")
        out.flush()
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return EXIT_OK
