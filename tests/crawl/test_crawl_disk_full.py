"""A crawl on a disk that fills: it stops with an error and a non-zero exit, nothing it
fetched is lost or torn, and once there is room the same command fetches what is left,
each page once in all (counted at the site), every line of pages.jsonl whole."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import random
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from polite.crawl import CrawlSettings, open_crawler
from polite.crawl.output import RESERVE_NAME, CrawlOutput, WriteFailed
from polite.fetch.politeness import Politeness
from tests.commands import command_line
from tests.sites import Reply, Site, serve

PAGES = 60
PAGE_BYTES = 40_000  # not compressible: 60 pages take 2.4 MB of WARC


def site_of_pages(host: str) -> Site:
    site = Site(host)
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    rng = random.Random(7)
    links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(PAGES - 1)).encode()
    site.routes["/"] = Reply(200, b"<html><body>" + links + b"</body></html>",
                             {"Content-Type": "text/html"})
    for i in range(PAGES - 1):
        noise = rng.randbytes(PAGE_BYTES).hex()[:PAGE_BYTES].encode()
        site.routes[f"/p{i}"] = Reply(200, b"<html><body><p>" + noise + b"</p></body></html>",
                                      {"Content-Type": "text/html"})
    return site


def crawl(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command_line("crawl", *args, "--out", str(out), "--allow-private",
                     "--default-delay-s", "0", "--json"),
        capture_output=True, text=True, timeout=120, check=False)


@contextmanager
def small_filesystem(tmp_path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted for the test; skipped where mounting is not permitted."""
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root or CAP_SYS_ADMIN): "
                    f"{made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def grow(mount: Path, size: str) -> None:
    """Room made on the full disk: the tmpfs remounted larger, its files kept."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mount)], check=True)


def lines_of(path: Path) -> list[dict[str, object]]:
    text = path.read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]  # every line parses


# The WARC files fill the disk; or, with pages.jsonl alone, a disk filled but for 800 KB
# (the reserve and a little) fills at the SQLite store's commits or at pages.jsonl; or one
# with 500 KB free at the start, where the reserve is what room there is.
@pytest.mark.parametrize(("options", "filler_kb"), [
    ((), 0), (("--no-warc",), 1_200), (("--no-warc",), 1_500)],
    ids=["warc", "store", "nearly-full"])
def test_a_crawl_on_a_full_disk_stops_and_resumes_fetching_each_page_once(
        tmp_path: Path, options: tuple[str, ...], filler_kb: int) -> None:
    site = site_of_pages(f"127.0.134.{20 + filler_kb // 100}")
    with serve(site), small_filesystem(tmp_path, "2m") as disk:
        if filler_kb:
            (disk / "filler").write_bytes(b"\0" * filler_kb * 1024)
        out = disk / "crawl"  # the folder and its SQLite store on the small disk
        first = crawl(out, site.origin + "/", *options)
        assert first.returncode == 1, first.stderr
        assert "Traceback" not in first.stderr
        assert "No space left on device" in first.stderr or \
            "database or disk is full" in first.stderr, first.stderr
        assert "make room, then run the same command to go on" in first.stderr
        assert json.loads(first.stdout)["error"] in first.stderr  # --json says it too
        assert len(site.arrivals) < PAGES  # the disk filled before the crawl was done
        lines_of(out / "pages.jsonl")  # no torn line
        if filler_kb:
            (disk / "filler").unlink()
        else:
            grow(disk, "16m")
        second = crawl(out, *options)
        assert second.returncode == 0, second.stderr
        records = lines_of(out / "pages.jsonl")
        assert not (out / RESERVE_NAME).exists()  # given back when the crawl ended
    counts = Counter(path for _, path in site.arrivals)
    expected = {"/robots.txt", "/", *(f"/p{i}" for i in range(PAGES - 1))}
    assert set(counts) == expected
    twice = {path: n for path, n in counts.items() if n > 1 and path != "/robots.txt"}
    # each page fetched once, over both runs (else: what each run said, and the order the
    # site saw, for where the page fetched again was when the disk filled)
    assert not twice, (twice, first.stderr[-2000:], second.stderr[-2000:],
                       [path for _, path in sorted(site.arrivals)])
    fetched = Counter(str(r["url"]).removeprefix(site.origin) for r in records
                      if r.get("outcome") == "fetched")
    assert set(fetched) == expected - {"/robots.txt"} and set(fetched.values()) == {1}
    assert not [r for r in records if r.get("outcome") == "failed"]
    summary = json.loads(second.stdout)
    assert summary["frontier"]["queued"] == 0 and summary["frontier"]["fetched"] == PAGES


# -- the same, the failing write made at the file layer ----------------------------------------


def test_a_torn_last_line_is_cut_before_the_next_run_appends(tmp_path: Path) -> None:
    (tmp_path / "pages.jsonl").write_text('{"url":"a","outcome":"fetched"}\n{"url":"b","ou')
    (tmp_path / "sites.jsonl").write_text('{"host":"a"}\n{"ho')
    output = CrawlOutput(tmp_path, warc=False)
    output.page({"url": "c", "outcome": "fetched"})
    output.close()
    assert [r["url"] for r in lines_of(tmp_path / "pages.jsonl")] == ["a", "c"]
    assert lines_of(tmp_path / "sites.jsonl") == [{"host": "a"}]


class FullDisk:
    """``os.write`` as a disk with ``room`` bytes left has it: a short write, then ENOSPC;
    a file removed gives its bytes back."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, room: int) -> None:
        self.room = room
        self.write = os.write
        self.unlink = Path.unlink
        monkeypatch.setattr(os, "write", self._write)
        monkeypatch.setattr(Path, "unlink", lambda path, missing_ok=False:
                            self._unlink(path, missing_ok=missing_ok))

    def _write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        part = bytes(data[:self.room])
        self.room -= len(part)
        return self.write(fd, part)

    def _unlink(self, path: Path, missing_ok: bool = False) -> None:
        if path.name == RESERVE_NAME and path.exists():
            self.room += path.stat().st_size
        self.unlink(path, missing_ok=missing_ok)


def test_a_full_disk_gives_up_the_reserve_and_writes_the_line_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output = CrawlOutput(tmp_path, warc=True)
    assert (tmp_path / RESERVE_NAME).stat().st_size > 0
    disk = FullDisk(monkeypatch, room=10)
    output.page({"url": "http://e.com/a", "outcome": "fetched"})  # whole, in the reserve
    assert output.full and not (tmp_path / RESERVE_NAME).exists()
    disk.room = 5  # the reserve used up: the next write fails, clearly
    with pytest.raises(WriteFailed, match=r"cannot write .*pages.jsonl: No space left"):
        output.page({"url": "http://e.com/b", "outcome": "fetched"})
    output.close()
    text = (tmp_path / "pages.jsonl").read_text()
    assert text.startswith('{"url":"http://e.com/a","outcome":"fetched"}\n')
    assert not text.endswith("\n")  # torn: what the next run cuts off
    CrawlOutput(tmp_path, warc=False).close()
    assert [r["url"] for r in lines_of(tmp_path / "pages.jsonl")] == ["http://e.com/a"]


def test_a_page_whose_late_start_could_not_be_noted_is_recorded_not_fetched_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request that left late has its lateness written to the store once it is sent; the
    disk found full there stops the crawl, but the page, fetched already, is recorded (in
    the folder's reserve) rather than left queued, so the next run does not fetch it
    again."""
    site = site_of_pages("127.0.134.40")
    note_leaving_late = Politeness.note_leaving_late
    notes = 0

    def full_at_the_fourth(politeness: Politeness, url: str, late_s: float,
                           noted_s: float = 0.0) -> asyncio.Future[None]:
        nonlocal notes
        notes += 1
        if notes < 4:
            return note_leaving_late(politeness, url, late_s, noted_s)
        failed = asyncio.get_running_loop().create_future()
        failed.set_exception(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        return failed

    async def run(out: Path) -> dict[str, int]:
        settings = CrawlSettings(agent="LateBot", concurrency=1)
        async with open_crawler(out, settings, default_delay_s=0.0,
                                allow_private=True) as crawler:
            if not (out / "seeded").exists():
                await crawler.add_seeds([site.origin + "/"])
                (out / "seeded").touch()
            try:
                await crawler.run()
            finally:
                counts = (await crawler.counts())._asdict()
        return counts

    with serve(site):
        with monkeypatch.context() as late:
            # every request noted late, the fourth note finding the store's disk full
            late.setattr(Politeness, "is_late", lambda self, late_s: True)
            late.setattr(Politeness, "note_leaving_late", full_at_the_fourth)
            with pytest.raises(WriteFailed, match="No space left"):
                asyncio.run(asyncio.wait_for(run(tmp_path), 60))
        assert notes == 4 and len(site.arrivals) == 5  # robots.txt and four pages
        counts = asyncio.run(asyncio.wait_for(run(tmp_path), 60))
    assert counts["queued"] == 0 and counts["fetched"] == PAGES
    paths = Counter(path for _, path in site.arrivals if path != "/robots.txt")
    assert set(paths) == {"/", *(f"/p{i}" for i in range(PAGES - 1))}
    assert set(paths.values()) == {1}, {path: n for path, n in paths.items() if n > 1}
