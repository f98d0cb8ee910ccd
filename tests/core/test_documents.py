"""One bounded reading of the JSON and TOML polite is given: a document nested deeper than
64 arrays or objects is refused by a scan before any recursive parser runs, with its line,
on every input that reads one (key directories and range files have tests of their own
with real servers)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import pytest

from polite.core._documents import MAX_DEPTH, read_json, read_toml, read_toml_config
from polite.core.robots.usage import from_tdmrep
from polite.core.site import parse_crawlers
from polite.core.site.rules import rules_from_json
from polite.errors import ConfigError, DocumentTooLarge, MalformedDocument
from tests.commands import command_line

DEEP_JSON = "[" * 60_000
DEEP_TOML = "a = " + "[" * 3_000 + "]" * 3_000 + "\n"


def test_json_nested_as_deep_as_allowed_is_read_and_one_deeper_is_refused() -> None:
    assert read_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) == \
        json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    with pytest.raises(MalformedDocument, match=f"nested deeper than {MAX_DEPTH} at line 2"):
        read_json("{\"a\":\n" + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}")
    with pytest.raises(MalformedDocument, match="nested deeper than 64 at line 1"):
        read_json(DEEP_JSON.encode())


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"keys": ["[" * 500, '{\\"[' * 100, "]" * 500]})
    assert read_json(text)["keys"][0] == "[" * 500
    toml = "".join(('a = "[[[[{{{{" # [[[[[\nb = \'[[[[\'\nc = """\n[[[[\n"""\n'
                    "d = '''[[[[{{{{'''\n").replace(" = ", f"{i} = ") for i in range(30))
    assert read_toml(toml)["a29"] == "[[[[{{{{"


def test_bad_json_and_toml_are_refused_not_raised() -> None:
    for bad in ("{", "[1,]", "\ud800", "1" * 5000, b"\xff\xfe\x00"):
        with pytest.raises(MalformedDocument):
            read_json(bad)
    with pytest.raises(MalformedDocument, match="over 10 bytes"):
        read_json(b" " * 11, max_bytes=10)
    for bad in ("a = ", "a = {b = [1, }", DEEP_TOML, "a = " + "{b = " * 2000 + "1" + "}" * 2000):
        with pytest.raises(MalformedDocument):
            read_toml(bad)


def test_a_deep_config_file_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"^--config x.toml: nested deeper than 64 at line 1"):
        read_toml_config(DEEP_TOML.encode(), "--config x.toml")
    assert read_toml_config(b"port = 8080\n", "--config x.toml") == {"port": 8080}


@pytest.mark.parametrize("command", [["crawl", "http://127.0.0.1:9/", "--out", "out"],
                                     ["serve"]])
def test_the_commands_refuse_a_deep_config_file_in_one_line(tmp_path: Path,
                                                            command: list[str]) -> None:
    config = tmp_path / "deep.toml"
    config.write_text(DEEP_TOML)
    done = subprocess.run(command_line(*command, "--config", str(config)),
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"--config {config}: nested deeper than 64 at line 1" in done.stderr


def test_every_json_input_reads_through_the_bound() -> None:
    assert "tdmrep.json: nested deeper than 64" in from_tdmrep(DEEP_JSON, "http://a/x").issues[0]
    with pytest.raises(ConfigError, match=r"crawlers\.json: nested deeper than 64"):
        parse_crawlers(DEEP_JSON, source="crawlers.json")
    with pytest.raises(ConfigError, match="nested deeper than 64"):
        rules_from_json(DEEP_JSON)


def test_a_deep_line_of_a_workers_pages_is_a_bad_line_when_merged(tmp_path: Path) -> None:
    worker = tmp_path / "w1"
    worker.mkdir()
    good = json.dumps({"url": "http://a.example/", "outcome": "fetched", "bytes": 3})
    (worker / "pages.jsonl").write_text(good + "\n" + DEEP_JSON + "\n")
    done = subprocess.run(command_line("crawl", "merge", str(worker),
                                       "--out", str(tmp_path / "merged")),
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    assert (tmp_path / "merged" / "pages.jsonl").read_text() == good + "\n"
    assert "1 unreadable lines left out" in done.stdout


def _lines_run(work: Callable[[], object]) -> int:
    """How many lines of polite's Python ``work`` runs (every frame, however deep; not the
    lines of what else may run meanwhile, such as a collector's callback)."""
    count = 0
    ours = str(Path(read_json.__code__.co_filename).parents[1])

    def trace(frame: FrameType, event: str, arg: object) -> Callable[..., object]:
        nonlocal count
        if event == "line" and frame.f_code.co_filename.startswith(ours):
            count += 1
        return trace

    sys.settrace(trace)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def test_the_depth_scan_steps_over_strings_and_flat_pairs_at_once() -> None:
    """The scan runs in the caller's one step (an event loop's hold): a tdmrep.json of
    9,571 entries was 50,000 tokens, a turn of Python each (13 ms); a REST body of 1 MiB of
    short strings 200,000 (49 ms). Strings, and a pair of brackets with none inside, are
    now stepped over by the regular expression engine: a few tokens whatever their number."""
    tdmrep = json.dumps([{"location": f"/*x{n}*y", "tdm-reservation": 1}
                         | ({"tdm-policy": f"https://example.com/p{n}"} if not n % 10 else {})
                         for n in range(9_571)])
    strings = json.dumps(["a"] * 200_000)
    pairs = "[" + ",".join(["[]", "{}", '{"a": 1, "b": "]"}'] * 50_000) + "]"
    for text in (tdmrep, strings, pairs):
        assert _lines_run(lambda text=text: read_json(text)) < 200
    assert read_json(tdmrep)[9_570] == json.loads(tdmrep)[9_570]


@pytest.mark.parametrize("text", [
    "[" * 64 + "[]" + "]" * 64,  # a flat pair one level too deep
    "[" * 63 + "[]" + "]" * 63,  # as deep as allowed
    "[" * 63 + '{"a": "[[[", "b": ["]"]}' + "]" * 63,
    '[{"a": "\\"[", "b": []}, "' + "[" * 70 + '"]',
    '["unterminated' + "[" * 70,
    "]]]" + "[" * 64 + "]" * 64,
    '{"x": [\n' * 40 + "1" + "]}" * 40,
])
def test_the_depth_scan_answers_as_a_bracket_at_a_time_does(text: str) -> None:
    """The same answer as counting every bracket outside a string, one at a time."""
    depth, line = 0, None
    for token in re.finditer(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', text, re.S):
        if token.group() in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, token.start()) + 1
                break
        elif token.group() in "]}":
            depth = max(0, depth - 1)
    if line is not None:
        with pytest.raises(MalformedDocument, match=f"nested deeper than 64 at line {line}$"):
            read_json(text)
    else:
        try:
            read_json(text)
        except MalformedDocument as exc:  # not JSON, but not too deep
            assert "nested deeper" not in str(exc), exc


@pytest.mark.parametrize("text", [
    "[]", '["a", "b,c", "[d"]', '[{"a": 1, "b": [2, 3]}, {}]', "[" * 5 + "]" * 5,
    '{"a": "\\",[", "b": {"c": [1, {"d": 2}]}}', '["unterminated, [[', "1, 2, 3",
])
def test_items_are_counted_at_each_comma_and_opening_bracket_outside_a_string(
        text: str) -> None:
    """An array element or object member is counted once (an empty one counts as one):
    as many as the commas and opening brackets outside strings, one at a time."""
    count = sum(1 for token in re.finditer(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{,]', text, re.S)
                if token.group() in "[{,")
    for max_items in (count - 1, count):
        try:
            read_json(text, max_items=max_items)
        except DocumentTooLarge as exc:
            assert max_items < count and f"more than {max_items} items" in str(exc)
        except MalformedDocument as exc:  # not JSON, but not too large
            assert max_items == count or count == 0, exc
        else:
            assert max_items == count


def test_the_count_of_items_stops_at_the_bound_whatever_follows() -> None:
    """A REST body is counted before it is parsed: the parser made 300,000 objects of 1 MiB
    of empty arrays (120 ms in one hold of the event loop). The count's turns of Python are
    bounded by the items allowed, not by the document's."""
    wide = "[" + ",".join(["{}"] * 300_000) + "]"
    few = "[" + ",".join(["{}"] * 50) + "]"
    with pytest.raises(DocumentTooLarge, match=r"more than 100 items at line 1$"):
        read_json(wide, max_depth=2, max_items=100)


    def refused() -> None:
        with pytest.raises(DocumentTooLarge):
            read_json(wide, max_depth=2, max_items=100)

    assert _lines_run(refused) < 2 * _lines_run(lambda: read_json(few, max_depth=2,
                                                                  max_items=100)) + 50
    with pytest.raises(MalformedDocument, match=r"nested deeper than 1 at line 2$"):
        read_json('["a",\n[]]', max_depth=1, max_items=100)
