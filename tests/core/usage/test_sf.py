"""RFC 9651 dictionaries: valid values read as the RFC says, every malformed one refused."""

from __future__ import annotations

from decimal import Decimal

import pytest

from polite.core.usage.sf import (
    MAX_FIELD_CHARS,
    Date,
    DisplayString,
    InnerList,
    Item,
    Token,
    parse_dictionary,
)
from polite.errors import MalformedField


def test_members_of_every_type() -> None:
    got = parse_dictionary('a=1, b=-2.5, c="x\\"y", d=tok/en:1, e=:aGk=:, f=?0, g, '
                           'h=@1700000000, i=%"caf%c3%a9", j=(1 "two" three);p=1')
    assert got["a"] == Item(1)
    assert got["b"] == Item(Decimal("-2.5"))
    assert got["c"] == Item('x"y')
    assert got["d"] == Item(Token("tok/en:1"))
    assert got["e"] == Item(b"hi")
    assert got["f"] == Item(False)
    assert got["g"] == Item(True)
    assert got["h"] == Item(Date(1700000000))
    assert got["i"] == Item(DisplayString("café"))
    assert got["j"] == InnerList((Item(1), Item("two"), Item(Token("three"))), (("p", 1),))


def test_parameters_and_bare_keys() -> None:
    got = parse_dictionary("train-ai;has;parameters=\"?\"")
    assert got == {"train-ai": Item(True, (("has", True), ("parameters", "?")))}


def test_duplicate_key_keeps_last_value_at_first_place() -> None:
    got = parse_dictionary("a=1, b=2, a=3")
    assert list(got) == ["a", "b"]
    assert got["a"] == Item(3)


def test_whitespace_and_empty() -> None:
    assert parse_dictionary("") == {}
    assert parse_dictionary("  a=1 ,\tb=2  ") == {"a": Item(1), "b": Item(2)}


@pytest.mark.parametrize("text", [
    "Train-ai=y",          # upper-case key
    "a=1,",                # trailing comma
    "a=1 b=2",             # no comma
    "a=",                  # value missing
    'a="unterminated',
    'a="bad\\escape"',
    "a=1234567890123456",  # 16 digits
    "a=1.2345",            # 4 fractional digits
    "a=?2",
    "a=(1 2",
    "a=:not base64!:",
    "1a=y",
    "a=é",
    'a=%"%C3%A9"',         # upper-case hex in a display string
    ",a=1",
])
def test_malformed_values_are_refused(text: str) -> None:
    with pytest.raises(MalformedField):
        parse_dictionary(text)


def test_over_long_value_is_refused_unread() -> None:
    with pytest.raises(MalformedField, match="over"):
        parse_dictionary("a=" + "y" * MAX_FIELD_CHARS)
