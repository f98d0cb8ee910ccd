"""Text as files and servers give it: whether bytes are text at all (a domain list, a
robots.txt to keep, a URL list), and text made safe to print on a terminal."""

from __future__ import annotations

import re

from polite.errors import ConfigError

__all__ = ["control_at", "counted", "decode_text", "not_text", "shown"]

# Control bytes no text file holds: all of C0 but tab, line feed, form feed and carriage
# return, and DEL. A NUL, an escape sequence or a backspace means a binary file (or one that
# would rewrite the terminal it is printed on).
_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")
# What is escaped when shown: the control characters of C0 (tab and line feed aside), DEL and
# C1, and the bidirectional overrides that make a line read otherwise than it is.
_UNSHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _line_of(body: bytes, at: int) -> int:
    return body.count(b"\n", 0, at) + 1


def control_at(body: bytes) -> int | None:
    """Where ``body`` holds its first control byte no text file holds (a binary file's
    sign; any chunk of a file can be asked, a character cut at its end is no matter), or
    None."""
    found = _CONTROL_BYTES.search(body)
    return None if found is None else found.start()


def not_text(body: bytes) -> tuple[int, str] | None:
    """``(line, why)`` for the first line of ``body`` (from 1) that is not UTF-8 text, or
    ``None`` when every line is. A byte order mark at the start is text."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        control = _CONTROL_BYTES.search(body, 0, exc.start)
        if control is None:
            return _line_of(body, exc.start), "is not UTF-8 text (a binary file?)"
        return _line_of(body, control.start()), _control_reason(body[control.start()])
    control = _CONTROL_BYTES.search(body)
    if control is None:
        return None
    return _line_of(body, control.start()), _control_reason(body[control.start()])


def _control_reason(byte: int) -> str:
    return f"holds the control character \\x{byte:02x} (a binary file?)"


def shown(text: str) -> str:
    """``text`` with its control characters but line feeds written as escapes (``\\x01``),
    so that printing it cannot move the cursor, clear the screen or reorder the line."""
    if _UNSHOWN.search(text) is None:
        return text
    return _UNSHOWN.sub(lambda m: _escape(m.group()), text)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def decode_text(body: bytes, name: str) -> str:
    """``body``, a file meant to be text, as text (a byte order mark dropped);
    :class:`ConfigError` naming ``name`` and the first line that is not UTF-8 text."""
    found = not_text(body)
    if found is not None:
        line, why = found
        raise ConfigError(f"{name}:{line}: this line {why}")
    return body.decode("utf-8-sig")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and its noun, the plural (``noun + "s"`` unless given) but for one:
    ``1 site``, ``2,000 sites``."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
