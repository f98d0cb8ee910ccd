"""``polite demo``: a small site on loopback to try polite on; the sites are
:mod:`polite.demo`."""

from __future__ import annotations

import argparse
import contextlib
from typing import TextIO

from polite.cli.common import EXIT_OK, add_command
from polite.config import DEMO, DEMO_REGP_SITE

__all__ = ["add_demo_commands", "demo_commands"]


def add_demo_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = add_command(
        commands, DEMO, _demo,
        help="a small site on loopback to try polite on, no internet needed",
        description="Without a command: the news site of the REGP paper (Ge & Ding 2016) "
                    "with a plain robots.txt on loopback, and the commands to try against "
                    "it, until interrupted.")
    demo_commands = demo.add_subparsers(title="demo commands", metavar="[COMMAND]")
    add_command(
        demo_commands, DEMO_REGP_SITE, _demo_regp_site,
        help="serve the news website of the REGP paper (Ge & Ding 2016, section 4.1) with "
             "one of the robots.txt files of its section 5",
        description="Serves until interrupted, printing each request as it arrives: its "
                    "time, the gap since the one before, its status and path.")


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
