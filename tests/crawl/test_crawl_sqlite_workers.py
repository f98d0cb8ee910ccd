"""Several ``polite crawl`` processes started together on one new SQLite store share its
frontier as workers share a Redis one: leases have owners, a worker starting gives back only
the leases of workers that are gone, and each ends once nothing is queued or leased.
Measured at a loopback site that logs every arrival: no page is fetched twice, every worker
exits."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

from tests.commands import command_line
from tests.sites import Reply, Site, serve

HTML = {"Content-Type": "text/html"}
PAGES = ["/", "/a", "/b", "/c", "/d", "/e"]
WORKERS = 4
ROUNDS = 3


def _site() -> Site:
    made = Site("127.0.95.7")
    made.routes["/robots.txt"] = Reply(200, b"User-agent: *\nCrawl-delay: 0.05\n")
    links = "".join(f'<a href="{page}">{page}</a>' for page in PAGES)
    for page in PAGES:
        made.routes[page] = Reply(200, links.encode(), HTML)
    return made


def test_processes_started_together_on_one_sqlite_store_fetch_each_page_once(
        tmp_path: Path) -> None:
    site = _site()
    with serve(site):
        for round_ in range(ROUNDS):
            site.requests.clear()
            store = f"sqlite:///{tmp_path / f'shared-{round_}.sqlite'}"
            workers = [subprocess.Popen(
                command_line("crawl", site.origin + "/", "--out",
                             str(tmp_path / f"out-{round_}-{n}"), "--store", store,
                             "--allow-private", "--default-delay-s", "0", "--json"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for n in range(WORKERS)]
            summaries = []
            try:
                for process in workers:
                    out, err = process.communicate(timeout=120)  # every worker ends
                    assert process.returncode == 0, err
                    summaries.append(json.loads(out))
            finally:
                for process in workers:
                    if process.poll() is None:
                        process.kill()
                        process.communicate()
            pages = Counter(path for path in site.requests if path != "/robots.txt")
            assert pages == Counter(PAGES), f"round {round_}: {pages}"
            assert sum(summary["fetched"] for summary in summaries) == len(PAGES)
            for summary in summaries:
                assert summary["frontier"]["queued"] == summary["frontier"]["leased"] == 0
