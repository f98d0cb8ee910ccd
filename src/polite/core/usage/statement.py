"""One statement of preference read into allow / disallow / unknown per purpose.

The reading follows draft-ietf-aipref-vocab-07, section 6.5: the text is parsed as an
RFC 9651 dictionary; a key's value counts only when it is the token ``y`` or ``n`` (``yes``
/ ``no`` for Content Signals); unknown keys and all parameters are ignored; a value that is
not a dictionary leaves every preference unknown. The robots.txt rule value (draft-ietf-
aipref-attach-05, section 3.2) is an optional path, then the statement.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from polite.core.usage.sf import MAX_FIELD_CHARS, Item, Member, Token, parse_dictionary
from polite.core.usage.vocab import Vocabulary
from polite.errors import MalformedField

__all__ = ["Pref", "RuleValue", "Statement", "parse_rule_value", "parse_statement",
           "read_rule_value", "rule_path"]


class Pref(enum.StrEnum):
    ALLOW = "allow"
    DISALLOW = "disallow"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Statement:
    """A parsed statement: its members (key -> value) as the dictionary holds them."""

    text: str
    members: tuple[tuple[str, Member], ...]

    def keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.members)

    def pref(self, vocab: Vocabulary, purpose: str) -> Pref:
        """The preference for ``purpose`` under ``vocab``: the most specific stated label
        of its chain (older AIPREF revisions nest categories)."""
        found = dict(self.members)
        for label in vocab.chain(purpose):
            member = found.get(label)
            if isinstance(member, Item) and isinstance(member.value, Token):
                if member.value.value == vocab.allow:
                    return Pref.ALLOW
                if member.value.value == vocab.disallow:
                    return Pref.DISALLOW
            if member is not None:
                return Pref.UNKNOWN  # stated, but not as y/n: unknown, not inherited
        return Pref.UNKNOWN

    def unknown_keys(self, vocab: Vocabulary) -> tuple[str, ...]:
        return tuple(key for key in self.keys() if key not in vocab.labels)

    def odd_values(self, vocab: Vocabulary) -> tuple[str, ...]:
        """Known keys whose value is not one of the vocabulary's tokens (read as unknown)."""
        odd = []
        for key, member in self.members:
            if key not in vocab.labels:
                continue
            ok = (isinstance(member, Item) and isinstance(member.value, Token)
                  and member.value.value in (vocab.allow, vocab.disallow))
            if not ok:
                odd.append(key)
        return tuple(odd)


def parse_statement(text: str) -> Statement:
    """``text`` parsed; raises :class:`MalformedField` when it is no dictionary."""
    members = parse_dictionary(text.strip(" \t"))
    return Statement(text.strip(" \t"), tuple(members.items()))


@dataclass(frozen=True, slots=True)
class RuleValue:
    """A ``Content-Usage`` (or ``Content-Signal``) robots.txt value: ``path`` as written
    (``""`` when absent, which matches every path) and the statement's text, read when
    asked for (:attr:`statement`): a file may hold thousands of these, and most are never
    the one that applies."""

    path: str
    text: str

    @property
    def statement(self) -> Statement:
        """The statement, parsed (each time: it was found readable when the value was)."""
        return parse_statement(self.text)


# A statement of plain members (``key`` or ``key=token``, no parameters) is a dictionary
# RFC 9651 reads whatever the keys: what nearly every line says, known readable without
# the parser (a fifth of the time).
_KEY = r"[a-z*][a-z0-9_.*-]*"
_MEMBER = rf"{_KEY}(?:=[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*)?"
_PLAIN = re.compile(rf"{_MEMBER}(?:[ \t]*,[ \t]*{_MEMBER})*").fullmatch


def rule_path(text: str) -> str:
    """The path of a rule value (``""`` when it has none): from a leading ``/`` up to the
    first SP or HTAB."""
    text = text.lstrip(" \t")
    if not text.startswith("/"):
        return ""
    cut = min((i for i in (text.find(" "), text.find("\t")) if i >= 0), default=len(text))
    return text[:cut]


def parse_rule_value(text: str) -> RuleValue:
    """Split a rule value into path and statement (attach-05, 3.2): a value starting with
    ``/`` has a path up to the first SP or HTAB. Raises :class:`MalformedField` when the
    statement is not readable."""
    text = text.strip(" \t")
    path = rule_path(text)
    if path:
        if len(path) == len(text):
            raise MalformedField("a path with no statement after it", len(text))
        text = text[len(path):].strip(" \t")
    if len(text) > MAX_FIELD_CHARS or _PLAIN(text) is None:
        parse_statement(text)  # raises when it is not a dictionary
    return RuleValue(path, text)


def read_rule_value(text: str) -> object:
    """The robots.txt reader's hook: the :class:`RuleValue`, or ``None`` when malformed (the
    line is then skipped and reported)."""
    try:
        return parse_rule_value(text)
    except MalformedField:
        return None
