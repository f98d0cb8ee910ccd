"""One bounded reading of the JSON and TOML polite is given: a document nested deeper than
64 arrays or objects is refused by a scan before any recursive parser runs, with its line,
on every input that reads one (key directories and range files have tests of their own
with real servers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from polite.core._documents import MAX_DEPTH, read_json, read_toml, read_toml_config
from polite.core.robots.usage import from_tdmrep
from polite.core.site import parse_crawlers
from polite.core.site.rules import rules_from_json
from polite.errors import ConfigError, MalformedDocument

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
    done = subprocess.run([sys.executable, "-m", "polite", *command, "--config", str(config)],
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
    done = subprocess.run([sys.executable, "-m", "polite", "crawl", "merge", str(worker),
                           "--out", str(tmp_path / "merged")],
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    assert (tmp_path / "merged" / "pages.jsonl").read_text() == good + "\n"
    assert "1 unreadable lines left out" in done.stdout
