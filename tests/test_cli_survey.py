"""``polite survey --robots-dir`` and ``polite report``, run as a user runs them."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import pytest

from tests.commands import run


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def test_a_folder_of_robots_txt_files_gives_the_tables(tmp_path: Path) -> None:
    files = tmp_path / "robots"
    files.mkdir()
    (files / "a.example.txt").write_bytes(b"User-agent: *\nDisallow: /x\nDisallow: /y\n"
                                          b"Sitemap: https://a.example/s.xml\n")
    (files / "b.example.txt").write_bytes(b"User-agent: Googlebot/2.1\nDisallow: /\n"
                                          b"User-agent: *\nAllow: /\n")
    (files / "c.example.txt").write_bytes(b"<html><body>not here</body></html>")
    (files / "d.example.txt").write_bytes(b"# empty\n")
    out = tmp_path / "survey"
    first = run("survey", "--robots-dir", str(files), "--out", str(out))
    assert first.returncode == 0 and "4 sites recorded" in first.stdout
    (files / "e.example.txt").write_bytes(b"User-agent: *\nDisallow:\n")
    again = run("survey", "--robots-dir", str(files), "--out", str(out))
    assert "1 site recorded" in again.stdout  # the four recorded are not read again
    report = run("report", str(out), "--no-figures")  # the tables are read
    assert report.returncode == 0, report.stderr
    tables = out / "report" / "tables"
    outcomes = {row["outcome"]: int(row["sites"]) for row in rows(tables / "outcomes.csv")}
    assert outcomes["ok"] == 3 and outcomes["html"] == 1 and outcomes["empty"] == 1
    fields = {row["field"]: row for row in rows(tables / "fields.csv")}
    assert (fields["User-agent"]["files"], fields["User-agent"]["fields"]) == ("3", "4")
    assert (fields["Disallow"]["files"], fields["Disallow"]["fields"]) == ("3", "4")
    agents = rows(tables / "agents.csv")
    assert [(row["agent"], row["occurrences"]) for row in agents] == [("*", "3"),
                                                                      ("Googlebot", "1")]
    domains = {row["domain"]: row for row in rows(tables / "domains.csv")}
    assert domains["a.example"]["robots_lines"] == "4"
    assert domains["b.example"]["groups"] == "2" and domains["c.example"]["outcome"] == "html"


def test_bad_folders_are_clear_errors(tmp_path: Path) -> None:
    missing = run("survey", "--robots-dir", str(tmp_path / "nope"), "--out", str(tmp_path))
    assert missing.returncode == 2 and "not a folder" in missing.stderr
    nothing = run("report", str(tmp_path))
    assert nothing.returncode == 2 and "no survey here" in nothing.stderr


def test_report_over_several_folders_reads_their_union(tmp_path: Path) -> None:
    parts = {"one": {"a.example": b"User-agent: *\nDisallow: /a\n",
                     "b.example": b"<html>a home page</html>"},
             "two": {"b.example": b"User-agent: *\nDisallow: /b\n",
                     "c.example": b"User-agent: x\nDisallow: /\n"}}
    for name, files in parts.items():
        folder = tmp_path / f"{name}-robots"
        folder.mkdir()
        for host, body in files.items():
            (folder / f"{host}.txt").write_bytes(body)
        done = run("survey", "--robots-dir", str(folder), "--out", str(tmp_path / name))
        assert done.returncode == 0, done.stderr
    folders = [str(tmp_path / "one"), str(tmp_path / "two")]
    unnamed = run("report", *folders)
    assert unnamed.returncode == 2 and "--out FOLDER" in unnamed.stderr
    merged = run("report", *folders, "--out", str(tmp_path / "all"), "--no-figures")
    assert merged.returncode == 0, merged.stderr
    assert "3 domains of 2 folders" in merged.stdout
    domains = {row["domain"]: row["outcome"]
               for row in rows(tmp_path / "all" / "report" / "tables" / "domains.csv")}
    # b.example was recorded by both: the later record is taken
    assert domains == {"a.example": "ok", "b.example": "ok", "c.example": "ok"}
    again = run("report", *folders, "--out", str(tmp_path / "all"))
    assert again.returncode == 2 and "exists" in again.stderr
    missing = run("report", folders[0], str(tmp_path / "nope"), "--out", str(tmp_path / "x"))
    assert missing.returncode == 2 and "no survey here" in missing.stderr


def test_a_shared_survey_needs_a_list_and_a_redis_store(tmp_path: Path) -> None:
    listing = tmp_path / "top.txt"
    listing.write_text("a.example\n")
    no_list = run("survey", "--robots-dir", str(tmp_path), "--store", "redis://127.0.0.1:1/0",
                  "--out", str(tmp_path / "o"))
    assert no_list.returncode == 2 and "give DOMAINS" in no_list.stderr
    not_redis = run("survey", str(listing), "--store", "sqlite:///x.sqlite",
                    "--out", str(tmp_path / "o"))
    assert not_redis.returncode == 2 and "needs redis://" in not_redis.stderr


def test_input_files_that_are_not_text_are_clear_errors(tmp_path: Path) -> None:
    import random

    noise = random.Random(3).randbytes(4000)
    domains = tmp_path / "domains.txt"
    domains.write_bytes(b"1,a.example\n2,b.example\n" + noise)
    result = run("survey", str(domains), "--out", str(tmp_path / "s"))
    assert result.returncode == 2
    assert f"polite: {domains}:3: this line " in result.stderr
    assert "Traceback" not in result.stderr and "\x00" not in result.stderr
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"a.example\nb\xe9b\xe9.example\n")
    result = run("survey", str(latin), "--out", str(tmp_path / "s"))
    assert result.returncode == 2 and f"{latin}:2: this line is not UTF-8 text" in result.stderr
    hosts = tmp_path / "hosts"
    hosts.write_bytes(b"127.0.0.1 a.example\n\x00\x01\x02")
    fine = tmp_path / "fine.txt"
    fine.write_bytes(b"a.example\n")
    result = run("survey", str(fine), "--hosts", str(hosts), "--out", str(tmp_path / "s"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{hosts}:2: this line holds the control character \\x00" in result.stderr
    warc = tmp_path / "noise.warc"
    warc.write_bytes(noise)
    result = run("survey", "--warc", str(warc), "--out", str(tmp_path / "w"))
    assert result.returncode == 2 and "not a WARC file" in result.stderr
    assert len(result.stderr) < 300 and "\x00" not in result.stderr


def test_a_domain_list_header_is_skipped_and_bad_lists_are_refused(tmp_path: Path) -> None:
    from polite.errors import ConfigError
    from polite.survey.harvest import read_domains

    listing = tmp_path / "l.csv"
    # a CSV export: a byte order mark, CRLF line ends, a header line
    listing.write_bytes(b"\xef\xbb\xbfrank,domain\r\n1,a.example\r\n2,B.example.\r\n")
    assert read_domains(listing) == [(1, "a.example"), (2, "b.example")]
    listing.write_bytes(b"a.example\nrank,domain\n")  # a header only comes first
    with pytest.raises(ConfigError, match=r"l.csv:2: expected 'rank,domain'"):
        read_domains(listing)
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"# nothing yet\n\n")
    result = run("survey", str(empty), "--out", str(tmp_path / "s"))
    assert result.returncode == 2 and "no domain in it" in result.stderr, result.stderr
    long = tmp_path / "long.csv"
    long.write_text("1," + "a" * 100_000 + ".example\n")
    result = run("survey", str(long), "--out", str(tmp_path / "s"))
    assert result.returncode == 2, result.stderr
    assert "long.csv:1: not a domain" in result.stderr and "253 characters" in result.stderr
    assert len(result.stderr) < 400  # the name is not printed whole


def test_robots_dir_files_not_named_after_a_host_are_skipped_and_named(
        tmp_path: Path) -> None:
    files = tmp_path / "robots"
    files.mkdir()
    for name in ("a.example.txt", "not a host.txt", ".hidden.txt"):
        (files / name).write_bytes(b"User-agent: *\nDisallow: /x\n")
    result = run("survey", "--robots-dir", str(files), "--out", str(tmp_path / "s"))
    assert result.returncode == 0, result.stderr
    assert "1 site recorded" in result.stdout
    assert "2 files skipped, not named HOST.txt: '.hidden.txt', 'not a host.txt'" \
        in result.stderr
    with sqlite3.connect(tmp_path / "s" / "survey.sqlite") as db:
        assert [d for (d,) in db.execute("SELECT domain FROM sites")] == ["a.example"]


def test_a_folder_surveyed_otherwise_is_refused_naming_what_differs(tmp_path: Path) -> None:
    files = tmp_path / "robots"
    files.mkdir()
    (files / "a.example.txt").write_bytes(b"User-agent: *\nDisallow: /x\n")
    listing = tmp_path / "top.txt"
    listing.write_text("a.example\nb.example\n")
    hosts = tmp_path / "hosts"  # loopback, never asked: private addresses are refused
    hosts.write_text("127.0.35.201 a.example\n127.0.35.202 b.example\n")
    offline = tmp_path / "offline"
    assert run("survey", "--robots-dir", str(files), "--out", str(offline)).returncode == 0
    mixed = run("survey", str(listing), "--out", str(offline), "--hosts", str(hosts))
    assert mixed.returncode == 2, mixed.stderr
    assert f"source '--robots-dir {files.resolve()}' there, 'domain list " \
        f"{listing.resolve()}' here" in mixed.stderr
    fetched = tmp_path / "fetched"
    first = run("survey", str(listing), "--out", str(fetched), "--hosts", str(hosts))
    assert "not surveyed" in first.stderr  # the folder's settings are recorded all the same
    other = run("survey", str(listing), "--out", str(fetched), "--hosts", str(hosts),
                "--agent", "OtherBot", "--n0", "5")
    assert other.returncode == 2
    assert "agent 'polite' there, 'OtherBot' here; n0 '100' there, '5' here" in other.stderr
    # the same settings go on; so do another pace and robots.txt alone
    again = run("survey", str(listing), "--out", str(fetched), "--hosts", str(hosts),
                "--default-delay-s", "0", "--no-sitemaps")
    assert "holds a survey made otherwise" not in again.stderr, again.stderr
