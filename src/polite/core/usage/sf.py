"""RFC 9651 structured-field dictionaries: the syntax of ``Content-Usage``.

Strict, as section 4.2 asks: any syntax error fails the whole value (:class:`MalformedField`)
and the caller treats the field as absent. Duplicate keys keep the last value at the place
of the first (section 4.2.2). Bounded: values longer than :data:`MAX_FIELD_CHARS` are refused
before parsing.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from decimal import Decimal

from polite.errors import MalformedField

__all__ = [
    "MAX_FIELD_CHARS",
    "Date",
    "DisplayString",
    "InnerList",
    "Item",
    "Token",
    "parse_dictionary",
    "serialize_string",
]

# A header line longer than this is no statement of preference; real ones are a few dozen
# characters. Servers commonly cap a whole header block at 8 KiB.
MAX_FIELD_CHARS = 8192


@dataclass(frozen=True, slots=True)
class Token:
    """A bare token (``y``, ``n``, ``yes``); distinct from a string ``"y"``."""

    value: str


@dataclass(frozen=True, slots=True)
class Date:
    seconds: int


@dataclass(frozen=True, slots=True)
class DisplayString:
    value: str


Bare = int | Decimal | str | Token | bytes | bool | Date | DisplayString
Params = tuple[tuple[str, Bare], ...]


@dataclass(frozen=True, slots=True)
class Item:
    value: Bare
    params: Params = ()


@dataclass(frozen=True, slots=True)
class InnerList:
    items: tuple[Item, ...]
    params: Params = ()


Member = Item | InnerList

_LCALPHA = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"
_KEY_REST = _LCALPHA + _DIGITS + "_-.*"
_TCHAR = "!#$%&'*+-.^_`|~" + _DIGITS + _LCALPHA + _LCALPHA.upper()
_TOKEN_REST = _TCHAR + ":/"
_B64 = _LCALPHA + _LCALPHA.upper() + _DIGITS + "+/="


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def fail(self, problem: str) -> MalformedField:
        return MalformedField(problem, self.i)

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip(self, chars: str) -> None:
        while self.i < len(self.s) and self.s[self.i] in chars:
            self.i += 1

    def key(self) -> str:
        first = self.peek()
        if not first or first not in _LCALPHA + "*":
            raise self.fail("a key must start with a lower-case letter or '*'")
        start = self.i
        self.i += 1
        self.skip(_KEY_REST)
        return self.s[start:self.i]

    def params(self) -> Params:
        found: dict[str, Bare] = {}
        while self.peek() == ";":
            self.i += 1
            self.skip(" ")
            name = self.key()
            value: Bare = True
            if self.peek() == "=":
                self.i += 1
                value = self.bare()
            found[name] = value
        return tuple(found.items())

    def item(self) -> Item:
        value = self.bare()
        return Item(value, self.params())

    def inner_list(self) -> InnerList:
        self.i += 1  # "("
        items: list[Item] = []
        while self.i < len(self.s):
            self.skip(" ")
            if self.peek() == ")":
                self.i += 1
                return InnerList(tuple(items), self.params())
            items.append(self.item())
            if self.peek() not in (" ", ")"):
                raise self.fail("an inner list's items must be separated by spaces")
        raise self.fail("inner list never closed")

    def bare(self) -> Bare:
        c = self.peek()
        if c == "-" or (c and c in _DIGITS):
            return self.number()
        if c == '"':
            return self.string()
        if c == "*" or (c and c.isascii() and c.isalpha()):
            return self.token()
        if c == ":":
            return self.byte_sequence()
        if c == "?":
            return self.boolean()
        if c == "@":
            self.i += 1
            number = self.number()
            if not isinstance(number, int):
                raise self.fail("a date must be an integer")
            return Date(number)
        if c == "%":
            return self.display_string()
        raise self.fail(f"no value can start with {c!r}" if c else "value missing")

    def number(self) -> int | Decimal:
        start = self.i
        if self.peek() == "-":
            self.i += 1
        digits_start = self.i
        self.skip(_DIGITS)
        whole = self.s[digits_start:self.i]
        if not whole:
            raise self.fail("a number needs a digit")
        if self.peek() != ".":
            if len(whole) > 15:
                raise self.fail("an integer has at most 15 digits")
            return int(self.s[start:self.i])
        if len(whole) > 12:
            raise self.fail("a decimal has at most 12 integer digits")
        self.i += 1
        frac_start = self.i
        self.skip(_DIGITS)
        frac = self.s[frac_start:self.i]
        if not 1 <= len(frac) <= 3:
            raise self.fail("a decimal has one to three fractional digits")
        return Decimal(self.s[start:self.i])

    def string(self) -> str:
        self.i += 1
        out: list[str] = []
        while self.i < len(self.s):
            c = self.s[self.i]
            self.i += 1
            if c == "\\":
                nxt = self.peek()
                if nxt not in ('"', "\\") or not nxt:
                    raise self.fail("only \\\" and \\\\ may be escaped in a string")
                out.append(nxt)
                self.i += 1
            elif c == '"':
                return "".join(out)
            elif not " " <= c <= "~":
                raise self.fail("a string holds printable ASCII only")
            else:
                out.append(c)
        raise self.fail("string never closed")

    def token(self) -> Token:
        start = self.i
        self.i += 1
        self.skip(_TOKEN_REST)
        return Token(self.s[start:self.i])

    def byte_sequence(self) -> bytes:
        self.i += 1
        end = self.s.find(":", self.i)
        if end < 0:
            raise self.fail("byte sequence never closed")
        body = self.s[self.i:end]
        if any(c not in _B64 for c in body):
            raise self.fail("a byte sequence holds base64 only")
        self.i = end + 1
        try:
            return base64.b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            raise self.fail("unreadable base64") from None

    def boolean(self) -> bool:
        self.i += 1
        c = self.peek()
        if c not in ("0", "1") or not c:
            raise self.fail("a boolean is ?0 or ?1")
        self.i += 1
        return c == "1"

    def display_string(self) -> DisplayString:
        if not self.s.startswith('%"', self.i):
            raise self.fail('a display string starts with %"')
        self.i += 2
        raw = bytearray()
        while self.i < len(self.s):
            c = self.s[self.i]
            self.i += 1
            if c == '"':
                try:
                    return DisplayString(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    raise self.fail("a display string is UTF-8") from None
            if c == "%":
                pair = self.s[self.i:self.i + 2]
                if len(pair) != 2 or any(h not in "0123456789abcdef" for h in pair):
                    raise self.fail("a display string escape is % and two lower-case hex")
                raw.append(int(pair, 16))
                self.i += 2
            elif not " " <= c <= "~":
                raise self.fail("a display string holds printable ASCII only")
            else:
                raw.append(ord(c))
        raise self.fail("display string never closed")


def parse_dictionary(text: str) -> dict[str, Member]:
    """An RFC 9651 dictionary (section 4.2.2), keys in first-seen order, last value kept.
    Raises :class:`MalformedField` on any syntax error (the field is then to be ignored)."""
    if len(text) > MAX_FIELD_CHARS:
        raise MalformedField(f"value is {len(text)} characters, over {MAX_FIELD_CHARS}",
                             MAX_FIELD_CHARS)
    p = _Parser(text)
    p.skip(" ")
    found: dict[str, Member] = {}
    while p.i < len(p.s):
        name = p.key()
        member: Member
        if p.peek() == "=":
            p.i += 1
            member = p.inner_list() if p.peek() == "(" else p.item()
        else:
            member = Item(True, p.params())
        found[name] = member
        p.skip(" \t")
        if p.i >= len(p.s):
            break
        if p.peek() != ",":
            raise p.fail("members must be separated by ','")
        p.i += 1
        p.skip(" \t")
        if p.i >= len(p.s):
            raise p.fail("trailing ','")
    return found


def serialize_string(text: str, limit: int) -> str:
    """``text`` as an RFC 9651 string (section 4.1.6) of at most ``limit`` characters
    between its quotes: what a string cannot hold (controls, non-ASCII) becomes ``?``, and
    a longer text is cut and ends in ``...``."""
    text = "".join(c if " " <= c <= "~" else "?" for c in text)
    if len(text) > limit:
        text = text[:max(0, limit - 3)] + "..."
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
