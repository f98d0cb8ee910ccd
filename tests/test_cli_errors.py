"""Mistakes a user makes, each answered with one line that names what was wrong and exit
status 2: a busy port, an address that is none, a mistyped scheme, a file where a folder
goes, a bad option, a misspelt argument of a drop-in."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.commands import run

HOST = "127.0.36.7"  # no other test's


@contextmanager
def busy_port() -> Iterator[int]:
    """A port of HOST some other program listens on."""
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen(1)
        yield taken.getsockname()[1]


def test_site_serve_on_a_busy_port_says_so_in_one_line_before_anything(
        tmp_path: Path) -> None:
    with busy_port() as port:
        result = run("site", "serve", "--db", str(tmp_path / "site.sqlite"), "--host", HOST,
                     "--port", str(port))
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""  # no "the configuration page ... on" first
    assert result.stderr.splitlines() == [
        f"polite: cannot listen on {HOST}:{port}: Address already in use"]


def test_demo_on_a_busy_port_names_the_address() -> None:
    with busy_port() as port:
        result = run("demo", "--host", HOST, "--port", str(port))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"polite: cannot listen on {HOST}:{port}: Address already in use"]


@pytest.mark.parametrize("command", [("serve", "--store", "memory://"),
                                     ("site", "serve", "--db", "never-made.sqlite")])
def test_a_host_that_is_no_address_is_said_to_be_none(command: tuple[str, ...]) -> None:
    result = run(*command, "--host", "999.1.1.1")
    assert result.returncode == 2
    assert "--host 999.1.1.1 is not an address" in result.stderr
    assert "loopback" not in result.stderr


@pytest.mark.parametrize("command", [("robots", "check", "htp://example.com", "-a", "bot",
                                      "/a"),
                                     ("sitemap", "parse", "htp://example.com/s.xml")])
def test_a_mistyped_scheme_is_not_read_as_a_file(command: tuple[str, ...]) -> None:
    result = run(*command)
    assert result.returncode == 2
    assert result.stderr == (f"polite: {command[2]!r} is no file, nor a site: a site is an "
                             "http:// or https:// URL, not htp://\n")


def test_an_out_naming_a_file_says_a_folder_is_wanted(tmp_path: Path) -> None:
    where = tmp_path / "notes.txt"
    where.write_text("mine\n")
    for command in (("crawl", "http://127.0.36.8/", "--allow-private"),
                    ("survey", "--robots-dir", str(tmp_path))):
        result = run(*command, "--out", str(where))
        assert result.returncode == 2
        assert result.stderr == (f"polite: {where}: a file is there, where a folder is "
                                 "wanted (an --out names a folder)\n")
    assert where.read_text() == "mine\n"


@pytest.mark.parametrize("argv", [("crawl", "run", "http://x.example/", "--max-pages", "abc"),
                                  ("robots", "check"), ("survey", "--bogus")])
def test_an_option_error_is_one_line(argv: tuple[str, ...]) -> None:
    result = run(*argv)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "error: " in line and line.endswith("--help)"), line


def test_a_misspelt_drop_in_argument_names_the_class_made() -> None:
    from polite.integrations.httpx import AsyncPoliteTransport, PoliteTransport
    from polite.integrations.requests import PoliteAdapter

    for made in (PoliteTransport, AsyncPoliteTransport, PoliteAdapter):
        with pytest.raises(TypeError) as refused:
            made(defualt_delay_s=1)
        assert str(refused.value) == (f"{made.__name__}() got an unexpected keyword argument "
                                      "'defualt_delay_s' (did you mean 'default_delay_s'?)")
    PoliteAdapter(pool_maxsize=4).close()  # HTTPAdapter's own arguments still go to it
