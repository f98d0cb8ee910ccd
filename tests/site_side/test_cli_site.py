"""``polite site serve`` as a real process; the crawler list from a user's file."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from polite.errors import ConfigError
from polite.site import load_crawlers
from tests.site_servers import free_port

HOST = "127.0.23.30"


def test_polite_site_serve_puts_the_page_behind_its_token(tmp_path: Path) -> None:
    port = free_port(HOST)
    db = tmp_path / "site.sqlite"
    command = [sys.executable, "-m", "polite", "site", "serve", "--db", str(db), "--host",
               HOST, "--port", str(port), "--token", "letmein"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        try:
            assert process.stdout is not None
            banner = process.stdout.readline()
            assert f"http://{HOST}:{port}/?token=letmein" in banner
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
