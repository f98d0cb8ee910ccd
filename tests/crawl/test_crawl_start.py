"""What a crawl with its state in its folder loads: not redis-py, the REST service or the
proxy (a sixth of a second of a crawl's start, and objects every full garbage collection
walks for as long as the crawl runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from polite._loop import YOUNG_COLLECTION_EVERY
from tests.sites import Reply, Site, serve

# A crawl run in this process, then ``{after}`` (an expression) written to standard error as
# JSON, once the crawl is over
RUN = """
import gc, json, runpy, sys
sys.argv = ["polite", "crawl", *sys.argv[1:]]
try:
    runpy.run_module("polite", run_name="__main__")
except SystemExit:
    pass
print(json.dumps({after}), file=sys.stderr)
"""


def _crawl_one_page(tmp_path: Path, host: str, after: str) -> Any:
    """``polite crawl`` of a one-page site on ``host``, its folder in ``tmp_path``: what
    ``after`` (an expression of the crawl's process, with ``gc`` and ``sys``) was then."""
    site = Site(host)
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    site.routes["/"] = Reply(200, b"<p>one page</p>", {"Content-Type": "text/html"})
    with serve(site):
        done = subprocess.run(
            [sys.executable, "-c", RUN.format(after=after), site.origin + "/", "--out",
             str(tmp_path / "out"), "--allow-private", "--default-delay-s", "0", "--json"],
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert json.loads(done.stdout)["fetched"] == 1, done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_a_crawl_in_its_folder_loads_neither_redis_nor_the_service(tmp_path: Path) -> None:
    loaded = _crawl_one_page(tmp_path, "127.0.211.9", "sorted(sys.modules)")
    assert "polite.crawl.crawler" in loaded
    assert not [name for name in loaded if name == "redis" or name.startswith(
        ("redis.", "polite.storage.redis", "polite.api", "polite.proxy"))]


def test_a_crawls_start_up_objects_are_out_of_the_collectors_reach(tmp_path: Path) -> None:
    """Each full pass of the garbage collector walked the crawl's start-up objects
    (modules, classes, the store and client: some 20 ms a pass, three passes in a crawl of
    12,000 pages): they are frozen before the first page, as ``polite serve``'s are. The
    youngest generation is collected every 10,000 allocations rather than 700."""
    frozen, tracked, thresholds = _crawl_one_page(
        tmp_path, "127.0.211.13",
        "[gc.get_freeze_count(), len(gc.get_objects()), gc.get_threshold()]")
    assert frozen > 20_000, (frozen, tracked)
    assert tracked < frozen // 5, (frozen, tracked)
    assert thresholds == [YOUNG_COLLECTION_EVERY, 10, 10], thresholds
