"""Workers sharing one SQLite frontier: leases have owners, and a worker starting gives
back the leases of workers that are gone, never those of a live one. Real SQLite files."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polite.storage.frontier import LEASED, QUEUED, FrontierItem, SQLiteFrontier

pytestmark = pytest.mark.anyio

ITEM = FrontierItem("http://a.example/", "a.example")


async def test_an_acknowledgement_of_a_lease_another_worker_holds_changes_nothing(
        tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite"
    one, two = SQLiteFrontier(path, worker="one"), SQLiteFrontier(path, worker="two")
    await one.add([ITEM])
    assert await one.lease("a.example", time.time(), 600.0) is not None
    await two.done(ITEM.url, fetched=True)  # not its lease
    await two.release(ITEM)
    assert (await one.counts()).leased == 1
    await one.done(ITEM.url, fetched=True)
    assert (await one.counts()).fetched == 1
    await one.close()
    await two.close()


async def test_a_worker_starting_gives_back_only_the_leases_of_workers_gone(
        tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite"
    items = [FrontierItem(f"http://{h}.example/", f"{h}.example") for h in "abc"]
    live, killed = SQLiteFrontier(path, worker="live"), SQLiteFrontier(path, worker="killed")
    await live.add(items)
    now = time.time()
    async with live.holding(600.0):
        assert await live.lease("a.example", now, 600.0) is not None
        # a worker whose process has ended: a child that exits at once
        child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                               capture_output=True, text=True, check=True)
        killed._beat(now)
        killed._db.execute("UPDATE frontier_workers SET pid = ? WHERE worker = 'killed'",
                           (int(child.stdout),))
        assert await killed.lease("b.example", now, 600.0) is not None
        # a lease from a run that named no worker
        db = sqlite3.connect(path)
        db.execute("UPDATE frontier SET state = ?, lease_until = ? WHERE url = ?",
                   (LEASED, now + 600, items[2].url))
        db.commit()
        db.close()
        joining = SQLiteFrontier(path, worker="joining")
        async with joining.holding(600.0):
            states = dict(joining._db.execute("SELECT url, state FROM frontier"))
            assert states == {items[0].url: LEASED, items[1].url: QUEUED,
                              items[2].url: QUEUED}
            workers = {w for (w,) in joining._db.execute("SELECT worker FROM frontier_workers")}
            assert workers == {"live", "joining"}
        await joining.close()
    await live.close()
    await killed.close()


async def test_a_live_workers_leases_are_kept_past_their_time(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite"
    worker = SQLiteFrontier(path, worker="w")
    await worker.add([ITEM])
    async with worker.holding(0.3, beat_s=0.05):
        leased = await worker.lease("a.example", time.time(), 0.3)
        assert leased is not None
        # renewed every third of the lease while the worker lives: wait until it was (a
        # worker that never renews fails here at the bound, rather than hanging)
        first = worker._db.execute("SELECT lease_until FROM frontier").fetchone()[0]

        async def renewed() -> None:
            while worker._db.execute("SELECT lease_until FROM frontier").fetchone()[0] == first:
                await asyncio.sleep(0.05)

        await asyncio.wait_for(renewed(), timeout=60)
        assert await worker.lease("a.example", first + 0.01, 0.3) is None  # still its lease
    await worker.close()


async def test_a_file_from_before_owners_is_given_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE frontier (url TEXT PRIMARY KEY, host TEXT NOT NULL, state INTEGER NOT "
        "NULL, seq INTEGER NOT NULL, not_before REAL NOT NULL, lease_until REAL NOT NULL "
        "DEFAULT 0, depth INTEGER NOT NULL, via TEXT NOT NULL, srcloc TEXT, page_type TEXT, "
        "changefreq TEXT, lastmod REAL, hops INTEGER NOT NULL, attempts INTEGER NOT NULL);"
        "INSERT INTO frontier VALUES ('http://a.example/', 'a.example', 0, 1, 0, 0, 0, "
        "'seed', NULL, NULL, NULL, NULL, 0, 0);")
    db.close()
    frontier = SQLiteFrontier(path, worker="w")
    assert await frontier.lease("a.example", time.time(), 600.0) == ITEM
    await frontier.done(ITEM.url, fetched=True)
    assert (await frontier.counts()).fetched == 1
    await frontier.close()
