"""Every numeric option of every command, and every number in ``polite serve``'s config file,
refuses NaN, the infinities and values out of its range: exit status 2 and the option named,
before anything runs. The options are found in the parser itself, so a new one cannot
escape."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from polite.cli import build_parser
from polite.cli.common import command_tree
from polite.config import SERVE_NUMBERS, Bounds, FloatFlag, IntFlag
from polite.errors import ConfigError
from polite.serve import settings_from
from tests.commands import command_line
from tests.sites import Reply, Site, serve

# One parser for the cases that only parse (a parse leaves its parser as it was; each
# build takes 10 ms of CPU, hundreds of times)
PARSER = build_parser()
COMMANDS = list(command_tree(PARSER))
NUMERIC = [(path, action) for path, parser in COMMANDS for action in parser._actions
           if isinstance(action.type, IntFlag | FloatFlag) or action.type in (int, float)]


def _bad_values(bounds: Bounds) -> list[str]:
    """NaN, the infinities, and a value just past each bound."""
    bad = ["nan", "inf", "-inf", "1e400"]
    if bounds.minimum is not None:
        low = bounds.minimum
        bad.append(f"{low:g}" if not bounds.minimum_inclusive else f"{low - 1:g}")
    if bounds.maximum is not None:
        bad.append(repr(bounds.maximum + 1))  # whole: 1e+06 with :g is the maximum itself
    return bad


CASES = [pytest.param(path, action, value, id=f"{' '.join(path)} {action.option_strings[-1]} "
                                              f"{value}")
         for path, action in NUMERIC if isinstance(action.type, IntFlag | FloatFlag)
         for value in _bad_values(action.type.bounds)]


def test_the_commands_have_numeric_options_and_every_one_is_checked() -> None:
    assert len(NUMERIC) >= 40  # the walk found the commands' options
    unchecked = [(path, action.option_strings) for path, action in NUMERIC
                 if action.type in (int, float)]
    assert unchecked == []


@pytest.mark.parametrize(("path", "action", "value"), CASES)
def test_a_bad_number_is_refused_naming_the_option(
        path: tuple[str, ...], action: argparse.Action, value: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    option = action.option_strings[-1]
    with pytest.raises(SystemExit) as exited:
        PARSER.parse_args([*path, f"{option}={value}"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {'/'.join(action.option_strings)}: must be " in err
    assert repr(value) in err


def test_good_numbers_pass() -> None:
    args = build_parser().parse_args(
        ["crawl", "--max-depth", "0", "--default-delay-ms", "0", "--lease-s", "0.5",
         "--max-pages", "1", "--max-crawl-delay-s", "1e3"])
    assert (args.max_depth, args.default_delay_s, args.lease_s, args.max_pages,
            args.max_crawl_delay_s) == (0, 0, 0.5, 1, 1000.0)
    args = build_parser().parse_args(["serve", "--adaptive-factor", "0", "--port", "0",
                                       "--trace-size", "0", "--max-wait-s", "0"])
    assert (args.adaptive_factor, args.port, args.trace_size, args.max_wait_s) == (0, 0, 0, 0)


# -- polite serve: its flags and its config file's keys share one table ----------------------


def test_serve_reads_every_number_through_the_table() -> None:
    serve = {action.dest: action.type for path, action in NUMERIC
             if path == ("serve",) and action.help != argparse.SUPPRESS}
    assert serve == SERVE_NUMBERS


SERVE_CASES = [pytest.param(key, value, id=f"{key} = {value}")
               for key, flag in SERVE_NUMBERS.items()
               for value in ["nan", "inf", "-inf",
                             *(text for text in _bad_values(flag.bounds)[4:])]]


@pytest.mark.parametrize(("key", "value"), SERVE_CASES)
def test_a_bad_number_in_the_config_file_is_refused_naming_the_key(
        tmp_path: Path, key: str, value: str) -> None:
    config = tmp_path / "polite.toml"
    # TOML writes NaN and the infinities as nan, inf, -inf; an integer key gets them as
    # floats, which its type check refuses first.
    if isinstance(SERVE_NUMBERS[key], IntFlag) and value.lstrip("-").isdigit():
        value = str(int(float(value)))
    config.write_text(f"{key} = {value}\n")
    with pytest.raises(ConfigError, match=rf"--config .*polite\.toml: {key}\b"):
        settings_from(argparse.Namespace(config=str(config)))


def test_a_namespace_made_by_hand_is_checked_too() -> None:
    with pytest.raises(ConfigError, match="--adaptive-factor nan: must be a finite number"):
        settings_from(argparse.Namespace(adaptive_factor=float("nan")))


# -- the reproductions, as a user runs them ---------------------------------------------------


def polite(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command_line(*args), capture_output=True,
                              text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"polite {' '.join(args)} ran on: the value was taken")


@pytest.mark.parametrize("value", ["nan", "-1"])
def test_serve_refuses_a_nan_or_negative_adaptive_factor(value: str) -> None:
    done = polite("serve", "--store", "memory://", "--port", "0",
                  f"--adaptive-factor={value}")
    assert done.returncode == 2
    assert "argument --adaptive-factor: must be a finite number from 0 to 100" in done.stderr
    assert "listening" not in done.stdout


def test_serve_refuses_a_nan_adaptive_factor_from_its_config_file(tmp_path: Path) -> None:
    config = tmp_path / "polite.toml"
    config.write_text("adaptive_factor = nan\n")
    done = polite("serve", "--store", "memory://", "--port", "0", "--config", str(config))
    assert done.returncode == 2
    assert "adaptive_factor nan: must be a finite number from 0 to 100" in done.stderr


def test_robots_check_refuses_a_negative_max_bytes(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /private\n")
    done = polite("robots", "check", str(robots), "-a", "X", "--max-bytes", "-5",
                  "http://a.com/private")
    assert done.returncode == 2
    assert "argument --max-bytes: must be a whole number from 1 to 1,073,741,824" in done.stderr
    assert done.stdout == ""  # no verdict from a rule that is not in the file


@pytest.mark.parametrize(("option", "value"), [("--max-pages", "-1"), ("--max-depth", "-1"),
                                               ("--max-crawl-delay-s", "1e400")])
def test_crawl_refuses_out_of_range_limits(tmp_path: Path, option: str, value: str) -> None:
    page = Reply(body=b"<html><body>a page</body></html>",
                 headers={"content-type": "text/html"})
    with serve(Site("127.0.44.1", {"/robots.txt": Reply(404), "/": page})) as site:
        done = polite("crawl", f"{site.origin}/", "--out", str(tmp_path / "out"),
                      "--allow-private", "--no-sitemaps", "--json", f"{option}={value}")
    assert done.returncode == 2
    assert f"argument {option}: must be " in done.stderr
    assert site.requests == []  # refused before anything was fetched
    assert not (tmp_path / "out").exists()


# -- finite is not enough: every number has an upper bound ------------------------------------


@pytest.mark.parametrize(("args", "named"), [
    (("serve", "--store", "memory://", "--port", "0", "--default-delay-s", "1e308"),
     "argument --default-delay-s: must be a finite number from 0 to 86,400 (seconds)"),
    (("crawl", "run", "http://127.0.81.3:9/", "--out", "OUT", "--default-delay-s", "1e308"),
     "argument --default-delay-s: must be a finite number from 0 to 86,400 (seconds)"),
    (("crawl", "run", "http://127.0.81.3:9/", "--out", "OUT", "--max-pages", "1" + "0" * 400),
     "argument --max-pages: must be a whole number from 1 to 1,000,000,000"),
])
def test_a_huge_number_on_the_command_line_is_refused(
        tmp_path: Path, args: tuple[str, ...], named: str) -> None:
    done = polite(*(str(tmp_path / "out") if a == "OUT" else a for a in args))
    assert done.returncode == 2, done.stderr
    assert named in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was made


@pytest.mark.parametrize(("line", "named"), [
    ("cache_max_mb = 1e308", "cache_max_mb 1e+308: must be a finite number above 0, at "
                             "most 1,048,576 (MiB)"),
    ("adaptive_factor = 1e308", "adaptive_factor 1e+308: must be a finite number from 0 to "
                                "100"),
    ("default_delay_s = 1e308", "default_delay_s 1e+308: must be a finite number from 0 to "
                                "86,400 (seconds)"),
    ('[delays_s]\n"example.com" = 1e308', "delays_s.example.com 1e+308: must be a finite "
                                          "number from 0 to 86,400 (seconds)"),
    ('[delays]\n"example.com" = 100000000000', "delays.example.com 100000000000: must be a "
                                               "whole number from 0 to 86,400,000 (ms)"),
])
def test_a_huge_number_in_serves_config_file_is_refused(
        tmp_path: Path, line: str, named: str) -> None:
    config = tmp_path / "polite.toml"
    config.write_text(line + "\n")
    done = polite("serve", "--store", "memory://", "--port", "0", "--config", str(config))
    assert done.returncode == 2, done.stderr
    assert named in done.stderr
    assert "Traceback" not in done.stderr


def test_the_drop_ins_refuse_a_huge_delay() -> None:
    from polite.errors import SettingError
    from polite.integrations import PoliteGate
    from polite.integrations.httpx import PoliteTransport

    for name in ("default_delay_s", "max_wait_s"):
        with pytest.raises(SettingError, match=rf"{name}=1e\+308: must be a finite number"):
            PoliteTransport(**{name: 1e308})  # type: ignore[arg-type]
    for name in ("default_delay_s", "max_crawl_delay_s", "max_wait_s", "adaptive_factor"):
        with pytest.raises(SettingError, match=rf"{name}=1e\+308: must be a finite number"):
            PoliteGate(**{name: 1e308})  # type: ignore[arg-type]


# -- the config file's delays per domain are in seconds, as every other duration -------------


def test_serves_delays_per_domain_are_seconds(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "polite.toml"
    config.write_text('default_delay_s = 2\n[delays_s]\n"Example.com" = 5\n"b.example" = 0.25\n')
    settings = settings_from(argparse.Namespace(config=str(config)))
    assert settings.delays_s == {"example.com": 5.0, "b.example": 0.25}
    assert capsys.readouterr().err == ""


def test_the_former_milliseconds_table_is_read_with_one_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "polite.toml"
    config.write_text('[delays]\n"example.com" = 5\n"b.example" = 2500\n')
    settings = settings_from(argparse.Namespace(config=str(config)))
    assert settings.delays_s == {"example.com": 0.005, "b.example": 2.5}
    err = capsys.readouterr().err.splitlines()
    assert err == [f"polite: --config {config}: [delays] (milliseconds) is deprecated; use "
                   "[delays_s] (seconds)"]


def test_a_former_milliseconds_spelling_is_bounded_in_its_own_unit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The day every delay is bounded by is 86,400,000 in --default-delay-ms, not 86,400."""
    args = build_parser().parse_args(["crawl", "run", "http://127.0.81.3/",
                                      "--default-delay-ms", "100000"])
    assert args.default_delay_s == 100.0
    with pytest.raises(SystemExit):
        build_parser().parse_args(["crawl", "run", "http://127.0.81.3/",
                                   "--default-delay-ms", "86400001"])
    assert "must be a whole number from 0 to 86,400,000" in capsys.readouterr().err
    config = tmp_path / "polite.toml"
    config.write_text("default_delay_ms = 100000\n")
    assert settings_from(argparse.Namespace(config=str(config))).default_delay_s == 100.0
    config.write_text("default_delay_ms = 86400001\n")
    with pytest.raises(ConfigError, match="default_delay_ms 86400001: must be a whole number "
                                          "from 0 to 86,400,000"):
        settings_from(argparse.Namespace(config=str(config)))
