"""Every setting is declared once, in polite.config, and every surface is made from or checked
against that declaration: the command line's parsers, the config files, Scrapy's POLITE_*
settings, the library's keyword arguments and the reference table in the docs. A surface that
drifts from its declaration fails here; so does a bad value that a surface lets through."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import math
from pathlib import Path

import pytest

from polite.cli import build_parser
from polite.cli.common import command_tree
from polite.config import (
    CRAWL,
    DROPINS,
    PRODUCTS,
    SCRAPY,
    SERVE,
    Product,
    Setting,
    read_config,
    scrapy_values,
    settings_table,
)
from polite.core._documents import read_toml_config
from polite.core.robots import MAX_ROBOTS_BYTES, Dialect
from polite.core.sitemaps.model import MAX_SITEMAP_BYTES
from polite.core.usage.vocab import PURPOSES
from polite.errors import SettingError
from polite.integrations import LoopGate
from polite.serve import Settings

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference" / "settings.md"


# One parser for the whole module, built when first asked (a parse leaves its parser as it
# was; each build took 8 to 16 ms of CPU, for hundreds of cases): the command line as
# main() parses it (its commands filled as they are used), and the whole tree filled.
LAZY = functools.cache(lambda: build_parser(lazy=True))
TREE = functools.cache(lambda: list(command_tree(build_parser())))


def _parser(path: tuple[str, ...]) -> argparse.ArgumentParser:
    return dict(TREE())[path]


COMMANDS = [pytest.param(p, id=p.name) for p in PRODUCTS if p.command]


# -- drift: each surface against the declarations ---------------------------------------------


@pytest.mark.parametrize("product", COMMANDS)
def test_each_command_has_exactly_its_declared_options(product: Product) -> None:
    parser = _parser(product.command)
    shown = {option for action in parser._actions if action.help != argparse.SUPPRESS
             and action.option_strings for option in action.option_strings} - {"-h", "--help"}
    declared = {option for s in product.on("cli") if not s.positional
                for option in s.options}
    assert shown == declared
    positional = [a.dest for a in parser._actions if not a.option_strings
                  and not isinstance(a, argparse._SubParsersAction)]  # polite demo's commands
    assert positional == [s.name for s in product.on("cli") if s.positional]
    for setting in product.on("cli"):
        for old in setting.old:  # a former spelling: hidden, into the same setting
            action = parser._option_string_actions[old]
            assert action.help == argparse.SUPPRESS and action.dest == setting.name


def test_every_option_of_every_command_is_declared() -> None:
    """Walks the whole command line: each option and argument of each command, hidden former
    spellings included, comes from a declaration. Left out: -h/--help (argparse's own, on
    every parser) and --version (the top's); a command group with nothing of its own (polite
    robots) needs no declaration."""
    declared = {p.command: p for p in PRODUCTS if p.command}
    walked = TREE()
    for path, parser in walked:
        options = {option for action in parser._actions for option in action.option_strings
                   } - {"-h", "--help"} - ({"--version"} if path == () else set())
        arguments = [a.dest for a in parser._actions if not a.option_strings
                     and not isinstance(a, argparse._SubParsersAction)]
        product = declared.get(path)
        if product is None:
            assert not options and not arguments, f"polite {' '.join(path)}: undeclared"
            continue
        settings = product.on("cli")
        assert options == {option for s in settings if not s.positional
                           for option in (*s.options, *s.old)}, product.name
        assert arguments == [s.name for s in settings if s.positional], product.name
    assert set(declared) <= {path for path, _ in walked}  # no declaration without its command


@pytest.mark.parametrize("product", COMMANDS)
def test_each_option_parses_into_its_setting(product: Product) -> None:
    parser = _parser(product.command)
    for setting in product.on("cli"):
        if setting.positional:
            continue
        action = parser._option_string_actions[setting.flag]
        assert action.dest == setting.name
        if setting.choices:
            assert tuple(action.choices or ()) == setting.choices
        if setting.numeric:
            assert action.type is not None
            assert action.type.bounds == setting.bounds  # type: ignore[attr-defined]


def test_the_reference_table_is_the_generated_one() -> None:
    """docs/reference/settings.md is settings_table()'s output: regenerate it with
    ``python -c 'from polite.config import settings_table; print(settings_table())'``."""
    assert REFERENCE.read_text("utf-8") == settings_table() + "\n"


def test_the_table_lists_every_setting_of_every_surface() -> None:
    table = settings_table()
    for product in PRODUCTS:
        section = table.split(f"## {product.name}\n", 1)[1].split("\n## ", 1)[0]
        rows = [line for line in section.splitlines() if line.startswith("| `")]
        assert len(rows) == len(product.settings), product.name
        for setting, row in zip(product.settings, rows, strict=True):
            assert row.startswith(f"| `{setting.name}` |")
            if product.command and not setting.positional and setting.cli:
                assert f"`{setting.flag}`" in row
            if setting.scrapy:
                assert f"`{setting.scrapy}`" in row
            for old in setting.old if product.command else ():
                assert f"`{old}`" in row


def test_serve_settings_are_the_declared_ones() -> None:
    declared = {s.name: s for s in SERVE.on("config")}
    assert {f.name for f in dataclasses.fields(Settings)} == {*declared, "delays_s"}
    made = Settings()
    for name, setting in declared.items():
        default = [] if setting.kind is list and setting.default is None else setting.default
        assert getattr(made, name) == default, name


def test_crawl_settings_keywords_are_the_declared_ones() -> None:
    from polite.crawl import CrawlSettings

    made = CrawlSettings()
    fields = {f.name for f in dataclasses.fields(CrawlSettings)}
    keywords = {s.name: s for s in CRAWL.on("keyword") if s.name in fields}
    assert fields - set(keywords) == {"languages"}  # a tuple; the command line splits it
    for name, setting in keywords.items():
        assert getattr(made, name) == setting.default, name


def test_the_drop_ins_keywords_are_the_declared_ones() -> None:
    parameters = inspect.signature(LoopGate).parameters
    for setting in DROPINS.on("keyword"):
        if setting.name in ("sign_with", "signature_agent"):  # the adapters' own keywords
            continue
        assert parameters[setting.name].default == setting.default, setting.name
    for field in dataclasses.fields(SCRAPY):
        assert getattr(SCRAPY, field.name) == DROPINS[field.name].scrapy


def test_the_declarations_repeat_the_librarys_constants_faithfully() -> None:
    assert DROPINS["purpose"].choices == PURPOSES
    assert SERVE["max_robots_bytes"].default == MAX_ROBOTS_BYTES
    assert _setting("sitemap parse", "max_sitemap_bytes").default == MAX_SITEMAP_BYTES
    assert DROPINS["dialect"].choices == ("auto", *(d.value for d in Dialect))


def _setting(product: str, name: str) -> Setting:
    return next(p for p in PRODUCTS if p.name == product)[name]


# -- bad values: refused on every surface, naming that surface's knob --------------------------


def _bad(setting: Setting) -> list[object]:
    """NaN, the infinities, a negative, zero where it means nothing, a wrong unit; a choice
    that is not one."""
    if setting.choices and setting.kind is str:
        return ["nope"]
    if not setting.numeric or setting.bounds is None:
        return []
    # 1e308 is finite and was taken as a delay (a crawl that then fetched nothing), as a
    # cache size (an OverflowError) and as a factor (a request that never returned); a
    # whole number too large for a float raised OverflowError where it was checked.
    bad: list[object] = [math.nan, math.inf, -math.inf, 1e308, -1.0]
    if setting.kind is int:
        bad.append(10 ** 400)
    low = setting.bounds.minimum
    if low is not None:
        bad.append(low - 1 if setting.bounds.minimum_inclusive else low)
        if low > 0 or not setting.bounds.minimum_inclusive:
            bad.append(0)
    if setting.bounds.maximum is not None:
        bad.append(setting.bounds.maximum + 1)
    if setting.unit == "s":
        bad.append("250ms")
    elif setting.unit == "bytes":
        bad.append("10MiB")
    return list(dict.fromkeys(bad))


def _text(value: object) -> str:
    return repr(value) if isinstance(value, float) and math.isfinite(value) else str(value)


CASES = [pytest.param(product, surface, setting, value,
                      id=f"{product.name}|{surface}|{setting.name}|{value}")
         for product in PRODUCTS for surface in product.surfaces
         for setting in product.on(surface) if not setting.positional
         for value in _bad(setting)]


def test_every_number_of_every_surface_has_a_finite_upper_bound() -> None:
    numbers = [s for p in PRODUCTS for s in p.settings if s.numeric]
    assert len(numbers) > 30
    for setting in numbers:
        assert setting.bounds is not None and setting.bounds.maximum is not None, setting.name
        assert math.isfinite(setting.bounds.maximum)
    with pytest.raises(TypeError, match="a maximum"):
        Setting("unbounded_s", float, 1.0, "no upper bound", unit="s")


def test_every_delay_and_timeout_is_a_day_at_most() -> None:
    """What PUT /delays has always refused beyond (86,400,000 ms) no surface takes."""
    durations = [s for p in PRODUCTS for s in p.settings if s.unit == "s"
                 and s.name != "cache_keep_no_store_s"]
    assert {s.name for s in durations} >= {"default_delay_s", "max_crawl_delay_s",
                                           "max_wait_s", "connect_timeout_s",
                                           "read_timeout_s", "lease_s"}
    for setting in durations:
        assert setting.bounds is not None and setting.bounds.maximum == 86_400, setting.name


def test_the_cases_cover_every_surface() -> None:
    surfaces = {case.values[1] for case in CASES}
    assert surfaces == {"cli", "config", "scrapy", "keyword"}  # env takes no number
    assert len(CASES) > 300


@pytest.mark.parametrize(("product", "surface", "setting", "value"), CASES)
def test_a_bad_value_is_refused_naming_the_knob(
        product: Product, surface: str, setting: Setting, value: object, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    if surface == "cli":
        text = str(value)
        with pytest.raises(SystemExit) as exited:
            LAZY().parse_args([*product.command, f"{setting.flag}={text}"])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        named = err.split("argument ", 1)[1].split(":", 1)[0]  # -k/--k, --agent/-a, --port
        assert setting.flag in named.split("/")
        assert "must be" in err or "invalid choice" in err
        return
    if surface == "config":
        config = tmp_path / "polite.toml"
        literal = {math.inf: "inf", -math.inf: "-inf"}.get(value) \
            if isinstance(value, float) else None
        if isinstance(value, float) and math.isnan(value):
            literal = "nan"
        config.write_text(f"{setting.name} = {literal or _toml(value)}\n")
        with pytest.raises(SettingError) as refused:
            read_config(str(config), product, read=read_toml_config)
        assert refused.value.knob == f"--config {config}: {setting.name}"
        return
    if surface == "scrapy":
        for given in (value, str(value)):  # as settings.py and as -s NAME=VALUE give it
            with pytest.raises(SettingError) as refused:
                scrapy_values({setting.scrapy: given}.get)
            assert refused.value.knob == setting.scrapy
        return
    assert surface == "keyword"
    with pytest.raises(SettingError) as refused:
        _keyword(product, setting.name, value)
    assert refused.value.knob == f"{setting.name}="


def _toml(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def _keyword(product: Product, name: str, value: object) -> None:
    if product is DROPINS:
        if name in ("sign_with", "signature_agent", "store", "service_url", "allow_private",
                    "agent", "refuse_by_purpose"):
            pytest.skip("not a number or a choice")
        LoopGate(**{name: value})
        return
    from polite.crawl import CrawlSettings

    if name not in {f.name for f in dataclasses.fields(CrawlSettings)}:
        _open_crawler(name, value)
        return
    CrawlSettings(**{name: value})


def _open_crawler(name: str, value: object) -> None:
    import asyncio
    import tempfile

    from polite.crawl import open_crawler

    async def open_it() -> None:
        with tempfile.TemporaryDirectory() as folder:
            async with open_crawler(Path(folder) / "out", **{name: value}):
                pass

    asyncio.run(open_it())
