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
from dataclasses import dataclass

from polite.errors import SettingError

__all__ = [
    "AT_LEAST_ONE",
    "FLAGS",
    "FRACTION",
    "KEYWORDS",
    "NON_NEGATIVE",
    "PORT",
    "POSITIVE",
    "SCRAPY",
    "SERVE_NUMBERS",
    "Bounds",
    "FloatFlag",
    "IntFlag",
    "Knobs",
    "check_float",
    "check_int",
    "check_setting",
    "parse_float",
    "parse_int",
]


def _shown(bound: float) -> str:
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


@dataclass(frozen=True, slots=True)
class Bounds:
    """The range of a numeric setting. Every bound is finite: NaN and the infinities are
    never a setting's value (NaN compares false with everything, so a NaN delay or factor
    slips through every ``<`` and turns politeness off)."""

    minimum: float | None = None
    minimum_inclusive: bool = True  # False: above ``minimum`` (0 cannot work, e.g. a timeout)
    maximum: float | None = None

    def admits(self, number: float) -> bool:
        """Is ``number`` finite and within the bounds?"""
        if not math.isfinite(number):
            return False
        if self.minimum is not None and (number < self.minimum or (
                not self.minimum_inclusive and number == self.minimum)):
            return False
        return self.maximum is None or number <= self.maximum

    def describe(self, *, whole: bool) -> str:
        """``a whole number of 1 or more``, ``a finite number above 0``, ..."""
        kind = "a whole number" if whole else "a finite number"
        low, high = self.minimum, self.maximum
        if low is not None and high is not None and self.minimum_inclusive:
            return f"{kind} from {_shown(low)} to {_shown(high)}"
        parts = []
        if low is not None:
            parts.append(f"of {_shown(low)} or more" if self.minimum_inclusive
                         else f"above {_shown(low)}")
        if high is not None:
            parts.append(f"of {_shown(high)} at most")
        return " ".join([kind, *parts])


NON_NEGATIVE = Bounds(minimum=0)  # a delay, a factor, a count where 0 means none or off
POSITIVE = Bounds(minimum=0, minimum_inclusive=False)  # a timeout, a lease: 0 cannot work
AT_LEAST_ONE = Bounds(minimum=1)  # a size, a concurrency, a budget
FRACTION = Bounds(minimum=0, maximum=1)
PORT = Bounds(minimum=0, maximum=65_535)  # 0: any free port


def check_float(value: object, bounds: Bounds, *, knob: str) -> float:
    """``value`` (an int or a float, not a bool) as a float within ``bounds``, else a
    :class:`SettingError` naming ``knob``."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not bounds.admits(float(value)):
        raise SettingError(knob, value, f"must be {bounds.describe(whole=False)}")
    return float(value)


def check_int(value: object, bounds: Bounds, *, knob: str) -> int:
    """``value`` (an int, not a bool) within ``bounds``, else a :class:`SettingError`."""
    if isinstance(value, bool) or not isinstance(value, int) or not bounds.admits(value):
        raise SettingError(knob, value, f"must be {bounds.describe(whole=True)}")
    return value


def parse_float(text: str, bounds: Bounds, *, knob: str) -> float:
    """:func:`check_float` for a value written as text (``1e400`` reads as infinity, and is
    refused as one)."""
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not bounds.admits(number):
        raise SettingError(knob, text, f"must be {bounds.describe(whole=False)}")
    return number


def parse_int(text: str, bounds: Bounds, *, knob: str) -> int:
    """:func:`check_int` for a value written as text."""
    try:
        number = int(text)
    except ValueError:
        raise SettingError(knob, text, f"must be {bounds.describe(whole=True)}") from None
    if not bounds.admits(number):
        raise SettingError(knob, text, f"must be {bounds.describe(whole=True)}")
    return number


def _refused(error: SettingError) -> argparse.ArgumentTypeError:
    # argparse puts "argument --FLAG: " before this and exits with status 2.
    return argparse.ArgumentTypeError(f"{error.problem}, not {error.value!r}")


@dataclass(frozen=True, slots=True)
class FloatFlag:
    """An argparse ``type=`` for a number within ``bounds``."""

    bounds: Bounds

    def __call__(self, text: str) -> float:
        try:
            return parse_float(text, self.bounds, knob="")
        except SettingError as exc:
            raise _refused(exc) from None


@dataclass(frozen=True, slots=True)
class IntFlag:
    """An argparse ``type=`` for a whole number within ``bounds``."""

    bounds: Bounds

    def __call__(self, text: str) -> int:
        try:
            return parse_int(text, self.bounds, knob="")
        except SettingError as exc:
            raise _refused(exc) from None


# ``polite serve``'s numbers: the flag (``--max-wait-s``) and the config file's key
# (``max_wait_s``) are read through the same check.
SERVE_NUMBERS: dict[str, IntFlag | FloatFlag] = {
    "port": IntFlag(PORT),
    "default_delay_ms": IntFlag(NON_NEGATIVE),
    "max_crawl_delay_s": FloatFlag(NON_NEGATIVE),  # 0: robots.txt delays are not kept
    "max_wait_s": FloatFlag(NON_NEGATIVE),  # 0: wait mode holds nothing
    "origin_timeout_s": FloatFlag(POSITIVE),
    "cache_max_mb": FloatFlag(POSITIVE),
    "cache_keep_no_store_s": FloatFlag(NON_NEGATIVE),
    "adaptive_factor": FloatFlag(NON_NEGATIVE),  # 0: the adaptive delay is off
    "max_bytes": IntFlag(AT_LEAST_ONE),
    "trace_size": IntFlag(Bounds(minimum=0, maximum=1_000_000)),  # 0: no trace kept
}


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


KEYWORDS = Knobs()
# The command line checks its numbers where it parses them (FloatFlag, IntFlag).
FLAGS = Knobs(store="--store", allow_private="--allow-private", sign_with="--sign-with",
              signature_agent="--signature-agent")
SCRAPY = Knobs(store="POLITE_STORE", service_url="POLITE_SERVICE_URL",
               allow_private="POLITE_ALLOW_PRIVATE",
               default_delay_s="POLITE_DEFAULT_DELAY", adaptive_factor="POLITE_ADAPTIVE_FACTOR",
               max_wait_s="POLITE_MAX_WAIT", purpose="POLITE_PURPOSE",
               sign_with="POLITE_SIGN_WITH", signature_agent="POLITE_SIGNATURE_AGENT")
