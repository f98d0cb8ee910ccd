"""``polite frontier status`` reads a frontier's store, and ``--metrics-port`` serves its
counters in Prometheus's text format."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.commands import command_line
from tests.frontier.frontier_client import KINDS, environment, frontier, said, store_url, stubs


@pytest.mark.parametrize("kind", KINDS)
def test_status_and_metrics_tell_the_same_counts(kind: str, tmp_path: Path,
                                                 request: pytest.FixtureRequest) -> None:
    pb = stubs(tmp_path.parent / "stubs")[0]
    store = store_url(kind, tmp_path, request)
    items = [pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=url)))
             for url in ("http://a.example/1", "http://a.example/2", "http://b.example/",
                         "notaurl")]
    with frontier(tmp_path, "--store", store, "--robots", "off", "--metrics-port",
                  "0") as client:
        acks = list(client.PutURLs(iter(items)))
        assert len(acks) == 4
        got = list(client.GetURLs(pb.GetParams(key="a.example", max_urls_per_queue=1)))
        assert len(got) == 1
        with httpx.Client(trust_env=False, timeout=30) as http:
            metrics = http.get(said[0])
            missing = http.get(said[0].replace("/metrics", "/other"))
        status = subprocess.run(
            command_line("frontier", "status", "--store", store, "--json"),
            capture_output=True, text=True, env=environment(), timeout=60, check=True)
        text = subprocess.run(
            command_line("frontier", "status", "--store", store),
            capture_output=True, text=True, env=environment(), timeout=60, check=True)
    assert metrics.status_code == 200 and missing.status_code == 404
    assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = set(metrics.text.splitlines())
    assert {'polite_frontier_put_total{status="ok"} 3',
            'polite_frontier_put_total{status="skipped"} 1',
            "polite_frontier_handed_out_total 1",
            'polite_frontier_rpc_total{rpc="GetURLs"} 1',
            'polite_frontier_urls{crawl="DEFAULT",state="queued"} 2',
            'polite_frontier_urls{crawl="DEFAULT",state="in_process"} 1'} <= lines
    crawls = json.loads(status.stdout)["crawls"]
    assert [(c["crawl"], c["queued"], c["in_process"], c["queues"]) for c in crawls] == [
        ("DEFAULT", 2, 1, 2)]
    assert [q["key"] for q in crawls[0]["largest_queues"]] == ["a.example", "b.example"]
    assert "crawl DEFAULT: 2 queued, 1 in process, 0 completed; 2 queues" in text.stdout


def test_status_of_a_missing_store_is_an_error(tmp_path: Path) -> None:
    result = subprocess.run(
        command_line("frontier", "status", "--store",
                     f"sqlite:///{tmp_path / 'none.sqlite'}"),
        capture_output=True, text=True, env=environment(), timeout=60)
    assert result.returncode == 2
    assert "no such file" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(("store", "said"), [
    ("memory://", "SQLite (sqlite:///PATH), Redis (redis://HOST:PORT/DB) or a Redis Cluster"),
    ("ftp://x", "--store"),
    ("redis://127.0.0.1:9/0", "--store redis://127.0.0.1:9/0: "),  # nothing listens
    ("redis://127.0.0.1:9/0?cluster=1", "--store redis://127.0.0.1:9/0?cluster=1: "),
    ("unix:///tmp/x.sock?cluster=1", "a Redis Cluster is reached over TCP"),
])
def test_a_store_it_cannot_use_is_said_without_a_traceback(store: str, said: str) -> None:
    result = subprocess.run(
        command_line("frontier", "serve", "--port", "0", "--store", store),
        capture_output=True, text=True, env=environment(), timeout=60)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr and "Traceback" not in result.stderr


def test_a_cluster_url_on_a_server_that_is_no_cluster_is_said(redis_url: str) -> None:
    store = f"{redis_url}?cluster=1"
    result = subprocess.run(
        command_line("frontier", "status", "--store", store),
        capture_output=True, text=True, env=environment(), timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"--store {store}: " in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1", "::"])
def test_beyond_loopback_the_service_refuses_to_start(host: str, tmp_path: Path) -> None:
    """It asks its clients for nothing: offered beyond the machine, anyone could read and
    change the crawl's frontier."""
    result = subprocess.run(
        command_line("frontier", "serve", "--host", host, "--port", "0",
                     "--store", f"sqlite:///{tmp_path / 'f.sqlite'}"),
        capture_output=True, text=True, env=environment(), timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"--host {host} is not a loopback address" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "f.sqlite").exists()  # refused before anything was made


# uf_queues as the first release of polite frontier serve made it
_FIRST_QUEUES = """
CREATE TABLE uf_queues (crawl TEXT NOT NULL, key TEXT NOT NULL, delay_s REAL,
    blocked_until REAL NOT NULL DEFAULT 0, served_at REAL NOT NULL DEFAULT 0,
    interval_s REAL NOT NULL DEFAULT 0, crawl_limit INTEGER NOT NULL DEFAULT 0,
    given INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (crawl, key));
INSERT INTO uf_queues (crawl, key) VALUES ('DEFAULT', 'old.example');
"""


def test_a_frontier_file_of_the_first_release_is_served(tmp_path: Path) -> None:
    """A file whose queues have no column for being held gets it when opened, and its URLs
    are handed out."""
    import sqlite3

    from polite.frontier._store import Put, URLStore

    path = tmp_path / "f.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(_FIRST_QUEUES)
    store = URLStore(str(path), default_delay_s=0.0, spacing_from_return=True)
    try:
        store.put([Put("DEFAULT", "http://old.example/", "old.example", {}, False)], 100.0)
        heads = store.heads("DEFAULT", "", per_queue=1, queues=1, now=101.0)
        assert [h.url for h in heads] == ["http://old.example/"]
        assert store.lease("DEFAULT", "http://old.example/", 30.0, 101.0, interval_s=1.0)
        store.hold([("DEFAULT", "old.example", 200.0)])
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT held_until FROM uf_queues").fetchall() == [(200.0,)]
