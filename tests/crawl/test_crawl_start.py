"""What a crawl with its state in its folder loads: not redis-py, the REST service or the
proxy (a sixth of a second of a crawl's start, and objects every full garbage collection
walks for as long as the crawl runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.sites import Reply, Site, serve

RUN = """
import json, runpy, sys
sys.argv = ["polite", "crawl", *sys.argv[1:]]
try:
    runpy.run_module("polite", run_name="__main__")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def test_a_crawl_in_its_folder_loads_neither_redis_nor_the_service(tmp_path: Path) -> None:
    site = Site("127.0.211.9")
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    site.routes["/"] = Reply(200, b"<p>one page</p>", {"Content-Type": "text/html"})
    with serve(site):
        done = subprocess.run(
            [sys.executable, "-c", RUN, site.origin + "/", "--out", str(tmp_path / "out"),
             "--allow-private", "--default-delay-s", "0", "--json"],
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert json.loads(done.stdout)["fetched"] == 1, done.stderr
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert "polite.crawl.crawler" in loaded
    assert not [name for name in loaded if name == "redis" or name.startswith(
        ("redis.", "polite.storage.redis", "polite.api", "polite.proxy"))]


COLLECTOR = """
import gc, json, runpy, sys
sys.argv = ["polite", "crawl", *sys.argv[1:]]
try:
    runpy.run_module("polite", run_name="__main__")
except SystemExit:
    pass
print(json.dumps([gc.get_freeze_count(), len(gc.get_objects())]), file=sys.stderr)
"""


def test_a_crawls_start_up_objects_are_out_of_the_collectors_reach(tmp_path: Path) -> None:
    """Each full pass of the garbage collector walked the crawl's start-up objects
    (modules, classes, the store and client: some 20 ms a pass, three passes in a crawl of
    12,000 pages): they are frozen before the first page, as ``polite serve``'s are."""
    site = Site("127.0.211.13")
    site.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    site.routes["/"] = Reply(200, b"<p>one page</p>", {"Content-Type": "text/html"})
    with serve(site):
        done = subprocess.run(
            [sys.executable, "-c", COLLECTOR, site.origin + "/", "--out",
             str(tmp_path / "out"), "--allow-private", "--default-delay-s", "0", "--json"],
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert json.loads(done.stdout)["fetched"] == 1, done.stderr
    frozen, tracked = json.loads(done.stderr.strip().splitlines()[-1])
    assert frozen > 20_000, done.stderr
    assert tracked < frozen // 5, done.stderr
