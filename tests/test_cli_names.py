"""One naming scheme on every command: durations in seconds named -s, byte caps named for what
they cap, --agent/-a for the product token; the former spellings still read, each with one
line on standard error naming the new one; config files for serve, crawl and survey, read
through the same declarations as the flags."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from polite.cli import build_parser, main
from polite.cli.common import resolve
from polite.config import CRAWL, PRODUCTS, SURVEY
from polite.errors import ConfigError, SettingError
from polite.serve import Settings, run_server, settings_from

# what each command needs besides the option
NEEDED = {"robots check": ["f", "/", "-a", "X"], "robots lint": ["f"],
          "robots explain": ["f", "/", "-a", "X"], "robots diff": ["a", "b"],
          "sitemap parse": ["f"], "sitemap tree": ["https://e.example"], "ulinks": ["f"]}
FORMER = [pytest.param(product, setting, old, id=f"{product.name} {old}")
          for product in PRODUCTS if product.command for setting in product.on("cli")
          for old in setting.old]


def test_the_former_spellings_are_all_found() -> None:
    olds = {values[2] for values in (case.values for case in FORMER)}
    assert olds == {"--default-delay-ms", "--delay-ms", "--delay", "--max-bytes",
                    "--connect-timeout", "--read-timeout", "--origin-timeout-s"}


@pytest.mark.parametrize(("product", "setting", "old"), FORMER)
def test_a_former_spelling_reads_as_the_new_one_and_says_so(
        product: object, setting: object, old: str, capsys: pytest.CaptureFixture[str]) -> None:
    from polite.config import Product, Setting

    assert isinstance(product, Product) and isinstance(setting, Setting)
    # a fraction where the former spelling took one (survey's --delay, in seconds too)
    fraction = setting.kind is float and setting.old_per == 1
    given = "3.5" if fraction else str(3 * setting.old_per)
    parser = build_parser()
    command = [*product.command, *NEEDED.get(product.name, [])]
    before = parser.parse_args([*command, old, given])
    said = capsys.readouterr().err
    assert said == f"polite: {old} is deprecated; use {setting.flag}\n"
    now = parser.parse_args([*command, setting.flag, "3.5" if fraction else "3"])
    assert capsys.readouterr().err == ""
    assert getattr(before, setting.name) == getattr(now, setting.name) \
        == (3.5 if fraction else 3)


@pytest.mark.parametrize("value", ["250ms", "1s", "1.5 s", "nan"])
def test_a_duration_in_another_unit_is_refused(value: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["crawl"], ["serve"], ["survey"], ["sitemap", "tree"], ["ulinks"]):
        with pytest.raises(SystemExit) as exited:
            main([*command, f"--default-delay-s={value}"])
        assert exited.value.code == 2
        assert ("argument --default-delay-s: must be a finite number from 0 to 86,400 "
                f"(seconds), not {value!r}") in capsys.readouterr().err


def test_every_command_that_reads_robots_txt_for_a_token_takes_a() -> None:
    parser = build_parser()
    for argv in (["robots", "check", "f", "/"], ["robots", "explain", "f", "/"],
                 ["robots", "diff", "a", "b"], ["sitemap", "tree", "https://e.example"],
                 ["sitemap", "parse", "f"], ["ulinks", "f"], ["crawl", "--out", "o"],
                 ["survey", "--out", "o"], ["serve"], ["report", "d"]):
        args = parser.parse_args([*argv, "-a", "TestBot"])
        got = getattr(args, "agent", None) or getattr(args, "agents", None)
        assert got in ("TestBot", ["TestBot"]), argv


def test_every_byte_cap_names_what_it_caps() -> None:
    parser = build_parser()
    assert parser.parse_args(["crawl", "--max-body-bytes", "9"]).max_body_bytes == 9
    assert parser.parse_args(["serve", "--max-robots-bytes", "9"]).max_robots_bytes == 9
    assert parser.parse_args(["robots", "lint", "f", "--max-robots-bytes", "9"]
                             ).max_robots_bytes == 9
    assert parser.parse_args(["sitemap", "parse", "f", "--max-sitemap-bytes", "9"]
                             ).max_sitemap_bytes == 9


def test_a_sitemap_over_its_cap_is_read_that_far(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    sitemap = tmp_path / "sitemap.txt"
    sitemap.write_text("".join(f"https://e.example/page{n}\n" for n in range(100)))
    assert main(["sitemap", "parse", str(sitemap), "--max-sitemap-bytes", "100"]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert 0 < len(printed) < 10


# -- config files: the flags' declarations, read from TOML -------------------------------------


def _crawl_args(tmp_path: Path, toml: str, *argv: str) -> argparse.Namespace:
    config = tmp_path / "crawl.toml"
    config.write_text(toml)
    args = build_parser().parse_args(["crawl", "--config", str(config), *argv])
    resolve(CRAWL, args)
    return args


def test_crawl_reads_its_config_file_and_a_flag_overrides_it(tmp_path: Path) -> None:
    args = _crawl_args(tmp_path, 'out = "o"\ndefault_delay_s = 2.5\nmax_pages = 7\n'
                                 'allow_network = ["10.0.0.0/8"]\n', "--max-pages", "3")
    assert (args.out, args.default_delay_s, args.max_pages, args.allow_network) \
        == ("o", 2.5, 3, ["10.0.0.0/8"])
    assert (args.scope, args.sitemaps, args.max_body_bytes) == ("host", True, 10 * 1024 * 1024)


def test_a_former_config_key_is_read_and_said(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    args = _crawl_args(tmp_path, "default_delay_ms = 1500\nmax_bytes = 99\n")
    assert (args.default_delay_s, args.max_body_bytes) == (1.5, 99)
    err = capsys.readouterr().err
    assert "default_delay_ms is deprecated; use default_delay_s" in err
    assert "max_bytes is deprecated; use max_body_bytes" in err


@pytest.mark.parametrize(("toml", "knob"), [
    ("max_pages = 0\n", "max_pages 0: must be a whole number from 1 to 1,000,000,000"),
    ("lease_s = nan\n", "lease_s nan: must be a finite number above 0, at most 86,400 (seconds)"),
    ('default_delay_s = "250ms"\n', "default_delay_s '250ms': must be a finite number"),
    ('scope = "planet"\n', "scope 'planet': one of host, site, any"),
    ("json = true\n", "unknown setting 'json'"),
])
def test_a_bad_crawl_config_is_refused_naming_the_key(tmp_path: Path, toml: str,
                                                      knob: str) -> None:
    with pytest.raises(ConfigError, match="--config .*crawl.toml: " + knob.replace("(", r"\(")
                       .replace(")", r"\)")):
        _crawl_args(tmp_path, toml)


def test_crawl_refuses_a_bad_config_before_fetching(tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text(f'out = "{tmp_path / "out"}"\nmax_pages = -1\n')
    assert main(["crawl", "http://127.0.0.1:9/", "--config", str(config)]) == 2
    assert not (tmp_path / "out").exists()


def test_survey_runs_from_its_config_file(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    robots = tmp_path / "robots"
    robots.mkdir()
    (robots / "a.example.txt").write_text("User-agent: *\nDisallow: /x\n")
    config = tmp_path / "survey.toml"
    config.write_text(f'robots_dir = "{robots}"\nout = "{tmp_path / "out"}"\n')
    assert main(["survey", "--config", str(config)]) == 0
    assert "1 site recorded" in capsys.readouterr().out
    assert (tmp_path / "out" / "survey.sqlite").is_file()
    args = build_parser().parse_args(["survey", "--config", str(config), "--n0", "5"])
    resolve(SURVEY, args)
    assert (args.n0, args.alpha, args.default_delay_s) == (5, 0.1, 1.0)


def test_survey_refuses_a_store_it_cannot_share(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    domains = tmp_path / "domains.txt"
    domains.write_text("a.example\n")
    for store in ("memory://", f"sqlite:///{tmp_path / 's.sqlite'}"):
        assert main(["survey", str(domains), "--out", str(tmp_path / "o"), "--store",
                     store]) == 2
        assert f"--store {store}: a shared survey needs redis://" in capsys.readouterr().err


# -- polite serve: a settings object, from the flags, the environment and the file ------------


def test_serve_takes_its_admin_token_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLITE_ADMIN_TOKEN", "from-env")
    assert settings_from(argparse.Namespace()).admin_token == "from-env"
    given = build_parser().parse_args(["serve", "--admin-token", "from-flag"])
    assert settings_from(given).admin_token == "from-flag"


def test_serve_runs_from_a_settings_object() -> None:
    """run_server takes Settings, as a library caller builds them; the check it makes before
    anything is opened names the option."""
    assert "POLITE_ADMIN_TOKEN" not in os.environ
    with open(os.devnull, "w") as out, \
            pytest.raises(ConfigError, match=r"--host 0\.0\.0\.0 is not loopback"):
        run_server(Settings(host="0.0.0.0", store="memory://"), out)


def test_serve_reads_a_former_config_key(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "polite.toml"
    config.write_text("default_delay_ms = 700\nmax_bytes = 1000\n")
    settings = settings_from(argparse.Namespace(config=str(config)))
    assert (settings.default_delay_s, settings.max_robots_bytes) == (0.7, 1000)
    assert "default_delay_ms is deprecated; use default_delay_s" in capsys.readouterr().err


def test_a_setting_error_is_a_config_error() -> None:
    assert issubclass(SettingError, ConfigError)
