"""Whether bytes are text, and text shown without its control characters."""

from __future__ import annotations

from polite.core.text import not_text, shown


def test_text_files_are_text_whatever_their_line_ends_and_marks() -> None:
    assert not_text(b"") is None
    assert not_text("\ufeffUser-agent: *\r\nDisallow: /caf\u00e9\f\n\tx\n".encode()) is None


def test_the_first_line_that_is_not_text_is_named() -> None:
    assert not_text(b"example.com\nexample.org\nbad\x00.example\n") == (
        3, "holds the control character \\x00 (a binary file?)")
    assert not_text(b"a\nb\n\xe9t\xe9\n") == (3, "is not UTF-8 text (a binary file?)")
    assert not_text(b"a\n\x1b[2Jb\n\xff\n")[0] == 2  # type: ignore[index]
    assert not_text(b"\xff\xfeU\x00s\x00")[0] == 1  # type: ignore[index]  (UTF-16)


def test_shown_escapes_what_would_act_on_a_terminal() -> None:
    assert shown("Disallow: /caf\u00e9\tx") == "Disallow: /caf\u00e9\tx"
    assert shown("a\x01b\x1b[2J\r\x7f\x85") == "a\\x01b\\x1b[2J\\x0d\\x7f\\x85"
    assert shown("x\u202ey") == "x\\u202ey"
    assert shown("one line\nthe next\n") == "one line\nthe next\n"
