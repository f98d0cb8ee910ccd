"""A path typed with non-ASCII characters is matched as a user agent sends it: percent-encoded
as UTF-8 (RFC 3986; RFC 9309, 2.2.2), in every dialect, on every surface that asks the one
decision (polite robots check and explain, the REST API, the proxy, the drop-ins)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from polite.errors import RobotsDisallowed
from polite.integrations import LoopGate
from polite.robots import Dialect, explain_body, parse
from tests.sites import Reply, Site, serve

FILE = "User-agent: *\nDisallow: /naïve/\nDisallow: /caf%C3%A9/\n"
TYPED = ["/naïve/x", "http://example.com/café/", "http://example.com/naïve/?q=é"]
ENCODED = ["/na%C3%AFve/x", "http://example.com/caf%C3%A9/"]
# Google's parser compares escapes as written: lower-case hex is another path to it.
LOWER = "http://example.com/na%c3%afve/"
POLITE = str(Path(sys.executable).parent / "polite")


@pytest.mark.parametrize("dialect", list(Dialect))
def test_typed_and_encoded_paths_get_the_same_verdict(dialect: Dialect) -> None:
    robots = parse(FILE, dialect=dialect.value)
    for url in [*TYPED, *ENCODED, *([] if dialect is Dialect.GOOGLE else [LOWER])]:
        assert not robots.allowed(url, "MyBot"), (dialect, url)
        assert not robots.checker("MyBot")(url), (dialect, url)
        assert not robots.decide(url, "MyBot").allowed, (dialect, url)
    assert robots.allowed("/naive/x", "MyBot")


def test_polite_robots_check_in_googles_dialect(tmp_path: Path) -> None:
    tie = tmp_path / "tie.txt"
    tie.write_text(FILE, "utf-8")
    done = subprocess.run([POLITE, "robots", "check", str(tie), "-a", "MyBot", "-d", "google",
                           "/naïve/x", "http://example.com/café/"], capture_output=True,
                          text=True, timeout=60, check=False)
    verdicts = [line.split()[0] for line in done.stdout.splitlines()]
    assert verdicts == ["disallowed", "disallowed"], done.stdout


def test_explain_shows_the_compared_path_as_text_not_mojibake(tmp_path: Path) -> None:
    cells = explain_body(FILE, ["MyBot"], ["/naïve/x", "/na%C3%AFve/x", "/x%FF"]).cells
    paths = {(c.url, c.dialect): c.path for c in cells}
    assert paths[("/naïve/x", Dialect.KOSTER1996)] == "/naïve/x"  # decoded, then read as UTF-8
    assert paths[("/na%C3%AFve/x", Dialect.KOSTER1996)] == "/naïve/x"
    assert paths[("/naïve/x", Dialect.GOOGLE)] == "/na%C3%AFve/x"
    assert paths[("/x%FF", Dialect.KOSTER1996)] == "/x%FF"  # not UTF-8: encoded
    tie = tmp_path / "tie.txt"
    tie.write_text(FILE, "utf-8")
    done = subprocess.run([POLITE, "robots", "explain", str(tie), "-a", "MyBot", "/naïve/x",
                           "/na%C3%AFve/x"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert "Ã" not in done.stdout and "Â" not in done.stdout, done.stdout
    assert " allowed" not in done.stdout


def test_a_drop_in_in_googles_dialect_refuses_a_typed_path() -> None:
    async def ask(origin: str) -> BaseException | None:
        gate = LoopGate(agent="MyBot", allow_private=True, dialect="google",
                        default_delay_s=0.0, adaptive_factor=0.0)
        try:
            await gate.acquire(f"{origin}/naïve/x")
        except RobotsDisallowed as exc:
            return exc
        finally:
            await gate.close()
        return None

    site = Site("127.0.113.7", {"/robots.txt": Reply(200, FILE.encode())})
    with serve(site) as server:
        refused = asyncio.run(ask(server.origin))
    assert isinstance(refused, RobotsDisallowed)
