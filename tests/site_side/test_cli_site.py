"""``polite site serve`` as a real process; the crawler list from a user's file."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from polite.errors import ConfigError
from polite.site import SiteStore, load_crawlers
from polite.site.page import create_site_app
from tests.commands import command_line
from tests.site_servers import free_port, serve_asgi

HOST = "127.0.23.30"


def test_polite_site_serve_puts_the_page_behind_its_token(tmp_path: Path) -> None:
    port = free_port(HOST)
    db = tmp_path / "site.sqlite"
    command = command_line("site", "serve", "--db", str(db), "--host",
                           HOST, "--port", str(port), "--token", "letmein")
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        try:
            assert process.stdout is not None
            banner = process.stdout.readline()
            # The operator's own token is theirs: only a made-up one is printed.
            assert f"http://{HOST}:{port}/" in banner and "letmein" not in banner
            with httpx.Client(base_url=f"http://{HOST}:{port}", trust_env=False,
                              follow_redirects=True, timeout=10) as client:
                deadline = time.monotonic() + 20
                while True:
                    try:
                        first = client.get("/")
                        break
                    except httpx.TransportError:
                        assert time.monotonic() < deadline and process.poll() is None
                        time.sleep(0.1)
                assert first.status_code == 401
                page = client.get("/", params={"token": "letmein"})
                assert page.status_code == 200 and "Save as a new version" in page.text
                robots = client.get("/robots.txt")
                assert robots.text.splitlines()[1:] == ["User-agent: *", "Disallow:"]
        finally:
            process.terminate()
            process.wait(10)
    assert db.exists()


def test_a_crawler_list_of_ones_own(tmp_path: Path) -> None:
    mine = tmp_path / "crawlers.json"
    mine.write_text('{"snapshot": "mine", "crawlers": [{"name": "PartnerBot", '
                    '"operator": "Partner", "category": "feed", '
                    '"ip_ranges": ["192.0.2.0/24"]}]}')
    crawlers = load_crawlers(mine)
    assert crawlers.identify("PartnerBot/1.0").crawler is not None
    assert crawlers.identify("Googlebot/2.1").crawler is None  # only the user's list
    with pytest.raises(ConfigError, match="cannot read"):
        load_crawlers(tmp_path / "missing.json")


def test_polite_site_import_keeps_a_hand_written_file_after_the_managed_block(
        tmp_path: Path) -> None:
    from polite.cli import main

    mine = tmp_path / "robots.txt"
    mine.write_text("User-agent: BadBot\nDisallow: /\n")
    db = tmp_path / "site.sqlite"
    assert main(["site", "import", str(mine), "--db", str(db)]) == 0
    store = SiteStore(db)
    text = store.current().robots_txt
    store.close()
    assert text.startswith("# BEGIN polite site")
    assert text.endswith("# END polite site\n\nUser-agent: BadBot\nDisallow: /\n")
    assert main(["site", "import", str(tmp_path / "none.txt"), "--db", str(db)]) == 2


def test_the_page_mounted_in_a_sites_own_application(tmp_path: Path) -> None:
    store = SiteStore(tmp_path / "site.sqlite")
    app = Starlette(routes=[Mount("/robots-admin", create_site_app(store))])
    with serve_asgi(app, "127.0.23.31") as url, \
            httpx.Client(base_url=url, trust_env=False, timeout=10) as client:
        page = client.get("/robots-admin/")
        assert page.status_code == 200
        assert 'href="/robots-admin/static/site.css"' in page.text
        assert 'hx-post="/robots-admin/preview"' in page.text
        script = client.get("/robots-admin/static/htmx.min.js")
        assert script.status_code == 200 and "Zero-Clause BSD" in script.text
        saved = client.post("/robots-admin/save", data={
            "sections": "1", "s0.name": "Whole site", "s0.prefix": "/",
            "s0.r0.agent": "*", "s0.r0.field": "Disallow", "s0.r0.value": "/tmp/"})
        assert "Saved as version 1" in saved.text
    assert "Disallow: /tmp/" in store.current().robots_txt
    store.close()


def test_polite_site_prune_forgets_old_visits(tmp_path: Path) -> None:
    from polite.cli import main
    from polite.core.site import Action, LogEntry, Verification

    db = tmp_path / "site.sqlite"
    store = SiteStore(db)
    now = time.time()
    for at in (now - 40 * 86_400, now - 10, now):
        store.log([(LogEntry(at, "192.0.2.1", "X-Bot", "X-Bot", "", "",
                             Verification.UNKNOWN, "", "GET", "/", "X-Bot", True, None, "",
                             0, Action.PASS), 200)])
    assert main(["site", "prune", "--db", str(db), "--days", "30"]) == 0
    assert [round(v.at) for v in store.visits()] == [round(now), round(now - 10)]
    store.close()


# Real files whose first group is for *, a file with a byte order mark and one whose first
# line is a rule outside any group: each a way for what comes before the hand-written part
# to change what it means.
_CORPUS = ("arxiv.org.txt", "ballotpedia.org.txt", "abcnews.go.com.txt", "allafrica.com.txt",
           "mlb.mlb.com.txt", "en.wikiquote.org.txt")
_DIALECTS = ("rfc9309", "google", "koster1996", "regp")


@pytest.mark.parametrize("name", _CORPUS)
def test_polite_site_import_changes_no_verdict_in_any_dialect(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    from polite.cli import main
    from tests.conftest import shared_path

    original = shared_path("corpus", "robots", name)
    db = tmp_path / "site.sqlite"
    assert main(["site", "import", str(original), "--db", str(db)]) == 0
    store = SiteStore(db)
    served = tmp_path / "served.txt"
    served.write_text(store.current().robots_txt)
    store.close()
    capsys.readouterr()
    for dialect in _DIALECTS:
        status = main(["robots", "diff", str(original), str(served), "--dialect", dialect])
        out = capsys.readouterr().out
        assert status == 0 and "no URL changes verdict" in out, (dialect, out)
        assert "URLs (sampled" in out and " 0 URLs" not in out


def test_polite_site_import_of_a_file_for_everyone_writes_no_empty_group_before_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from polite.cli import main

    mine = tmp_path / "robots.txt"
    mine.write_text("User-agent: *\nDisallow: /private/\nDisallow: /tmp/\nDisallow: /cgi-bin/\n")
    db = tmp_path / "site.sqlite"
    assert main(["site", "import", str(mine), "--db", str(db)]) == 0
    store = SiteStore(db)
    text = store.current().robots_txt
    store.close()
    assert text.count("User-agent:") == 1 and "Disallow:\n" not in text
    served = tmp_path / "served.txt"
    served.write_text(text)
    capsys.readouterr()
    for dialect in _DIALECTS:
        assert main(["robots", "diff", str(mine), str(served), "-d", dialect]) == 0, \
            capsys.readouterr().out


def test_polite_site_import_refuses_a_file_that_is_not_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import random

    from polite.cli import main

    db = tmp_path / "site.sqlite"
    binary = tmp_path / "bin.txt"
    binary.write_bytes(random.Random(142).randbytes(4000))
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"User-agent: *\nDisallow: /caf\xe9/\n")
    assert main(["site", "import", str(binary), "--db", str(db)]) == 2
    assert main(["site", "import", str(latin), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"polite: {binary}:1: this line " in err
    assert f"polite: {latin}:2: this line is not UTF-8 text" in err
    store = SiteStore(db)
    assert store.current_id() == 0  # nothing saved
    store.close()
    with pytest.raises(ConfigError, match=r"bin\.txt:1: this line "):
        load_crawlers(binary)  # the crawler list a site may give in place of the bundled one
