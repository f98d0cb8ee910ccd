"""The one reading of JSON and TOML documents that come from outside: key directories, IP
range files, tdmrep.json, crawler lists, site rules, REST bodies and config files. Each is
bounded in bytes (by its caller) and in nesting: a document nested deeper than
:data:`MAX_DEPTH` is refused by a linear scan before it is parsed, so neither the JSON
decoder nor tomllib (both recursive) can run out of stack on it."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

from polite.core.text import decode_text
from polite.errors import ConfigError, DocumentTooLarge, MalformedDocument

__all__ = ["MAX_DEPTH", "read_json", "read_toml", "read_toml_config"]

# Arrays and objects (tables) inside one another. Every document polite reads needs a
# handful (a JWK Set 3, a range file 3, a crawler list 4); 64 leaves room for others' use
# and keeps the recursive parsers far from Python's recursion limit.
MAX_DEPTH = 64

# What holds brackets that do not nest: strings (and, in TOML, comments). Each alternative
# is written so that a failed match backtracks linearly.
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
_TOML_TOKENS = re.compile(
    r'"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""'
    r"|'''[^']*(?:'(?!'')[^']*)*'''"
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
    r"|'[^'\n]*'"
    r"|#[^\n]*"
    r"|[\[\]{}]", re.S)
# What the JSON scan steps over at once, by the regular expression engine's own loop: the
# strings, a '"' that opens none, what is neither, and a pair of brackets with none inside
# (an entry of a list of objects, an empty list), then the next bracket if any; each part
# possessive, so that nothing is tried twice. One token a bracket that holds brackets,
# rather than one a string and a bracket (50,000 for a tdmrep.json of 9,571 entries,
# 13 ms in one hold of an event loop).
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_FLAT = rf'[\[{{](?:{_STRING}|"|[^"\[\]{{}}]++)*+[\]}}]'
_JSON_RUNS = re.compile(rf'(?:{_STRING}|"|[^"\[\]{{}}]++|{_FLAT})*+([\[\]{{}}])?', re.S)
# What the count of items steps over at once: strings and what is neither a bracket nor a
# comma; then the next of those, if any.
_JSON_ITEMS = re.compile(rf'(?:{_STRING}|"|[^"\[\]{{}},]++)*+([\[\]{{}},])?', re.S)
_OPENING = frozenset("[{")
_CLOSING = frozenset("]}")


def _too_deep(text: str, tokens: re.Pattern[str], max_depth: int,
              runs: re.Pattern[str] | None = None) -> int | None:
    """The line (from 1) where ``text`` nests deeper than ``max_depth``, or ``None``.
    ``runs`` (JSON's): a match of it steps over what holds no bracket that counts at the
    depth reached (it may step over a pair only where the pair is not too deep)."""
    depth = 0
    at = 0
    while True:
        if runs is not None and depth < max_depth:
            found = runs.match(text, at)
            assert found is not None  # it matches the empty string
            char = found.group(1)
            if char is None:
                return None
            start = found.end() - 1
        else:
            found = tokens.search(text, at)
            if found is None:
                return None
            char = found.group()
            start = found.start()
        at = found.end()
        if char in _OPENING:
            depth += 1
            if depth > max_depth:
                return text.count("\n", 0, start) + 1
        elif char in _CLOSING:
            depth = max(0, depth - 1)


def _too_many(text: str, max_items: int, max_depth: int) -> tuple[bool, int] | None:
    """Whether ``text`` holds more than ``max_items`` items (``True``) or nests deeper than
    ``max_depth`` (``False``), and the line (from 1) where it does; ``None`` when neither.
    An item is counted at each comma and each opening bracket outside a string: every
    array element and object member once (an empty array or object counts as one). A turn
    of Python a comma or bracket, so the scan's work is bounded by ``max_items``, whatever
    the text holds past it."""
    items = depth = at = 0
    while True:
        found = _JSON_ITEMS.match(text, at)
        assert found is not None  # it matches the empty string
        char = found.group(1)
        if char is None:
            return None
        at = found.end()
        if char == ",":
            items += 1
        elif char in _OPENING:
            items += 1
            depth += 1
            if depth > max_depth:
                return False, text.count("\n", 0, at) + 1
        else:
            depth = max(0, depth - 1)
        if items > max_items:
            return True, text.count("\n", 0, at) + 1


def _text(body: str | bytes) -> str:
    if isinstance(body, str):
        return body
    try:
        # as json.loads reads bytes: UTF-8 (a byte order mark allowed), -16 or -32
        return body.decode(json.detect_encoding(body), "surrogatepass")
    except UnicodeDecodeError as exc:
        line = body[:exc.start].count(b"\n") + 1
        raise MalformedDocument(f"line {line} is not UTF-8 text") from None


def read_json(body: str | bytes, *, max_bytes: int | None = None,
              max_depth: int = MAX_DEPTH, max_items: int | None = None) -> Any:
    """``body`` as JSON; :class:`MalformedDocument` saying why when it is not text, not
    JSON, or nested deeper than ``max_depth``; :class:`DocumentTooLarge` when it is larger
    than ``max_bytes`` or holds more than ``max_items`` array elements and object members
    in all. Both bounds are checked before the parser runs, whose time (a turn of C a
    value, but 120 ms for 300,000 empty arrays) is not given back to an event loop."""
    if max_bytes is not None and len(body) > max_bytes:
        raise DocumentTooLarge(f"over {max_bytes} bytes")
    text = _text(body)
    if max_items is not None:
        found = _too_many(text, max_items, max_depth)
        if found is not None:
            many, line = found
            if many:
                raise DocumentTooLarge(f"more than {max_items} items at line {line}")
            raise MalformedDocument(f"nested deeper than {max_depth} at line {line}")
    else:
        deep = _too_deep(text, _JSON_TOKENS, max_depth, _JSON_RUNS)
        if deep is not None:
            raise MalformedDocument(f"nested deeper than {max_depth} at line {deep}")
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, and a number of too many digits
        raise MalformedDocument(f"not JSON: {exc}") from None
    except RecursionError:  # the scan above keeps this from happening; never a traceback
        raise MalformedDocument(f"nested deeper than {max_depth}") from None


def read_toml(text: str, *, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """``text`` as a TOML document; :class:`MalformedDocument` saying why when it is not
    TOML or nests arrays and inline tables deeper than ``max_depth``."""
    line = _too_deep(text, _TOML_TOKENS, max_depth)
    if line is not None:
        raise MalformedDocument(f"nested deeper than {max_depth} at line {line}")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MalformedDocument(f"not TOML: {exc}") from None
    except RecursionError:
        raise MalformedDocument(f"nested deeper than {max_depth}") from None


def read_toml_config(body: bytes, name: str) -> dict[str, Any]:
    """A config file's bytes as TOML; :class:`ConfigError` naming ``name`` and the line that
    is not text, or why it is not TOML polite reads."""
    try:
        return read_toml(decode_text(body, name))
    except MalformedDocument as exc:
        raise ConfigError(f"{name}: {exc}") from None
