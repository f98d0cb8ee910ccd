"""``polite survey --warc``: robots.txt captures of a WARC file (written here with warcio, the
shape of Common Crawl's robots.txt WARCs) give the same tables as fetching, each capture
classified like a fetch, redirects followed within the file."""

from __future__ import annotations

import gzip
import io
import json
import sqlite3
from pathlib import Path

from warcio.warcwriter import WARCWriter

from tests.commands import run

ROBOTS = b"User-agent: *\nDisallow: /private\nSitemap: https://a.example/s.xml\n"


def response(writer: WARCWriter, uri: str, status: int, body: bytes = b"",
             headers: list[tuple[str, str]] | None = None) -> None:
    head = "".join(f"{k}: {v}\r\n" for k, v in [("Content-Length", str(len(body))),
                                                  *(headers or [])])
    block = f"HTTP/1.1 {status} X\r\n{head}\r\n".encode() + body
    writer.write_record(writer.create_warc_record(uri, "response", payload=io.BytesIO(block),
                                                  length=len(block)))


def test_captures_land_in_their_classes(tmp_path: Path) -> None:
    path = tmp_path / "robots.warc.gz"
    with path.open("wb") as stream:
        writer = WARCWriter(stream, gzip=True)
        request = b"GET /robots.txt HTTP/1.1\r\nHost: a.example\r\n\r\n"
        writer.write_record(writer.create_warc_record(
            "https://a.example/robots.txt", "request", payload=io.BytesIO(request),
            length=len(request)))
        text = [("Content-Type", "text/plain")]
        response(writer, "https://a.example/robots.txt", 200, ROBOTS, text)
        response(writer, "https://a.example/robots.txt", 404)  # a second capture: ignored
        response(writer, "https://zipped.example/robots.txt", 200, gzip.compress(ROBOTS),
                 [*text, ("Content-Encoding", "gzip")])
        response(writer, "https://gone.example/robots.txt", 404)
        response(writer, "https://closed.example/robots.txt", 403)
        response(writer, "https://busy.example/robots.txt", 429)
        response(writer, "https://page.example/robots.txt", 200,
                 b"<!DOCTYPE html><html></html>", [("Content-Type", "text/html")])
        response(writer, "https://latin.example/robots.txt", 200,
                 b"User-agent: *\nDisallow: /\xe9\n", [("Content-Type",
                                                       "text/plain; charset=utf-8")])
        response(writer, "https://empty.example/robots.txt", 200, b"", text)
        big = b"User-agent: *\n" + b"Disallow: /x\n" * 60_000
        response(writer, "https://big.example/robots.txt", 200, big, text)
        response(writer, "http://moved.example/robots.txt", 301, headers=[
            ("Location", "https://www.moved.example/robots.txt")])
        response(writer, "https://www.moved.example/robots.txt", 200, ROBOTS, text)
        # the other way round, the target captured first: one site too, back.example
        response(writer, "https://back.example/robots.txt", 200, ROBOTS, text)
        response(writer, "http://www.back.example/robots.txt", 301, headers=[
            ("Location", "https://back.example/robots.txt")])
        response(writer, "http://lost.example/robots.txt", 302, headers=[
            ("Location", "https://elsewhere.example/robots.txt")])
        response(writer, "http://loop.example/robots.txt", 301, headers=[
            ("Location", "http://loop2.example/robots.txt")])
        response(writer, "http://loop2.example/robots.txt", 301, headers=[
            ("Location", "http://loop.example/robots.txt")])
        response(writer, "https://a.example/index.html", 200, b"<html></html>")
    (tmp_path / "junk.warc").write_bytes(b"this is not a warc\n")
    out = tmp_path / "survey"
    result = run("survey", "--warc", str(path), "--out", str(out))
    assert result.returncode == 0, result.stderr
    # moved.example and www.moved.example are one site, as are back.example and its www.
    assert "14 sites recorded" in result.stdout and "1 record not a robots.txt" in result.stdout
    with sqlite3.connect(out / "survey.sqlite") as db:
        rows = {d: (o, s, e, n) for d, o, s, e, n in db.execute(
            "SELECT domain, outcome, status, error, robots_bytes FROM sites")}
    assert {d: row[0] for d, row in rows.items()} == {
        "a.example": "ok", "zipped.example": "ok", "gone.example": "not_found",
        "closed.example": "forbidden", "busy.example": "server_error", "page.example": "html",
        "latin.example": "charset", "empty.example": "empty", "big.example": "too_big",
        "moved.example": "ok", "back.example": "ok", "lost.example": "not_found",
        "loop.example": "redirect_loop", "loop2.example": "redirect_loop"}
    assert rows["big.example"][3] == len(big)
    assert json.loads(rows["moved.example"][2])["redirects"] == [
        "https://www.moved.example/robots.txt"]
    report = run("report", str(out), "--no-figures")  # a table is read
    assert report.returncode == 0, report.stderr
    fields = (out / "report" / "tables" / "fields.csv").read_text()
    assert "Sitemap,4,4," in fields  # a, zipped, moved (www.moved's file) and back
    again = run("survey", "--warc", str(path), "--out", str(out))
    assert "0 sites recorded" in again.stdout  # www.moved.example is not a site again
    junk = run("survey", "--warc", str(tmp_path / "junk.warc"), "--out", str(out))
    assert junk.returncode == 2 and "not a WARC file" in junk.stderr
