"""One survey on three workers sharing a real redis-server: three real ``polite survey``
processes on a loopback farm, one killed with SIGKILL midway. The report over their three
folders equals a one-worker survey's of the same farm, and no site is asked for a file
twice but those the killed worker had in hand (requests counted at the farm)."""

from __future__ import annotations

import csv
import io
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.commands import run
from tests.conftest import ON_PORT_80
from tests.test_survey_resume import farm_of

pytestmark = ON_PORT_80

SITES = 90
CONCURRENCY = 8
LEASE_S = 2.0


def finished(database: Path) -> int:
    if not database.exists():
        return 0
    with sqlite3.connect(database) as db:
        try:
            return int(db.execute("SELECT count(*) FROM sitemap_sites").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def tables(folder: Path) -> dict[str, object]:
    found: dict[str, object] = {
        path.name: path.read_text() for path in (folder / "report" / "tables").iterdir()}
    assert found  # the report wrote its tables
    # The list of sitemap files names each by a row id (numbered as recorded, so in another
    # order by several workers) and times it: compared by URI and parent URI, untimed.
    rows = list(csv.DictReader(io.StringIO(str(found.pop("sitemap_files.csv")))))
    uri_of = {row["id"]: row["uri"] for row in rows}
    found["sitemap_files.csv"] = sorted(
        tuple(sorted({**row, "parent": uri_of.get(row["parent"], "")}.items()))
        for row in ({k: v for k, v in row.items() if k not in ("id", "seconds")}
                    for row in rows))
    return found


@pytest.mark.slow
def test_three_workers_one_killed_report_equals_one_workers(
        tmp_path: Path, redis_url: str, redis_prefix: str) -> None:
    farm = farm_of(SITES, zone="shared.test", third=28)
    hosts = tmp_path / "hosts"
    hosts.write_text(farm.hosts())
    listing = tmp_path / "top.txt"
    listing.write_text("".join(f"{rank},{name}\n"
                               for rank, name in enumerate(farm.sites, 1)))
    store = f"{redis_url}?prefix={redis_prefix}"
    common = ["--hosts", str(hosts), "--allow-private", "--delay", "0.2",
              "--concurrency", str(CONCURRENCY)]

    def worker(name: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "polite", "survey", str(listing), "--store", store,
             "--worker", name, "--lease-s", str(LEASE_S), "--out", str(tmp_path / name),
             *common], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    with farm.running():
        workers = [worker(f"w{i}") for i in range(3)]
        victim = tmp_path / "w0" / "survey.sqlite"
        deadline = time.monotonic() + 60
        while finished(victim) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers[0].send_signal(signal.SIGKILL)
        workers[0].communicate(timeout=10)
        # taken once the worker is gone: a request it sent just before may be logged by the
        # farm's thread a little later on a loaded machine, and is still its own
        killed_at = time.monotonic()
        killed_done = finished(victim)
        assert 5 <= killed_done < SITES // 2  # killed midway through its part
        for process in workers[1:]:
            _, errors = process.communicate(timeout=90)
            assert process.returncode == 0, errors.decode()
        shared_arrivals = list(farm.arrivals)
        farm.arrivals.clear()
        single = run("survey", str(listing), "--out", str(tmp_path / "one"), *common)
        assert single.returncode == 0, single.stderr

    # Every worker did a part, and the two that lived did the rest of the killed one's.
    parts = [finished(tmp_path / f"w{i}" / "survey.sqlite") for i in range(3)]
    assert all(part > 0 for part in parts)
    assert sum(parts) >= SITES
    # Each file was asked for once, but what the killed worker had in hand at the kill
    # (at most its concurrency of domains, each then asked again by another worker).
    asked = Counter((host, path) for _, host, path in shared_arrivals)
    assert set(asked) == {(host, path) for _, host, path in farm.arrivals}  # as one worker
    twice = {host for (host, _), n in asked.items() if n > 1}
    assert all(n <= 2 for n in asked.values())
    assert len(twice) <= CONCURRENCY
    robots_twice = {host for (host, path), n in asked.items()
                    if path == "/robots.txt" and n > 1}
    assert robots_twice <= twice
    first_asked: dict[str, float] = {}
    for arrived, host, _ in shared_arrivals:
        first_asked.setdefault(host, arrived)
    # a site asked again is one the killed worker had begun: asked before the kill
    assert all(first_asked[host] < killed_at for host in twice)
    print(f"sites asked twice: {len(twice)}, robots.txt twice: {len(robots_twice)}, "
          f"killed worker finished {killed_done}; parts {parts}")
    # The report over the three folders is the one-worker survey's, table for table.
    # the tables are compared: no figure drawn
    merged = run("report", *(str(tmp_path / f"w{i}") for i in range(3)),
                 "--out", str(tmp_path / "all"), "--no-figures")
    assert merged.returncode == 0, merged.stderr
    assert f"{SITES} domains of 3 folders" in merged.stdout
    alone = run("report", str(tmp_path / "one"), "--no-figures")
    assert alone.returncode == 0, alone.stderr
    assert tables(tmp_path / "all") == tables(tmp_path / "one")
    with sqlite3.connect(tmp_path / "all" / "survey.sqlite") as db:
        (urls,) = db.execute("SELECT count(*) FROM sitemap_urls").fetchone()
        orphans = db.execute("SELECT count(*) FROM sitemaps c LEFT JOIN sitemaps p "
                             "ON p.id = c.parent WHERE c.parent IS NOT NULL AND p.id IS NULL"
                             ).fetchone()[0]
    assert urls == 9 * SITES  # every page URL of every site, once
    assert orphans == 0  # the sitemap trees kept their parents through the merge
