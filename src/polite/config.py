"""What a setting's value may be, checked the same way on every surface that reads it: the
command line's flags, ``polite serve``'s config file, Scrapy's ``POLITE_*`` settings and the
library's keyword arguments.

Every check names the setting as its caller's surface spells it (a *knob*:
``--adaptive-factor``, ``POLITE_ADAPTIVE_FACTOR``, ``adaptive_factor=``), so that an error
tells the user what to change where they set it. A leaf module: nothing from polite but
:mod:`polite.errors`.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from polite.errors import SettingError

__all__ = [
    "CA_EXPORT",
    "COMPLETION",
    "COUNT",
    "CRAWL",
    "CRAWL_MERGE",
    "CRAWL_STATUS",
    "DAY_S",
    "DELAY",
    "DEMO",
    "DEMO_REGP_SITE",
    "DROPINS",
    "FACTOR",
    "FLAGS",
    "FRACTION",
    "FRONTIER_SERVE",
    "FRONTIER_STATUS",
    "KEYS_DIRECTORY",
    "KEYS_NEW",
    "KEYWORDS",
    "MCP",
    "PORT",
    "PRODUCTS",
    "REPORT",
    "ROBOTS_CHECK",
    "ROBOTS_DIFF",
    "ROBOTS_EXPLAIN",
    "ROBOTS_LINT",
    "ROBOTS_MEMORY_MB",
    "SCRAPY",
    "SERVE",
    "SERVE_NUMBERS",
    "SITEMAP_PARSE",
    "SITEMAP_TREE",
    "SITE_IMPORT",
    "SITE_PRUNE",
    "SITE_RANGES_UPDATE",
    "SITE_SERVE",
    "SIZE",
    "SURFACES",
    "SURVEY",
    "TIMEOUT",
    "ULINKS",
    "Bounds",
    "FloatFlag",
    "HeaderFlag",
    "IntFlag",
    "Knobs",
    "Product",
    "Setting",
    "check_float",
    "check_header_text",
    "check_int",
    "check_setting",
    "default_shown",
    "from_environment",
    "parse_float",
    "parse_int",
    "read_config",
    "scrapy_values",
    "settings_table",
]


def _shown(bound: float, *, grouped: bool = True) -> str:
    """A number as people read it: thousands grouped (``50,000``) unless ``grouped`` is
    off (a port: ``8080``)."""
    if float(bound).is_integer():
        return f"{int(bound):,}" if grouped else str(int(bound))
    return f"{bound:g}"


@dataclass(frozen=True, slots=True)
class Bounds:
    """The range of a numeric setting. Every bound is finite: NaN and the infinities are
    never a setting's value (NaN compares false with everything, so a NaN delay or factor
    slips through every ``<`` and turns politeness off)."""

    minimum: float | None = None
    minimum_inclusive: bool = True  # False: above ``minimum`` (0 cannot work, e.g. a timeout)
    maximum: float | None = None
    grouped: bool = True  # thousands shown grouped; off for a number that is a name (a port)

    def admits(self, number: float) -> bool:
        """Is ``number`` finite and within the bounds? (A whole number too large for a
        float is compared as it is: ``math.isfinite`` raises on it.)"""
        if isinstance(number, float) and not math.isfinite(number):
            return False
        if self.minimum is not None and (number < self.minimum or (
                not self.minimum_inclusive and number == self.minimum)):
            return False
        return self.maximum is None or number <= self.maximum

    def scaled(self, per: int) -> Bounds:
        """The bounds in a unit ``per`` of which make this one's (milliseconds: 1000)."""
        return Bounds(None if self.minimum is None else self.minimum * per,
                      self.minimum_inclusive,
                      None if self.maximum is None else self.maximum * per,
                      grouped=self.grouped)

    def describe(self, *, whole: bool) -> str:
        """``a whole number of 1 or more``, ``a finite number above 0``, ..."""
        kind = "a whole number" if whole else "a finite number"
        low, high = self.minimum, self.maximum
        grouped = self.grouped
        if low is not None and high is not None and self.minimum_inclusive:
            return (f"{kind} from {_shown(low, grouped=grouped)} to "
                    f"{_shown(high, grouped=grouped)}")
        if low is not None and high is not None:
            return (f"{kind} above {_shown(low, grouped=grouped)}, at most "
                    f"{_shown(high, grouped=grouped)}")
        parts = []
        if low is not None:
            parts.append(f"of {_shown(low, grouped=grouped)} or more"
                         if self.minimum_inclusive else f"above {_shown(low, grouped=grouped)}")
        if high is not None:
            parts.append(f"of {_shown(high, grouped=grouped)} at most")
        return " ".join([kind, *parts])


FRACTION = Bounds(minimum=0, maximum=1)
PORT = Bounds(minimum=0, maximum=65_535, grouped=False)  # 0: any free port

# Every setting's number also has a finite upper bound (a Setting without one is refused when
# it is declared): 1e308 seconds is finite, but a crawl told to wait that long fetches
# nothing and says nothing, and a delay made milliseconds overflows.
DAY_S = 86_400
DELAY = Bounds(minimum=0, maximum=DAY_S)  # a delay: none to a day, as PUT /delays takes
TIMEOUT = Bounds(minimum=0, minimum_inclusive=False, maximum=DAY_S)  # a timeout, a lease
FACTOR = Bounds(minimum=0, maximum=100)  # the adaptive delay's factor: 0 turns it off
GIB = 1 << 30
SIZE = Bounds(minimum=1, maximum=GIB)  # a byte cap
MANY = 1_000_000_000  # a count nothing runs out of before it is reached
COUNT = Bounds(minimum=1, maximum=MANY)  # a budget of pages, URIs, files
ULINKS_K = Bounds(minimum=1, maximum=10_000)  # ulinks asked for


UNITS = {"s": "seconds", "bytes": "bytes", "MiB": "MiB", "USD": "US dollars"}


def _must(bounds: Bounds, *, whole: bool, unit: str) -> str:
    said = UNITS.get(unit, unit)
    return f"must be {bounds.describe(whole=whole)}" + (f" ({said})" if said else "")


def check_float(value: object, bounds: Bounds, *, knob: str, unit: str = "") -> float:
    """``value`` (an int or a float, not a bool) as a float within ``bounds``, else a
    :class:`SettingError` naming ``knob``."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not bounds.admits(value):
        raise SettingError(knob, value, _must(bounds, whole=False, unit=unit))
    return float(value)


def check_int(value: object, bounds: Bounds, *, knob: str, unit: str = "") -> int:
    """``value`` (an int, not a bool) within ``bounds``, else a :class:`SettingError`."""
    if isinstance(value, bool) or not isinstance(value, int) or not bounds.admits(value):
        raise SettingError(knob, value, _must(bounds, whole=True, unit=unit))
    return value


def parse_float(text: str, bounds: Bounds, *, knob: str, unit: str = "") -> float:
    """:func:`check_float` for a value written as text (``1e400`` reads as infinity, and is
    refused as one; ``250ms`` for a number of seconds is refused as not a number)."""
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not bounds.admits(number):
        raise SettingError(knob, text, _must(bounds, whole=False, unit=unit))
    return number


def parse_int(text: str, bounds: Bounds, *, knob: str, unit: str = "") -> int:
    """:func:`check_int` for a value written as text."""
    try:
        number = int(text)
    except ValueError:
        raise SettingError(knob, text, _must(bounds, whole=True, unit=unit)) from None
    if not bounds.admits(number):
        raise SettingError(knob, text, _must(bounds, whole=True, unit=unit))
    return number


def check_header_text(value: str, *, knob: str) -> str:
    """``value`` as a header field takes it (a User-Agent, a product token), else a
    :class:`SettingError`: a site must not receive an empty field, nor one that control
    characters end early or split (RFC 9110, 5.5)."""
    if not value.strip():
        raise SettingError(knob, value, "must not be empty or only spaces")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value):
        raise SettingError(knob, value, "must not hold control characters")
    return value


@dataclass(frozen=True, slots=True)
class HeaderFlag:
    """An argparse ``type=`` for text sent in a header field (:func:`check_header_text`)."""

    def __call__(self, text: str) -> str:
        try:
            return check_header_text(text, knob="")
        except SettingError as exc:
            raise _refused(exc) from None


def _refused(error: SettingError) -> argparse.ArgumentTypeError:
    # argparse puts "argument --FLAG: " before this and exits with status 2.
    return argparse.ArgumentTypeError(f"{error.problem}, not {error.value!r}")


@dataclass(frozen=True, slots=True)
class FloatFlag:
    """An argparse ``type=`` for a number within ``bounds``. ``per``: a former spelling's
    unit (``--default-delay-ms``: 1000 a second), whose number is checked as given and then
    divided; ``whole``: that number must be whole."""

    bounds: Bounds
    unit: str = ""
    per: int = 1
    whole: bool = False

    def __call__(self, text: str) -> float:
        try:
            if self.whole:
                return parse_int(text, self.bounds, knob="") / self.per
            return parse_float(text, self.bounds, knob="",
                               unit=self.unit if self.per == 1 else "") / self.per
        except SettingError as exc:
            raise _refused(exc) from None


@dataclass(frozen=True, slots=True)
class IntFlag:
    """An argparse ``type=`` for a whole number within ``bounds``."""

    bounds: Bounds
    unit: str = ""

    def __call__(self, text: str) -> int:
        try:
            return parse_int(text, self.bounds, knob="", unit=self.unit)
        except SettingError as exc:
            raise _refused(exc) from None


def check_setting(value: object, flag: IntFlag | FloatFlag, *, knob: str) -> float:
    """A value given as itself (a config file's, a keyword's) checked as ``flag`` checks
    the command line's text."""
    if isinstance(flag, IntFlag):
        return check_int(value, flag.bounds, knob=knob)
    return check_float(value, flag.bounds, knob=knob)


@dataclass(frozen=True, slots=True)
class Knobs:
    """How a surface spells the settings that library code names in its errors: a store
    URL refused, a private address refused (what to set to allow it), a number out of
    range. The defaults are the library's keyword arguments."""

    store: str = "store="
    service_url: str = "service_url="
    allow_private: str = "allow_private=True"
    default_delay_s: str = "default_delay_s="
    adaptive_factor: str = "adaptive_factor="
    max_wait_s: str = "max_wait_s="
    purpose: str = "purpose="
    sign_with: str = "sign_with="
    signature_agent: str = "signature_agent="
    dialect: str = "dialect="
    max_crawl_delay_s: str = "max_crawl_delay_s="


KEYWORDS = Knobs()
# The command line checks its numbers where it parses them (FloatFlag, IntFlag).
FLAGS = Knobs(store="--store", allow_private="--allow-private", sign_with="--sign-with",
              signature_agent="--signature-agent")


# -- every setting, declared once --------------------------------------------------------------
#
# A setting is declared once: its name (the config file's key and the library's keyword),
# its type and unit, its default, its bounds and one line of help. The command line's
# options, the config files' keys, the environment variables, Scrapy's POLITE_* settings
# and the reference table of the docs are all made from these declarations, and every
# surface checks a value through the same Setting.
#
# The naming scheme: a duration is in seconds and its name ends in _s (--lease-s); a byte
# cap names what it caps and ends in _bytes (--max-robots-bytes); a robots.txt product token
# is --agent / -a and the User-Agent header --user-agent.

SURFACES = ("cli", "config", "env", "scrapy", "keyword")


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting as every surface spells and checks it."""

    name: str  # the config file's key and the library's keyword: max_robots_bytes
    kind: type  # bool, int, float, str or list (of str)
    default: object  # in the setting's unit; None: not set
    help: str  # one line, in the user's words
    unit: str = ""  # "s", "bytes", "MiB", "USD": what a number counts
    bounds: Bounds | None = None
    choices: tuple[str, ...] = ()
    short: str = ""  # -a
    short_first: bool = False  # the short option leads (-k/--k), as errors have named it
    old: tuple[str, ...] = ()  # former flags, read with a deprecation warning
    old_keys: tuple[str, ...] = ()  # former config-file keys, likewise
    old_per: int = 1  # an old spelling's unit: this many make the setting's (ms: 1000 a s)
    metavar: str = ""
    negate: bool = False  # a switch on by default: its flag is --no-NAME
    env: str = ""  # an environment variable read when neither the flag nor the file sets it
    scrapy: str = ""  # Scrapy's setting
    keyword: bool = False  # a keyword argument of the library (the drop-ins, the crawler)
    config: bool = True  # a key of the product's config file, when it has one
    cli: bool = True  # an option of the product's command, when it has one
    positional: bool = False  # the command line's argument, not an option
    nargs: str | None = None
    required: bool = False
    header: bool = False  # text sent in a header field (User-Agent): see check_header_text

    def __post_init__(self) -> None:
        if self.numeric and (self.bounds is None or self.bounds.maximum is None):
            raise TypeError(f"setting {self.name}: a number needs bounds with a maximum")

    @property
    def flag(self) -> str:
        """The command line's option: ``--max-robots-bytes`` (``--no-cache`` for a switch
        on by default)."""
        name = self.name.replace("_", "-")
        return f"--no-{name}" if self.negate else f"--{name}"

    @property
    def options(self) -> tuple[str, ...]:
        """Every option string of the command line: the flag, the short one, and --no-NAME
        of a switch with no default (``--progress`` / ``--no-progress``)."""
        found = [self.flag, *([self.short] if self.short else [])]
        if self.short_first:
            found.reverse()
        if self.kind is bool and self.default is None:
            found.append(f"--no-{self.name.replace('_', '-')}")
        return tuple(found)

    @property
    def numeric(self) -> bool:
        return self.kind in (int, float)

    def knob(self, surface: str, *, where: str = "") -> str:
        """How ``surface`` spells this setting, as an error names it."""
        if surface == "cli":
            return self.flag
        if surface == "config":
            return f"--config {where}: {self.name}" if where else self.name
        if surface == "env":
            return self.env
        if surface == "scrapy":
            return self.scrapy
        return f"{self.name}="

    def flag_type(self, per: int = 1) -> IntFlag | FloatFlag | None:
        """The argparse ``type=`` of a number (``per``: an old spelling's unit, of which
        this many make the setting's, its number whole)."""
        bounds = (self.bounds or Bounds()).scaled(per)
        if self.kind is int and per == 1:
            return IntFlag(bounds, unit=self.unit)
        if self.numeric:
            return FloatFlag(bounds, unit=self.unit, per=per,
                             whole=self.kind is int or per != 1)
        return None

    def check(self, value: object, knob: str) -> object:
        """``value`` as the library takes it, else a :class:`SettingError` naming ``knob``:
        numbers finite and within bounds, a choice among the choices, text as text."""
        if value is None and self.default is None:
            return None
        if self.kind is float:
            return check_float(value, self.bounds or Bounds(), knob=knob, unit=self.unit)
        if self.kind is int:
            return check_int(value, self.bounds or Bounds(), knob=knob, unit=self.unit)
        if self.kind is bool:
            if not isinstance(value, bool):
                raise SettingError(knob, value, "must be true or false")
            return value
        if self.kind is list:
            if not isinstance(value, list | tuple) or not all(
                    isinstance(item, str) for item in value):
                raise SettingError(knob, value, "must be a list of text")
            return list(value)
        if not isinstance(value, str):
            raise SettingError(knob, value, "must be text")
        if self.header:
            return check_header_text(value, knob=knob)
        if self.choices and value not in self.choices:
            raise SettingError(knob, value, f"one of {', '.join(self.choices)}")
        return value

    def parse(self, text: str, knob: str) -> object:
        """A value written as text (an environment variable, Scrapy's ``-s NAME=VALUE``)."""
        if self.kind is float:
            return parse_float(text, self.bounds or Bounds(), knob=knob, unit=self.unit)
        if self.kind is int:
            return parse_int(text, self.bounds or Bounds(), knob=knob, unit=self.unit)
        if self.kind is bool:
            lowered = text.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off", ""):
                return False
            raise SettingError(knob, text, "must be true or false")
        if self.kind is list:
            return [item.strip() for item in text.split(",") if item.strip()]
        return self.check(text, knob)


@dataclass(frozen=True, slots=True)
class Product:
    """The settings of one command or library surface, in the order its help lists them."""

    name: str  # "serve", "crawl run", "drop-ins"
    settings: tuple[Setting, ...]
    command: tuple[str, ...] = ()  # its command line: ("robots", "check"); () for none
    config_file: bool = False  # takes --config FILE (TOML)
    library: str = ""  # what takes the keywords: "polite.crawl.CrawlSettings"

    def __getitem__(self, name: str) -> Setting:
        for setting in self.settings:
            if setting.name == name:
                return setting
        raise KeyError(name)

    @property
    def surfaces(self) -> tuple[str, ...]:
        found = []
        if self.command:
            found.append("cli")
        if self.config_file:
            found.append("config")
        if any(s.env for s in self.settings):
            found.append("env")
        if any(s.scrapy for s in self.settings):
            found.append("scrapy")
        if any(s.keyword for s in self.settings):
            found.append("keyword")
        return tuple(found)

    def on(self, surface: str) -> tuple[Setting, ...]:
        """The settings ``surface`` takes."""
        if surface == "cli":
            return tuple(s for s in self.settings if s.cli) if self.command else ()
        if surface == "config":
            return tuple(s for s in self.settings
                         if self.config_file and s.config and not s.positional)
        if surface == "env":
            return tuple(s for s in self.settings if s.env)
        if surface == "scrapy":
            return tuple(s for s in self.settings if s.scrapy)
        return tuple(s for s in self.settings if s.keyword)


# -- the declarations --------------------------------------------------------------------------
# Constants the library also defines are repeated here (this module imports nothing from
# polite but the errors); tests/test_settings_table.py checks that they agree.

PURPOSE_CHOICES = ("search", "train-ai", "ai-input", "train-genai", "ai-output")
SCOPES = ("host", "site", "any")
_ROBOTS_BYTES = 500 * 1024  # RFC 9309's least a crawler must read
_SITEMAP_BYTES = 52_428_800  # the sitemaps protocol's cap on one file, uncompressed

AGENT = Setting("agent", str, "polite", "the product token robots.txt is read for",
                short="-a", metavar="TOKEN", keyword=True)
USER_AGENT = Setting("user_agent", str, None, "the User-Agent header (default: the agent)",
                     metavar="TEXT", keyword=True, header=True)
ALLOW_PRIVATE = Setting("allow_private", bool, False,
                        "also fetch from private and loopback addresses",
                        scrapy="POLITE_ALLOW_PRIVATE", keyword=True)
ALLOW_NETWORK = Setting("allow_network", list, None,
                        "also fetch from the private addresses in NETWORK (10.1.0.0/16, or one "
                        "address; repeatable): the others stay refused", metavar="NETWORK",
                        old_keys=("allow_networks",))
DEFAULT_DELAY = Setting("default_delay_s", float, 1.0,
                        "spacing between two requests to a host when neither robots.txt nor "
                        "the store sets one", unit="s", bounds=DELAY,
                        old=("--default-delay-ms",), old_keys=("default_delay_ms",),
                        old_per=1000, scrapy="POLITE_DEFAULT_DELAY", keyword=True)
MAX_CRAWL_DELAY = Setting("max_crawl_delay_s", float, 60.0,
                          "robots.txt delays above this are read as this", unit="s",
                          bounds=DELAY, scrapy="POLITE_MAX_CRAWL_DELAY", keyword=True)
ADAPTIVE = Setting("adaptive_factor", float, 1.0,
                   "the least spacing is this many times a host's running response time "
                   "(0 turns it off)", bounds=FACTOR, scrapy="POLITE_ADAPTIVE_FACTOR",
                   keyword=True)
MAX_ROBOTS_BYTES_SETTING = Setting(
    "max_robots_bytes", int, _ROBOTS_BYTES,
    "read robots.txt up to this many bytes; what lies beyond is ignored, and said so",
    unit="bytes", bounds=SIZE, old=("--max-bytes",), old_keys=("max_bytes",))
# A parsed file is charged what it can hold at most (its matchers included), 1.2 to 3 times
# what it holds: 512 MiB so charged keeps the service well inside a 2 GiB machine.
ROBOTS_MEMORY_MB = 512.0
ROBOTS_MEMORY_SETTING = Setting(
    "robots_memory_mb", float, ROBOTS_MEMORY_MB,
    "parsed robots.txt files (and their matchers) kept in memory hold at most this much; "
    "least recently used go first, to be read again from the store when asked for",
    unit="MiB", bounds=Bounds(minimum=1, maximum=1024 * 1024))
MAX_SITEMAP_BYTES_SETTING = Setting(
    "max_sitemap_bytes", int, _SITEMAP_BYTES,
    "read each sitemap file up to this many bytes, decompressed", unit="bytes",
    bounds=SIZE)
STORE = Setting("store", str, None, "where politeness state is kept: memory://, "
                "sqlite:///PATH or redis://HOST:PORT/DB", metavar="URL",
                scrapy="POLITE_STORE", keyword=True)
PURPOSE = Setting("purpose", str, None, "what the requests are for: the URL's robots.txt "
                  "AI-usage preferences for it are applied", choices=PURPOSE_CHOICES,
                  scrapy="POLITE_PURPOSE", keyword=True)
SIGN_WITH = Setting("sign_with", str, None, "sign every request with this Ed25519 key (Web "
                    "Bot Auth; polite keys new); needs polite-web[identity]", metavar="KEY",
                    scrapy="POLITE_SIGN_WITH", keyword=True)
SIGNATURE_AGENT = Setting("signature_agent", str, None, "with --sign-with: the URL of the "
                          "key's directory, sent as Signature-Agent", metavar="URL",
                          scrapy="POLITE_SIGNATURE_AGENT", keyword=True)
JSON = Setting("json", bool, False, "print JSON", config=False)
CONFIG = Setting("config", str, None, "a TOML file with any of the settings below (keys as "
                 "the options, _ for -); an option given overrides it", metavar="FILE",
                 config=False)
DIALECT = Setting("dialect", str, "auto",
                  "how to read robots.txt: auto (regp for a file that says it is REGP, else "
                  "rfc9309); rfc9309: RFC 9309; google: as Googlebot reads it; koster1996: "
                  "the 1996 draft (Koster 1996); regp: the REGP dialect (Ge & Ding 2016)",
                  choices=("auto", "rfc9309", "google", "koster1996", "regp"), short="-d",
                  metavar="DIALECT", scrapy="POLITE_ROBOTS_DIALECT", keyword=True)
WORKER = Setting("worker", str, None, "this worker's name in a shared run (default "
                 "HOSTNAME-PID)", metavar="NAME")
LEASE = Setting("lease_s", float, 600.0, "how long a worker that stopped answering holds "
                "its work before others take it (renewed while it lives)", unit="s",
                bounds=TIMEOUT, keyword=True)
CONCURRENCY = Setting("concurrency", int, 64, "fetches in flight at most",
                      bounds=Bounds(minimum=1, maximum=10_000), keyword=True)
HOSTS = Setting("hosts", str, None, "resolve names from this hosts-format file only",
                metavar="FILE")
NAMESERVER = Setting("nameserver", str, None, "resolve names by asking this DNS server "
                     "(asynchronous, c-ares)", metavar="IP[:PORT]")
CONNECT_TIMEOUT = Setting("connect_timeout_s", float, 10.0, "a connection not made in this "
                          "long fails", unit="s", bounds=TIMEOUT, old=("--connect-timeout",))
READ_TIMEOUT = Setting("read_timeout_s", float, 30.0, "an answer silent this long fails",
                       unit="s", bounds=TIMEOUT, old=("--read-timeout",))
SITE = Setting("file", str, None, "a robots.txt file, - for standard input, or a site's URL "
               "(http:// or https://) to fetch its robots.txt", metavar="FILE|SITE",
               positional=True)
CHECK_URLS = Setting("urls", list, None, "URLs or paths (/a/b?q)", metavar="URL",
                     positional=True, nargs="+")


def _with(setting: Setting, **changes: object) -> Setting:
    """A shared setting as one product has it (another default, help or spelling)."""
    return replace(setting, **changes)  # type: ignore[arg-type]


# Every command that fetches from sites resolves names and times out the same way (the
# former spellings of the timeouts were the survey's alone).
NETWORK = (HOSTS, NAMESERVER, _with(CONNECT_TIMEOUT, old=()), _with(READ_TIMEOUT, old=()))

_SITE_PRIVATE = _with(ALLOW_PRIVATE, help="with a SITE: also fetch from private and loopback "
                      "addresses", scrapy="", keyword=False)
_CLI_ONLY = {"scrapy": "", "keyword": False, "env": ""}

ROBOTS_CHECK = Product("robots check", (
    SITE, CHECK_URLS,
    _with(AGENT, required=True, default=None, **_CLI_ONLY),
    _with(DIALECT, **_CLI_ONLY),
    Setting("ip", str, None, "the egress IP address (REGP Ip-allow / Ip-disallow)",
            metavar="IP"),
    _with(JSON, help="one JSON array of verdicts"),
    MAX_ROBOTS_BYTES_SETTING, _SITE_PRIVATE, *NETWORK), command=("robots", "check"))
ROBOTS_LINT = Product("robots lint", (
    SITE, _with(DIALECT, **_CLI_ONLY),
    _with(JSON, help="one JSON array of issues (with --lines, an object with the issues and "
                     "the lines)"),
    Setting("lines", bool, False, "also print every line's class: directive, unused, "
            "unknown, typo, missing-colon, too-long, invalid, brace, comment, blank"),
    Setting("content_type", str, None, "the Content-Type the file was served with (text/html "
            "is an error)", metavar="TYPE"),
    MAX_ROBOTS_BYTES_SETTING, _SITE_PRIVATE, *NETWORK), command=("robots", "lint"))
ROBOTS_EXPLAIN = Product("robots explain", (
    SITE, CHECK_URLS,
    _with(AGENT, kind=list, required=True, default=None,
          help="a crawler's name or product token (repeat for more)", **_CLI_ONLY),
    _with(DIALECT, kind=list, default=None, help="explain in these dialects only (repeat; "
          "auto, the default: rfc9309, google, koster1996, and regp for a REGP file)",
          **_CLI_ONLY),
    _with(PURPOSE, kind=list, help="show the AI-usage preferences for these purposes "
          "(repeat; default every purpose the file states a preference for)", **_CLI_ONLY),
    Setting("brief", bool, False, "the matrix only, no reasons"),
    _with(JSON, help="every cell as JSON"),
    _SITE_PRIVATE, MAX_ROBOTS_BYTES_SETTING, *NETWORK), command=("robots", "explain"))
ROBOTS_DIFF = Product("robots diff", (
    Setting("old", str, None, "the robots.txt before: a file, - or a site", metavar="OLD",
            positional=True),
    Setting("new", str, None, "the robots.txt after: a file, - or a site", metavar="NEW",
            positional=True),
    Setting("urls", str, None, "URLs or paths to compare, one a line (# comments and blank "
            "lines skipped)", metavar="FILE"),
    _with(AGENT, kind=list, default=None, help="an agent (repeat for more)", **_CLI_ONLY),
    _with(DIALECT, **_CLI_ONLY),
    _with(JSON, help="the changes as JSON"),
    MAX_ROBOTS_BYTES_SETTING, _SITE_PRIVATE, *NETWORK), command=("robots", "diff"))

_FETCHING = (_with(AGENT, help="the User-Agent and robots.txt product token", **_CLI_ONLY),
             _with(DEFAULT_DELAY, old=("--delay-ms",), **_CLI_ONLY),
             _with(ALLOW_PRIVATE, **_CLI_ONLY), MAX_SITEMAP_BYTES_SETTING, *NETWORK)
SITEMAP_PARSE = Product("sitemap parse", (
    Setting("source", str, None, "a local file, - for standard input, or an http(s) URL "
            "(fetched politely: robots.txt is read first)", metavar="FILE|URL",
            positional=True),
    _with(JSON, help="one JSON object per entry"),
    Setting("url", str, None, "the URL a local file was served from (resolves relative "
            "locations)", metavar="URL"),
    *_FETCHING), command=("sitemap", "parse"))
SITEMAP_TREE = Product("sitemap tree", (
    Setting("site", str, None, "https://example.com", metavar="SITE", positional=True),
    _with(JSON, help="the summary and every file as JSON"),
    Setting("max_depth", int, 5, "index levels to follow (0: robots.txt's sitemaps only)",
            bounds=Bounds(minimum=0, maximum=1_000)),
    Setting("max_files", int, 1000, "files to read at most", bounds=COUNT),
    Setting("cross_host", str, "host", "which hosts sitemaps and their URLs may be on: the "
            "site's own (as the protocol says), also with or without www., or any",
            choices=SCOPES),
    Setting("well_known", bool, False, "try /sitemap.xml and the like when robots.txt names "
            "no sitemap"),
    Setting("urls", bool, False, "also print every page URL"),
    *_FETCHING), command=("sitemap", "tree"))
ULINKS = Product("ulinks", (
    Setting("source", str, None, "a site (https://example.com: its sitemaps from "
            "robots.txt), a sitemap URL, a sitemap file, or a survey's folder (each domain's "
            "ulinks from the URLs it kept: DOMAIN<TAB>URI<TAB>WEIGHT)", metavar="SOURCE",
            positional=True),
    Setting("k", int, 5, "how many ulinks", bounds=ULINKS_K, short="-k", metavar="K"),
    Setting("max_uris", int, 20_000, "URIs in the tree at most, sampled at random beyond "
            "(as Roy 2008)", bounds=COUNT),
    Setting("weigh", str, "count", "a URI weighs one (as Roy 2008), its <priority> (0.5 when "
            "it has none), or more the more recent its <lastmod> (halved a year)",
            choices=("count", "priority", "recent")),
    _with(JSON, help="one JSON object a ulink"),
    *_FETCHING), command=("ulinks",))

SITE_RANGES_UPDATE = Product("site ranges update", (
    Setting("sources", list, None, "a range file or URL, NAME=FILE|URL to say whose (none: "
            "every crawler's published file)", metavar="FILE|URL", positional=True,
            nargs="*"),
    Setting("db", str, None, "the site's SQLite file", metavar="FILE", required=True),
    Setting("crawlers", str, None, "a crawler list of your own (default: the bundled one)",
            metavar="FILE"),
    _with(ALLOW_PRIVATE, help="also fetch from private and loopback addresses, and take "
          "private and special-purpose prefixes from the files (a test setup)",
          **_CLI_ONLY), *NETWORK), command=("site", "ranges", "update"))

_CRAWL_STORE = _with(STORE, help="politeness state and frontier: sqlite:///PATH (default "
                     "OUT/crawl.sqlite; named, the processes of one machine share its crawl), "
                     "memory://, or redis://HOST:PORT/DB[?prefix=CRAWL] for workers sharing "
                     "one crawl; share it with polite serve to be polite together", scrapy="")
CRAWL = Product("crawl run", (
    Setting("urls", list, None, "where to start (none: go on with the crawl in --out or "
            "--store)", metavar="URL", positional=True, nargs="*", config=False),
    Setting("out", str, None, "the crawl's folder", metavar="DIR"),
    _with(AGENT, default="polite-crawler", header=True),
    USER_AGENT,
    _CRAWL_STORE, WORKER, LEASE,
    Setting("scope", str, "host", "which hosts links may lead to: the seeds' own, also with "
            "or without www., or any", choices=SCOPES, keyword=True),
    Setting("max_pages", int, None, "stop after this many pages fetched by this run (a "
            "crawl resumed fetches as many more; default: no limit)",
            bounds=COUNT, keyword=True),
    Setting("max_depth", int, None, "links followed from a seed at most (0: the seeds "
            "alone)", bounds=Bounds(minimum=0, maximum=MANY), keyword=True),
    Setting("max_pages_per_host", int, 100_000, "a budget per host against traps",
            bounds=COUNT, keyword=True),
    CONCURRENCY,
    Setting("per_host", int, 1, "fetches in flight to one host at most",
            bounds=Bounds(minimum=1, maximum=10_000), keyword=True),
    _with(DEFAULT_DELAY, scrapy=""), _with(MAX_CRAWL_DELAY, scrapy=""),
    Setting("languages", str, "", "comma-separated languages the crawler reads (zh,en); a "
            "site whose REGP Language shares none is not crawled", metavar="LIST"),
    Setting("sitemaps", bool, True, "do not read the sitemaps robots.txt names before a "
            "site's pages", negate=True, keyword=True),
    Setting("well_known_sitemaps", bool, False, "also try /sitemap.xml and the like when "
            "robots.txt names none", keyword=True),
    _with(PURPOSE, help="what the pages are for: a page whose AI-usage preferences "
          "(robots.txt Content-Usage / Content-Signal, headers, META, TDMRep) refuse it is "
          "fetched but not kept, like noindex (default none: preferences recorded, nothing "
          "refused)", scrapy=""),
    Setting("revisit", bool, False, "keep going: revisit pages when Change-*, Index-page, "
            "changefreq or lastmod say they are due", keyword=True),
    Setting("max_body_bytes", int, 10 * 1024 * 1024, "a page body's cap, counted decoded",
            unit="bytes", bounds=SIZE, old=("--max-bytes",), old_keys=("max_bytes",),
            keyword=True),
    Setting("warc", bool, True, "write pages.jsonl only", negate=True, keyword=True),
    Setting("warc_gzip_level", int, 1, "zlib's level for each WARC record's gzip member: 1 "
            "is the fastest (a tenth less CPU per page than 6 on the crawl bench, files a "
            "sixth larger), 9 the smallest", bounds=Bounds(minimum=1, maximum=9),
            keyword=True),
    _with(ALLOW_PRIVATE, help="also crawl private and loopback addresses", scrapy=""),
    ALLOW_NETWORK, *NETWORK,
    _with(SIGN_WITH, scrapy="", keyword=False),
    _with(SIGNATURE_AGENT, scrapy="", keyword=False),
    Setting("max_price", float, None, "pay-per-crawl: a page answered 402 with a "
            "crawler-price up to this is asked again with a signed crawler-max-price, and "
            "what it was charged recorded (needs --sign-with); without it priced pages are "
            "skipped, their price recorded", unit="USD",
            bounds=Bounds(minimum=0, minimum_inclusive=False, maximum=1_000_000), metavar="USD",
            keyword=True),
    _with(JSON, help="the summary as JSON, no display"),
    CONFIG,
    Setting("max_redirects", int, 5, "redirects followed from one URL at most",
            bounds=Bounds(minimum=0, maximum=100), keyword=True, cli=False),
    Setting("fetch_deadline_s", float, 60.0, "a whole fetch, however slowly its bytes come",
            unit="s", bounds=TIMEOUT, keyword=True, cli=False),
    Setting("store_patience_s", float, 600.0, "a shared store unreachable this long ends the "
            "crawl", unit="s", bounds=TIMEOUT, keyword=True, cli=False),
    Setting("max_attempts", int, 3, "429 and 503 answers before a URL is given up",
            bounds=Bounds(minimum=1, maximum=1_000), keyword=True, cli=False),
    Setting("robots_attempts", int, 3, "robots.txt failures (5xx, 429, network) before a "
            "site's URLs are given up", bounds=Bounds(minimum=1, maximum=1_000), keyword=True,
            cli=False),
    Setting("tdmrep_memory_bytes", int, 64 * 1024 * 1024, "with a purpose: the sites' "
            "compiled tdmrep.json files kept in memory hold at most this much; the least "
            "recently used go first, read again at their host's next page", unit="bytes",
            bounds=SIZE, keyword=True, cli=False),
    ), command=("crawl", "run"), config_file=True, library="polite.crawl.CrawlSettings")

SURVEY = Product("survey", (
    Setting("domains", str, None, "a ranked list: 'rank,domain' lines (Tranco, Alexa) or one "
            "domain a line", metavar="DOMAINS", positional=True, nargs="?", config=False),
    Setting("robots_dir", str, None, "instead of fetching: robots.txt files named HOST.txt",
            metavar="FOLDER"),
    Setting("warc", str, None, "instead of fetching: robots.txt captures of a WARC file "
            "(response records for /robots.txt, as Common Crawl's)", metavar="FILE"),
    Setting("out", str, None, "the survey's folder", metavar="DIR"),
    _with(STORE, help="redis://HOST:PORT/DB?prefix=NAME: survey one domain list with every "
          "worker given this URL, each domain leased to one of them (each worker keeps what "
          "it fetched in its own --out; polite report DIR... reads them all); memory:// and "
          "sqlite:/// are refused: a survey keeps its state in OUT/survey.sqlite",
          scrapy="", keyword=False),
    WORKER, _with(LEASE, keyword=False),
    _with(CONCURRENCY, default=100, help="domains at once", keyword=False),
    Setting("https", bool, False, "start with https://"),
    HOSTS, NAMESERVER,
    Setting("sitemaps", bool, True, "robots.txt alone: do not read the sitemaps it names",
            negate=True),
    Setting("n0", int, 100, "children of a sitemap index read at least (Roy 2008, 2.3)",
            bounds=Bounds(minimum=0, maximum=MANY)),
    Setting("alpha", float, 0.1, "share of a large index's children read, at least "
            "max(n0, alpha*n)", bounds=FRACTION),
    Setting("max_uris", int, 20_000, "page URLs kept per site, a uniform sample beyond (Roy "
            "2008, 2.4); all are counted", bounds=Bounds(minimum=0, maximum=MANY)),
    _with(DEFAULT_DELAY, old=("--delay",), old_keys=("delay",), old_per=1, **_CLI_ONLY),
    Setting("progress", bool, None, "a progress display on stderr (default: when it is a "
            "terminal)"),
    _with(CONNECT_TIMEOUT, help="a connection not made in this long fails (as Roy 2008)"),
    _with(READ_TIMEOUT, help="an answer silent this long fails (as Roy 2008)"),
    _with(AGENT, help="the product token robots.txt is read for, sent as the User-Agent",
          **_CLI_ONLY),
    _with(ALLOW_PRIVATE, **_CLI_ONLY),
    ALLOW_NETWORK,
    CONFIG), command=("survey",), config_file=True)

SERVE = Product("serve", (
    Setting("host", str, "127.0.0.1", "address to listen on", metavar="HOST"),
    Setting("port", int, 8080, "port to listen on (0: any free port)", bounds=PORT),
    _with(STORE, default="sqlite:///polite.sqlite", help="sqlite:///PATH, "
          "redis://HOST:PORT/DB (shared by several nodes) or memory://", **_CLI_ONLY),
    _with(DEFAULT_DELAY, **_CLI_ONLY),
    _with(MAX_CRAWL_DELAY, **_CLI_ONLY),
    _with(AGENT, **_CLI_ONLY),
    _with(ALLOW_PRIVATE, **_CLI_ONLY),
    ALLOW_NETWORK,
    Setting("on_401_403", str, "disallow", "what a robots.txt answered with 401 or 403 means: "
            "disallow all (as Koster 1996 and Riemer 2017 do) or allow all (RFC 9309)",
            choices=("disallow", "allow")),
    Setting("mode", str, "reject", "proxy: a request whose host's slot is taken gets 429 "
            "with Retry-After (reject), is held until its slot (wait), or is held and "
            "answered in its client's order (ordered; the client is X-Polite-Client or its "
            "address)", choices=("reject", "wait", "ordered")),
    Setting("max_wait_s", float, 60.0, "wait mode: the longest a request is held", unit="s",
            bounds=DELAY),
    HOSTS, NAMESERVER, _with(CONNECT_TIMEOUT, old=()),
    _with(READ_TIMEOUT, help="an answer silent this long fails (proxy: the client gets a "
          "504)", old=("--origin-timeout-s",), old_keys=("origin_timeout_s",)),
    _with(PURPOSE, help="proxy: what requests are for, unless their X-Polite-Purpose says",
          **_CLI_ONLY),
    Setting("refuse_by_purpose", bool, False, "proxy: answer 403 with the reason when the "
            "URL's robots.txt AI-usage preferences disallow the request's purpose"),
    Setting("backoff", bool, True, "do not pause a host after a 429 or 503 (for origins of "
            "your own)", negate=True),
    Setting("cache", bool, True, "turn the proxy's page cache off", negate=True),
    Setting("cache_max_mb", float, 256.0, "the page cache's size in the store; least "
            "recently used pages go first", unit="MiB",
            bounds=Bounds(minimum=0, minimum_inclusive=False, maximum=1 << 20)),
    Setting("loop", str, "auto", "the event loop: uvloop when installed (auto), or the "
            "standard library's asyncio", choices=("auto", "asyncio", "uvloop")),
    Setting("cache_keep_no_store_s", float, 0.0, "keep responses marked no-store this long "
            "(0: no-store is honoured; Riemer 2017 kept them a day, 86400)", unit="s",
            bounds=Bounds(minimum=0, maximum=30 * DAY_S)),
    _with(ADAPTIVE, **_CLI_ONLY),
    Setting("admin_token", str, None, "required (Bearer) for writes: PUT and DELETE /delays, "
            "/politeness/feedback, reserve=true; mandatory when --host is not a loopback "
            "address, and then the proxy (Proxy-Authorization: Basic with it as the "
            "password, or Bearer), decisions, /sitemaps, /metrics, /trace, /env, /delays "
            "and the dashboard need it too (open /dashboard?token=TOKEN once)",
            metavar="TOKEN", env="POLITE_ADMIN_TOKEN"),
    Setting("allowed_host", list, None, "a host name the REST API and dashboard answer to, "
            "besides IP addresses, localhost and --host (a request naming another Host is "
            "refused: DNS rebinding); repeatable", metavar="NAME"),
    MAX_ROBOTS_BYTES_SETTING, ROBOTS_MEMORY_SETTING,
    Setting("intercept_tls", bool, False, "read inside CONNECT tunnels, so https requests get "
            "per-URL robots.txt, delays and the cache: clients must trust the local CA "
            "(polite ca export); needs polite-web[tls]"),
    Setting("ca_dir", str, None, "the local CA's folder, made once (default "
            "$XDG_STATE_HOME/polite/ca or ~/.local/state/polite/ca)", metavar="DIR"),
    Setting("upstream_ca", str, None, "also trust origins whose certificates this CA file "
            "signed", metavar="FILE"),
    Setting("no_intercept", list, None, "leave tunnels to HOST plain (clients that pin "
            "certificates); repeatable", metavar="HOST"),
    Setting("trace_size", int, 1000, "exchanges GET /trace keeps, newest first (0: none)",
            bounds=Bounds(minimum=0, maximum=1_000_000)),
    Setting("node", str, None, "this node's name on the dashboard (default HOSTNAME:PORT)",
            metavar="NAME"),
    Setting("key", str, None, "serve the key directory of this Ed25519 key (polite keys new) "
            "at /.well-known/http-message-signatures-directory, for the Signature-Agent of a "
            "signing crawler", metavar="FILE"),
    _with(SIGN_WITH, help="sign every forwarded request, https ones read under "
          "--intercept-tls too, with this Ed25519 key (Web Bot Auth); needs polite-web[identity]",
          **_CLI_ONLY),
    _with(SIGNATURE_AGENT, **_CLI_ONLY),
    _with(CONFIG, help="a TOML file with any of the settings below (keys as the options, _ "
          "for -) and a [delays_s] table of domain = seconds; an option given overrides "
          "it"),
    ), command=("serve",), config_file=True)

DROPINS = Product("drop-ins", (
    _with(AGENT, default="", help="the robots.txt product token (default: the request's "
          "User-Agent's)"),
    _with(STORE, default="memory://"),
    Setting("service_url", str, None, "a running polite serve to ask instead of a store "
            "(http://:TOKEN@HOST:PORT with --admin-token)", metavar="URL",
            scrapy="POLITE_SERVICE_URL", keyword=True),
    ALLOW_PRIVATE, DIALECT, DEFAULT_DELAY, MAX_CRAWL_DELAY, ADAPTIVE,
    Setting("max_wait_s", float, 600.0, "a request that would wait longer in all is refused",
            unit="s", bounds=DELAY, scrapy="POLITE_MAX_WAIT", keyword=True),
    PURPOSE,
    Setting("refuse_by_purpose", bool, False, "refuse what the URL's AI-usage preferences "
            "disallow the purpose for", scrapy="POLITE_REFUSE_BY_PURPOSE", keyword=True),
    SIGN_WITH, SIGNATURE_AGENT), library="polite.integrations.PoliteGate")

MCP = Product("mcp", (
    Setting("http", str, None, "serve streamable HTTP at http://HOST:PORT/mcp rather than "
            "stdio (a loopback address unless --admin-token is given)", metavar="HOST:PORT"),
    _with(AGENT, default="polite-mcp", help="the product token robots.txt is read for, and "
          "the User-Agent's name", **_CLI_ONLY),
    _with(USER_AGENT, help="the User-Agent header (default: the agent, polite's version and "
          "where to read of it)", keyword=False),
    _with(STORE, help="where politeness state is kept, shared by every server and process "
          "that opens it: sqlite:///PATH (default: mcp.sqlite in $XDG_DATA_HOME/polite or "
          "~/.local/share/polite), redis://HOST:PORT/DB for a team of agents, or memory://",
          **_CLI_ONLY),
    _with(PURPOSE, default="ai-input", help="what the pages are for: a page whose AI-usage "
          "preferences (robots.txt Content-Usage / Content-Signal, headers, META, TDMRep) "
          "refuse it is not given to the agent", **_CLI_ONLY),
    Setting("max_wait_s", float, 20.0, "a fetch that would wait longer for its host's turn "
            "answers with the time to retry instead", unit="s", bounds=DELAY),
    _with(DEFAULT_DELAY, old=(), old_keys=(), **_CLI_ONLY),
    _with(MAX_CRAWL_DELAY, **_CLI_ONLY),
    SERVE["on_401_403"],
    _with(ALLOW_PRIVATE, help="also fetch from private, loopback and link-local addresses "
          "(a page can lead an agent to ask for an internal URL)", **_CLI_ONLY),
    ALLOW_NETWORK,
    Setting("max_body_bytes", int, 5 * 1024 * 1024, "a page body's cap, counted decoded",
            unit="bytes", bounds=SIZE),
    Setting("fetch_deadline_s", float, 30.0, "one request, however slowly its bytes come",
            unit="s", bounds=TIMEOUT),
    _with(CONNECT_TIMEOUT, old=()), _with(READ_TIMEOUT, old=()),
    Setting("admin_token", str, None, "with --http: required of every request (Authorization: "
            "Bearer TOKEN); mandatory when HOST is not a loopback address", metavar="TOKEN",
            env="POLITE_MCP_TOKEN"),
    Setting("client_read_s", float, 30.0, "with --http: a request whose head, or then its "
            "body, has not come whole this long is dropped", unit="s", bounds=TIMEOUT),
    _with(SIGN_WITH, **_CLI_ONLY),
    _with(SIGNATURE_AGENT, **_CLI_ONLY),
    ), command=("mcp",))

FRONTIER_SERVE = Product("frontier serve", (
    Setting("host", str, "127.0.0.1", "address to listen on", metavar="HOST"),
    Setting("port", int, 7071, "port to listen on (0: any free port; the reference service's "
            "7071 by default)", bounds=PORT),
    _with(STORE, default="sqlite:///frontier.sqlite", help="where the URLs, the queues and "
          "the politeness state are kept: sqlite:///PATH, or redis://HOST:PORT/DB (a Redis "
          "Cluster: redis://NODE:PORT/0?cluster=1) for nodes on several machines",
          **_CLI_ONLY),
    Setting("robots", str, "on", "on: GetURLs hands out only what robots.txt allows, when "
            "each host's delays allow; off: the queues' own delays only, for a crawler that "
            "keeps robots.txt itself", choices=("on", "off")),
    _with(AGENT, default="polite-frontier", help="the product token robots.txt is read for "
          "(the crawler's, as its fetcher sends it)", **_CLI_ONLY),
    _with(USER_AGENT, help="the User-Agent of the robots.txt requests (default: the agent)",
          keyword=False),
    _with(DEFAULT_DELAY, old=(), old_keys=(), help="spacing between two URLs of a host "
          "handed out when robots.txt sets none; with --robots off, each queue's delay until "
          "SetDelay changes it", **_CLI_ONLY),
    _with(MAX_CRAWL_DELAY, **_CLI_ONLY),
    SERVE["on_401_403"],
    _with(ALLOW_PRIVATE, help="also hand out URLs of private, loopback and link-local "
          "addresses, and read their robots.txt", **_CLI_ONLY),
    ALLOW_NETWORK,
    _with(CONNECT_TIMEOUT, old=()), _with(READ_TIMEOUT, old=()),
    Setting("metrics_port", int, None, "also serve Prometheus's text format at "
            "http://HOST:PORT/metrics (0: any free port)", bounds=PORT),
    Setting("node_name", str, None, "the name of this node in the store (ListNodes, "
            "SetActive's local), HOST:PORT by default: nodes on several machines sharing "
            "one store each need one of their own, and a name a live node has is refused",
            metavar="NAME"),
    ), command=("frontier", "serve"))

FRONTIER_STATUS = Product("frontier status", (
    _with(STORE, default="sqlite:///frontier.sqlite", help="the frontier's store, as "
          "polite frontier serve was given it: sqlite:///PATH, redis://HOST:PORT/DB or "
          "redis://NODE:PORT/0?cluster=1",
          **_CLI_ONLY),
    Setting("max_queues", int, 20, "queues listed per crawl, those with the most URLs to "
            "fetch first", bounds=Bounds(minimum=0, maximum=1_000_000)),
    Setting("json", bool, False, "print JSON", config=False),
    ), command=("frontier", "status"))

# -- the commands that keep to the command line: no config file, no library keyword ----------

_DB = Setting("db", str, None, "the site's SQLite file", metavar="FILE", required=True)
_JSON_OUT = Setting("json", bool, False, "print JSON", config=False)

CRAWL_STATUS = Product("crawl status", (
    Setting("store", str, None, "the shared crawl: redis://HOST:PORT/DB[?prefix=CRAWL]",
            metavar="URL", required=True),
    _with(_JSON_OUT, help="the status as JSON")), command=("crawl", "status"))

CRAWL_MERGE = Product("crawl merge", (
    Setting("folders", list, None, "a worker's --out", metavar="DIR", positional=True,
            nargs="+"),
    Setting("out", str, None, "the merged folder", metavar="DIR", required=True),
    _with(_JSON_OUT, help="the summary as JSON")), command=("crawl", "merge"))

REPORT = Product("report", (
    Setting("folders", list, None, "a survey's folder", metavar="DIR", positional=True,
            nargs="+"),
    Setting("out", str, None, "where the union of several folders goes (a new folder)",
            metavar="FOLDER"),
    Setting("agent", list, None, "a product token of the access table (repeatable; default: "
            "search engines and AI crawlers, Googlebot to meta-externalagent)", short="-a",
            metavar="TOKEN"),
    Setting("k", int, 5, "ulinks per domain", short="-k", short_first=True,
            bounds=ULINKS_K),
    Setting("figures", bool, True, "write the tables, the data and the page without drawing "
            "the figures (most of a report's time)", negate=True)),
    command=("report",))

SITE_SERVE = Product("site serve", (
    _DB,
    Setting("host", str, "127.0.0.1", "address to listen on", metavar="HOST"),
    Setting("port", int, 8090, "port to listen on (0: any free port)", bounds=PORT),
    Setting("token", str, None, "the page's token (required off loopback, made up and printed "
            "when not given)", metavar="TOKEN", env="POLITE_SITE_TOKEN"),
    Setting("allowed_host", list, None, "a host name the page answers to, besides IP "
            "addresses, localhost and --host (a request naming another Host is refused: DNS "
            "rebinding); repeatable", metavar="NAME")), command=("site", "serve"))

SITE_IMPORT = Product("site import", (
    Setting("file", str, None, "a robots.txt", metavar="FILE", positional=True),
    _DB), command=("site", "import"))

# Days, not seconds: the visit log is kept for days, and --days has been its spelling.
SITE_PRUNE = Product("site prune", (
    _DB,
    Setting("days", float, None, "keep this many days of robot visits", unit="days",
            bounds=Bounds(minimum=0, maximum=36_500), required=True)), command=("site", "prune"))

KEYS_NEW = Product("keys new", (
    Setting("file", str, None, "where the private key goes (must not exist)", metavar="FILE",
            positional=True),), command=("keys", "new"))

KEYS_DIRECTORY = Product("keys directory", (
    Setting("files", list, None, "private key files", metavar="FILE", positional=True,
            nargs="+"),), command=("keys", "directory"))

CA_EXPORT = Product("ca export", (
    _with(SERVE["ca_dir"], help="the local CA's folder, as for polite serve --ca-dir"),),
    command=("ca", "export"))

_DEMO_HOST = Setting("host", str, "127.0.0.1", "address to listen on", metavar="HOST")
_DEMO_PORT = Setting("port", int, 8089, "port to listen on (0: any free port)", bounds=PORT)

DEMO = Product("demo", (_DEMO_HOST, _DEMO_PORT), command=("demo",))

DEMO_REGP_SITE = Product("demo regp-site", (
    Setting("robots", str, "regp", "no robots.txt (Table 9), the REGP file (Table 10) or the "
            "old REP file (Table 11)", choices=("none", "rep", "regp")),
    _DEMO_HOST, _DEMO_PORT,
    Setting("news", int, 10, "news items", bounds=Bounds(minimum=1, maximum=100_000)),
    Setting("visit_time", str, None, "add a Visit-time line to the REGP file, e.g. "
            "'21:00:00 +0800-08:00:00 +0800'", metavar="VALUE"),
    Setting("language", str, None, "the REGP file's Language in place of zh-CN (e.g. fr)",
            metavar="LANGUAGE")), command=("demo", "regp-site"))

COMPLETION = Product("completion", (
    Setting("shell", str, None, "bash or zsh", choices=("bash", "zsh"), metavar="SHELL",
            positional=True),), command=("completion",))

# How Scrapy's settings name what the drop-ins check (allow_private=True's is the setting).
SCRAPY = Knobs(**{name: DROPINS[name].scrapy for name in Knobs.__dataclass_fields__})


def scrapy_values(get: Callable[[str], object]) -> dict[str, object]:
    """The drop-ins' settings from Scrapy's (``get``: ``settings.get``), each checked and
    named as set: a number in settings.py, or text from ``-s NAME=VALUE``."""
    found: dict[str, object] = {}
    for setting in DROPINS.on("scrapy"):
        raw = get(setting.scrapy)
        if raw is None or raw == "":
            found[setting.name] = setting.default
        elif isinstance(raw, str) and setting.kind is not str:
            found[setting.name] = setting.parse(raw, setting.scrapy)
        else:
            found[setting.name] = setting.check(raw, setting.scrapy)
    return found


# ``polite serve``'s numbers: the flag (``--max-wait-s``) and the config file's key
# (``max_wait_s``) are read through the same check.
SERVE_NUMBERS: dict[str, IntFlag | FloatFlag] = {
    s.name: flag for s in SERVE.settings if (flag := s.flag_type()) is not None}

PRODUCTS = (ROBOTS_CHECK, ROBOTS_LINT, ROBOTS_EXPLAIN, ROBOTS_DIFF, SITEMAP_PARSE,
            SITEMAP_TREE, ULINKS, SITE_RANGES_UPDATE, SITE_SERVE, SITE_IMPORT, SITE_PRUNE,
            CRAWL, CRAWL_STATUS, CRAWL_MERGE, SURVEY, REPORT, SERVE, MCP, FRONTIER_SERVE,
            FRONTIER_STATUS,
            CA_EXPORT, KEYS_NEW,
            KEYS_DIRECTORY, DEMO, DEMO_REGP_SITE, COMPLETION, DROPINS)


# -- the config file ---------------------------------------------------------------------------

MAX_CONFIG_BYTES = 1 << 20


def read_config(path: str, product: Product, *,
                read: Callable[[bytes, str], Mapping[str, object]],
                tables: tuple[str, ...] = ()) -> tuple[dict[str, object], list[str]]:
    """The settings a TOML file gives ``product``, each checked as its key (``--config FILE:
    KEY``), and the deprecation notes of former keys it used. ``read``: the file's bytes as
    a TOML table, or a :class:`ConfigError` naming the file (given the name) and why it is
    not one (polite.core's bounded reading). ``tables``: keys whose values the caller
    reads itself (``polite serve``'s ``[delays_s]``)."""
    from polite.errors import ConfigError

    where = f"--config {path}"
    try:
        with open(path, "rb") as file:
            body = file.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from exc
    if len(body) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{where}: over {MAX_CONFIG_BYTES:,} bytes")
    data = read(body, where)
    known = {s.name: s for s in product.on("config")}
    former = {old: s for s in known.values() for old in s.old_keys}
    found: dict[str, object] = {}
    notes: list[str] = []
    for raw_key, value in data.items():
        key = raw_key.replace("-", "_")
        if key in tables:
            found[key] = value
            continue
        setting = known.get(key)
        per = 1
        if setting is None and key in former:
            setting = former[key]
            per = setting.old_per
            notes.append(f"{where}: {raw_key} is deprecated; use {setting.name}")
        if setting is None:
            names = ", ".join(sorted([*known, *tables]))
            raise ConfigError(f"{where}: unknown setting {raw_key!r} (known: {names})")
        knob = f"{where}: {raw_key}"
        checked: object
        if per != 1:  # a former unit: checked as given, then divided
            checked = check_int(value, (setting.bounds or Bounds()).scaled(per), knob=knob) / per
        else:
            checked = setting.check(value, knob)
        found[setting.name] = checked
    return found, notes


def from_environment(product: Product, environ: dict[str, str]) -> dict[str, object]:
    """The settings ``product`` reads from the environment, each checked as its variable."""
    return {s.name: s.parse(environ[s.env], s.env) for s in product.on("env")
            if environ.get(s.env)}


# -- the reference table -----------------------------------------------------------------------


def default_shown(setting: Setting) -> str:
    value = setting.default
    if value is None or value == "" or (setting.kind is list and not value):
        return ""
    if setting.kind is bool:
        return "on" if value else "off"
    if isinstance(value, int | float) and not isinstance(value, bool):
        grouped = setting.bounds is None or setting.bounds.grouped
        return _shown(value, grouped=grouped) + (f" {setting.unit}" if setting.unit else "")
    return str(value)


def _allowed(setting: Setting) -> str:
    if setting.choices:
        return " | ".join(setting.choices)
    if setting.bounds is not None:
        return setting.bounds.describe(whole=setting.kind is int).removeprefix("a ")
    return {bool: "true or false", list: "repeatable", str: "text", int: "whole number",
            float: "number"}.get(setting.kind, "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_table(products: tuple[Product, ...] = PRODUCTS) -> str:
    """Every setting of every surface as Markdown: one table per product, a row per setting,
    a column per surface's spelling (command line, config file, environment, Scrapy,
    keyword), its unit, default, allowed values and help."""
    lines = ["# Settings", "",
             "Generated from `polite/config.py` (`polite.config.settings_table()`); each "
             "setting is checked the same way on every surface that takes it, and an error "
             "names it as that surface spells it.", ""]
    for product in products:
        lines.append(f"## {product.name}")
        lines.append("")
        where = []
        if product.command:
            where.append(f"`polite {' '.join(product.command)}`")
        if product.config_file:
            where.append("a TOML file given with `--config FILE`")
        if product.library:
            where.append(f"`{product.library}`")
        lines.append("Surfaces: " + ", ".join(where) + "." if where else "")
        lines.append("")
        lines.append("| setting | command line | config file | environment | Scrapy | "
                     "keyword | unit | default | allowed | help |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        config = set(product.on("config"))
        for s in product.settings:
            cli = ""
            if product.command and s.cli:
                cli = f"`{s.metavar or s.name.upper()}`" if s.positional else \
                    ", ".join(f"`{o}`" for o in s.options)
                if s.old:
                    cli += " (was " + ", ".join(f"`{o}`" for o in s.old) + ")"
            row = [f"`{s.name}`", cli,
                   f"`{s.name}`" if s in config else "",
                   f"`{s.env}`" if s.env else "",
                   f"`{s.scrapy}`" if s.scrapy else "",
                   f"`{s.name}=`" if s.keyword and product.library else "",
                   UNITS.get(s.unit, s.unit), default_shown(s), _allowed(s), s.help]
            lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
        lines.append("")
    return "\n".join(lines)
