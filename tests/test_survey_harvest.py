"""``polite survey DOMAINS`` against a farm of named sites on loopback (names from a hosts
file, each site on port 80 of its own address): every outcome class lands where it
should, the www step, redirects recorded, and a second run fetches nothing again."""

from __future__ import annotations

import asyncio
import csv
import json
import socket
import sqlite3
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from polite.fetch.resolve import HostsFile
from polite.survey.harvest import Harvester
from polite.survey.store import SurveyStore
from tests.commands import run
from tests.conftest import on_port_80
from tests.port_80 import holding_port_80
from tests.sites import Reply, Site, serve

HOME = Reply(200, b"<!DOCTYPE html><html><body>Welcome</body></html>",
             {"Content-Type": "text/html"})
ROBOTS = Reply(200, b"User-agent: *\nDisallow: /private\n", {"Content-Type": "text/plain"})


@on_port_80
def test_every_outcome_class_and_the_www_step(tmp_path: Path) -> None:
    sites = {
        "ok.example": Site("127.0.8.1", {"/robots.txt": ROBOTS}, port=80),
        "html.example": Site("127.0.8.2", {"/robots.txt": HOME}, port=80),
        "www.html.example": Site("127.0.8.3", {"/robots.txt": ROBOTS}, port=80),
        "gone.example": Site("127.0.8.4", {}, port=80),
        "closed.example": Site("127.0.8.5", {"/robots.txt": Reply(403)}, port=80),
        "down.example": Site("127.0.8.6", {"/robots.txt": Reply(503)}, port=80),
        "loop.example": Site("127.0.8.7", {
            "/robots.txt": Reply(301, headers={"Location": "/a"}),
            "/a": Reply(302, headers={"Location": "/robots.txt"})}, port=80),
        "big.example": Site("127.0.8.8", {"/robots.txt": Reply(
            200, b"User-agent: *\n" + b"Disallow: /x\n" * 60_000)}, port=80),
        "charset.example": Site("127.0.8.9", {"/robots.txt": Reply(
            200, b"User-agent: *\n", {"Content-Type": "text/plain; charset=utf8x"})}, port=80),
        "empty.example": Site("127.0.8.10", {"/robots.txt": Reply(200, b"# nothing\n")},
                              port=80),
        "moved.example": Site("127.0.8.11", {"/robots.txt": Reply(
            301, headers={"Location": "http://ok.example/robots.txt"})}, port=80),
    }
    hosts = tmp_path / "hosts"
    lines = [f"{site.host} {name}" for name, site in sites.items()]
    lines += ["127.0.8.12 stall.example", "127.0.8.13 refused.example"]
    hosts.write_text("\n".join(lines) + "\n")
    domains = tmp_path / "top.csv"
    names = [name for name in sites if not name.startswith("www.")]
    names += ["stall.example", "refused.example", "nowhere.example"]
    domains.write_text("".join(f"{rank},{name}\n" for rank, name in enumerate(names, 1)))
    out = tmp_path / "survey"
    with ExitStack() as stack:
        for site in sites.values():
            stack.enter_context(serve(site))
        stack.enter_context(holding_port_80(["127.0.8.12"]))
        listener = socket.socket()
        listener.bind(("127.0.8.12", 80))
        stack.callback(listener.close)
        listener.listen(8)  # accepts, never answers: a stall
        first = run("survey", str(domains), "--out", str(out), "--hosts", str(hosts),
                    "--allow-private", "--read-timeout", "1", "--connect-timeout", "1")
        second = run("survey", str(domains), "--out", str(out), "--hosts", str(hosts),
                     "--allow-private")
    assert first.returncode == 0, first.stderr
    assert f"{len(names)} of {len(names)} domains surveyed" in first.stdout
    assert "0 of" in second.stdout  # nothing fetched again
    assert sites["ok.example"].requests == ["/robots.txt", "/robots.txt"]  # its own, moved's
    with sqlite3.connect(out / "survey.sqlite") as db:
        rows = {name: (outcome, status, error) for name, outcome, status, error in
                db.execute("SELECT domain, outcome, status, error FROM sites")}
    assert {name: row[0] for name, row in rows.items()} == {
        "ok.example": "ok", "html.example": "ok", "gone.example": "not_found",
        "closed.example": "forbidden", "down.example": "server_error",
        "loop.example": "redirect_loop", "big.example": "too_big",
        "charset.example": "charset", "empty.example": "empty", "moved.example": "ok",
        "stall.example": "timeout", "refused.example": "connection_error",
        "nowhere.example": "dns_error"}
    assert json.loads(rows["html.example"][2])["redirects"] == ["www.html.example"]
    assert json.loads(rows["moved.example"][2])["redirects"] == [
        "http://ok.example/robots.txt"]
    assert sites["www.html.example"].requests == ["/robots.txt"]
    report = run("report", str(out), "--no-figures")  # a table is read
    assert report.returncode == 0, report.stderr
    with (out / "report" / "tables" / "outcomes.csv").open() as stream:
        counts = {row["outcome"]: int(row["sites"]) for row in csv.DictReader(stream)}
    assert counts["ok"] == 3 and counts["dns_error"] == 1 and sum(counts.values()) == 13


class _Stop(Exception):
    """What a caller's progress callback raised."""


@on_port_80
def test_a_worker_that_fails_ends_the_run_with_its_error_and_the_others_stop(
        tmp_path: Path) -> None:
    """A failure in one of the run's workers (here the caller's own callback, called as a
    domain ends) is the run's: :meth:`Harvester.run` raises it, and the other workers stop
    with it rather than go on surveying behind the caller's back."""
    names = [f"s{n}.example" for n in range(24)]
    sites = [Site(f"127.0.8.{40 + n}", {"/robots.txt": Reply(200, b"User-agent: *\n",
                                                             delay_s=0.2)}, port=80)
             for n in range(len(names))]
    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"{site.host} {name}\n" for name, site in zip(names, sites,
                                                                           strict=True)))
    ended: list[str] = []

    def on_site(domain: str) -> None:
        ended.append(domain)
        if len(ended) == 3:
            raise _Stop(domain)

    async def survey() -> None:
        store = SurveyStore(tmp_path / "survey.sqlite")
        harvester = Harvester(store, time.time, resolver=HostsFile(hosts), concurrency=4,
                              allow_private=True, sitemaps=False, on_site=on_site)
        with pytest.raises(_Stop):
            await harvester.run(enumerate(names, 1))
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert not others, f"{len(others)} of the run's tasks still running"
        # A request sent as the run stopped may still be on its way to its site's log.
        await asyncio.sleep(0.5)
        asked = sum(len(site.requests) for site in sites)
        await asyncio.sleep(1.0)  # five requests' time: a worker left running would ask
        assert sum(len(site.requests) for site in sites) == asked
        assert asked < len(names)  # the run stopped, it did not finish first
        store.close()

    with ExitStack() as stack:
        for site in sites:
            stack.enter_context(serve(site))
        asyncio.run(survey())
