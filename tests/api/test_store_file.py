"""``polite serve`` on a SQLite file deleted or truncated under it: /health says so and a
write answers 503 with the reason, never a 200 for what no restart would find (3,000
writes acknowledged into a deleted file were gone after a restart)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.serving import polite_serve, through
from tests.sites import Reply, Site, serve

PAGE = Reply(200, b"a page", {"Cache-Control": "no-store"})
ROBOTS = Reply(200, b"User-agent: *\nDisallow:\n")


def _deleted(db: Path) -> None:
    for name in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        name.unlink(missing_ok=True)


def _truncated(db: Path) -> None:
    os.truncate(db, 0)


def _replaced(db: Path) -> None:
    fresh = db.with_name("other.sqlite")
    fresh.write_bytes(db.read_bytes())
    os.replace(fresh, db)


@pytest.mark.parametrize(("spoil", "said"), [(_deleted, "no longer the file opened"),
                                             (_truncated, "was truncated to 0 bytes"),
                                             (_replaced, "no longer the file opened")])
def test_a_store_file_spoiled_under_the_server_is_said_and_refuses_writes(
        tmp_path: Path, spoil: object, said: str) -> None:
    db = tmp_path / "polite.sqlite"
    with polite_serve("--store", f"sqlite:///{db}", "--allow-private") as api, \
            serve(Site("127.34.12.1", {"/robots.txt": ROBOTS, "/a": PAGE, "/b": PAGE})) \
            as site, through(api) as client:
        assert api.put(f"/delays/{site.host}", json={"delay": 0}).status_code == 200
        assert client.get(f"{site.origin}/a").status_code == 200
        assert api.get("/health").json() == {"status": "ok"}
        assert callable(spoil)
        spoil(db)
        health = api.get("/health")
        assert health.status_code == 503, health.text
        assert health.json()["status"] == "unavailable" and said in health.json()["error"]
        written = api.put("/delays/example.com", json={"delay": 5})
        assert written.status_code == 503, written.text
        assert said in written.json()["error"] and str(db) in written.json()["error"]
        # A proxied request takes its host's slot, a write: not let through without it.
        answer = client.get(f"{site.origin}/b")
        assert answer.status_code == 503 and said in answer.text
        assert site.requests.count("/b") == 0


@pytest.mark.anyio
async def test_the_store_says_which_harm_its_file_took(tmp_path: Path) -> None:
    from polite.storage import SQLiteStore

    db = tmp_path / "polite.sqlite"
    store = SQLiteStore(db, lambda: 1000.0)
    await store.set_delay("example.com", 2.0)
    await store.check()
    with db.open("r+b") as handle:  # the header overwritten: not a database any more
        handle.write(b"\0" * 16)
    with pytest.raises(sqlite3.DatabaseError, match="header is overwritten"):
        await store.check()
    await store.close()
    # A store opened again on a whole file is healthy, and its writes are kept.
    fresh = tmp_path / "fresh.sqlite"
    store = SQLiteStore(fresh, lambda: 1000.0)
    await store.set_delay("example.com", 2.0)
    await store.close()
    store = SQLiteStore(fresh, lambda: 1000.0)
    await store.check()
    assert await store.get_delay("example.com") == 2.0
    _deleted(fresh)
    with pytest.raises(sqlite3.DatabaseError, match="no longer the file opened"):
        await store.set_delay("example.org", 1.0)
    with pytest.raises(sqlite3.DatabaseError, match="no longer the file opened"):
        await store.check()
    await store.close()
