"""``polite serve --intercept-tls``: a real process between curl or httpx, which trust
polite's exported CA, and TLS origins on loopback that have a CA of the test's own."""

from __future__ import annotations

import itertools
import shutil
import socket
import ssl
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

pytest.importorskip("cryptography", reason="the tls extra is not installed")

from cryptography import x509

from tests.commands import command_line
from tests.serving import polite_serve, seed_001_figure_4
from tests.sites import Reply, Site, greet_first, serve, tcp_origin
from tests.tls import SiteAuthority, make_authority

ALLOW = Reply(200, b"User-agent: *\nDisallow: /private\n")
PAGE = Reply(200, b"x" * 1024, {"Content-Type": "text/plain"})  # not cacheable
NO_INTERCEPT = "127.0.25.5"


@dataclass
class Setup:
    api: httpx.Client
    ca_dir: Path
    polite_ca: Path  # what polite ca export printed
    origins: SiteAuthority  # the CA polite is told to trust (--upstream-ca)
    folder: Path

    @property
    def proxy_url(self) -> str:
        return str(self.api.base_url).rstrip("/")

    def client(self, **options: object) -> httpx.Client:
        """httpx through polite, trusting polite's CA only."""
        options.setdefault("verify", ssl.create_default_context(cafile=self.polite_ca))
        return httpx.Client(proxy=self.proxy_url, trust_env=False, timeout=30,
                            **options)  # type: ignore[arg-type]

    def curl(self, url: str, *options: str) -> tuple[int, str]:
        """curl through polite, trusting polite's CA: the status and the body."""
        curl = shutil.which("curl")
        if curl is None:
            pytest.skip("curl is not installed")
        done = subprocess.run(
            [curl, "-sS", "--noproxy", "", "--proxy", self.proxy_url, "--cacert",
             str(self.polite_ca), "-w", "\n%{http_code}", *options, url],
            capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, done.stderr
        body, _, status = done.stdout.rpartition("\n")
        return int(status), body


def ca_export(ca_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command_line("ca", "export", "--ca-dir",
                                       str(ca_dir)), capture_output=True, text=True, timeout=30,
                          check=False)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    folder = tmp_path_factory.mktemp("tls")
    ca_dir = folder / "state" / "ca"
    exported = ca_export(ca_dir)  # before serve: the CA is made by the export
    assert exported.returncode == 0, exported.stderr
    polite_ca = folder / "polite-ca.pem"
    polite_ca.write_text(exported.stdout)
    origins = make_authority(folder, "origins-ca")
    with polite_serve("--store", "memory://", "--allow-private", "--intercept-tls",
                      "--ca-dir", str(ca_dir), "--upstream-ca", str(origins.path),
                      "--no-intercept", NO_INTERCEPT, "--origin-timeout-s", "5") as api:
        yield Setup(api, ca_dir, polite_ca, origins, folder)


def https_site(setup: Setup, host: str, routes: dict[str, Reply],
               authority: SiteAuthority | None = None, port: int = 0) -> Site:
    return Site(host, dict(routes), port=port, tls=(authority or setup.origins).server(host))


def test_the_ca_is_private_and_its_export_is_a_certificate(setup: Setup) -> None:
    assert stat.S_IMODE(setup.ca_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((setup.ca_dir / "ca.key").stat().st_mode) == 0o600
    pem = setup.polite_ca.read_bytes()
    assert b"PRIVATE KEY" not in pem
    certificate = x509.load_pem_x509_certificate(pem)
    assert certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    # Kept: serve used the CA the export made, and a second export prints it again.
    again = ca_export(setup.ca_dir)
    assert again.returncode == 0 and again.stdout.encode() == pem
    # Nothing else is kept: the hosts' certificates live in memory.
    assert sorted(p.name for p in setup.ca_dir.iterdir()) == [".lock", "ca.key", "ca.pem"]


def test_a_ca_folder_open_to_others_is_refused(tmp_path: Path) -> None:
    made = ca_export(tmp_path / "ca")
    assert made.returncode == 0
    (tmp_path / "ca" / "ca.key").chmod(0o644)
    refused = ca_export(tmp_path / "ca")
    assert refused.returncode == 2 and refused.stdout == ""
    assert "open to other users" in refused.stderr and "chmod 600" in refused.stderr


def test_without_cryptography_the_command_names_the_extra(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['cryptography'] = None; from polite.cli import main; "
            f"sys.exit(main(['ca', 'export', '--ca-dir', {str(tmp_path / 'ca')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 2
    assert "pip install 'polite-web[tls]'" in done.stderr
    assert not (tmp_path / "ca").exists()


def test_a_disallowed_https_url_is_refused_without_reaching_the_origin(setup: Setup) -> None:
    site = https_site(setup, "127.0.25.1", {"/robots.txt": ALLOW, "/private/x": PAGE})
    with serve(site):
        with setup.client() as client:
            answer = client.get(f"{site.origin}/private/x",
                                headers={"User-Agent": "FooBot/2.1"})
        assert answer.status_code == 403
        assert "Disallow: /private (line 2)" in answer.text
        status, body = setup.curl(f"{site.origin}/private/y")
        assert status == 403 and "Disallow: /private (line 2)" in body
    assert site.requests == ["/robots.txt"]  # read over https, once; nothing else asked


@pytest.mark.slow
def test_seed_001_figure_4_over_https(setup: Setup) -> None:
    """One request every 200 ms for 5 s against a 1000 ms delay, inside one tunnel: every
    fifth passes, and the origin sees them a second apart."""
    site = https_site(setup, "127.0.25.2", {"/robots.txt": ALLOW, "/page": PAGE})
    with serve(site):
        assert setup.api.put("/delays/127.0.25.2", json={"delay": 1000}).status_code == 200
        with setup.client() as client:  # one tunnel, kept alive, for all 25 requests
            statuses = seed_001_figure_4(client, f"{site.origin}/page", PAGE.body)
    passed = statuses.count(200)
    assert statuses[0] == 200
    assert 4 <= passed <= 6, statuses
    assert statuses.count(429) == 25 - passed
    arrivals = [at for at, path in site.arrivals if path == "/page"]
    assert len(arrivals) == passed
    assert all(b - a >= 0.95 for a, b in itertools.pairwise(arrivals)), arrivals


def test_a_cacheable_https_page_is_served_from_the_cache(setup: Setup) -> None:
    cached = Reply(200, b"kept for an hour", {"Cache-Control": "max-age=3600"})
    site = https_site(setup, "127.0.25.3", {"/robots.txt": ALLOW, "/kept": cached})
    with serve(site):
        first = setup.curl(f"{site.origin}/kept")
        second = setup.curl(f"{site.origin}/kept")  # a second curl: a new tunnel
        with setup.client() as client:
            third = client.get(f"{site.origin}/kept")
    assert first == second == (200, "kept for an hour")
    assert third.status_code == 200 and "age" in third.headers
    assert site.requests.count("/kept") == 1
    # Inside the tunnels, each request is traced and counted like a plain http one.
    traced = [(e["method"], e["decision"], e["status"]) for e in
              setup.api.get("/trace").json()["exchanges"] if e["url"] == f"{site.origin}/kept"]
    assert traced == [("GET", "cache", 200), ("GET", "cache", 200), ("GET", "allowed", 200)]
    rows = setup.api.get("/dashboard/hosts", params={"q": "127.0.25.3"}).json()["rows"]
    assert (rows[0]["allowed"], rows[0]["cacheHits"]) == (1, 2)


def test_an_origin_whose_certificate_does_not_verify_gets_a_502_naming_why(
        setup: Setup) -> None:
    stranger = make_authority(setup.folder, "untrusted-ca")
    site = https_site(setup, "127.0.25.4", {"/robots.txt": ALLOW, "/page": PAGE}, stranger)
    with serve(site):
        status, body = setup.curl(f"{site.origin}/page")
        with setup.client() as client:
            answer = client.get(f"{site.origin}/page")
    for text in (body, answer.text):
        assert "certificate of 127.0.25.4" in text and "does not verify" in text
        assert "unable to get local issuer certificate" in text
    assert status == answer.status_code == 502
    assert site.requests == []


def test_a_no_intercept_host_stays_a_plain_tunnel(setup: Setup) -> None:
    # On 8443, so that the plain tunnel reads the site's robots.txt over https.
    site = https_site(setup, NO_INTERCEPT, {"/robots.txt": ALLOW, "/page": PAGE}, port=8443)
    with serve(site):
        # A plain tunnel takes the host's slot; three are opened here.
        assert setup.api.put(f"/delays/{NO_INTERCEPT}", json={"delay": 0}).status_code == 200
        # Trusting only the origin's CA: it works only if the origin's own certificate
        # comes through.
        trusting_origin = ssl.create_default_context(cafile=setup.origins.path)
        with setup.client(verify=trusting_origin) as client:
            answer = client.get(f"{site.origin}/page")
        assert answer.status_code == 200 and answer.content == b"x" * 1024
        assert "via" not in answer.headers  # the proxy did not read the answer
        with setup.client() as client, pytest.raises(httpx.ConnectError):
            client.get(f"{site.origin}/page")  # polite's CA is not what signed it
        with socket.create_connection(("127.0.0.1", setup.api.base_url.port or 0), 10) as raw:
            raw.sendall(f"CONNECT {NO_INTERCEPT}:{site.port} HTTP/1.1\r\n\r\n".encode())
            assert raw.recv(4096).startswith(b"HTTP/1.1 200")
            with trusting_origin.wrap_socket(raw, server_hostname=NO_INTERCEPT) as tls:
                issuer = x509.load_der_x509_certificate(tls.getpeercert(True) or b"").issuer
        assert issuer == setup.origins.certificate.subject


def test_inside_a_tunnel_the_modes_and_the_absolute_form_work(setup: Setup) -> None:
    site = https_site(setup, "127.0.25.6", {"/robots.txt": ALLOW, "/page": PAGE})
    with serve(site):
        assert setup.api.put("/delays/127.0.25.6", json={"delay": 700}).status_code == 200
        with setup.client() as client:
            assert client.get(f"{site.origin}/page").status_code == 200
            held = client.get(f"{site.origin}/page", headers={"X-Polite-Mode": "wait"})
            assert held.status_code == 200 and held.content == PAGE.body
        # The mode set on the CONNECT holds for the requests in its tunnel.
        assert setup.curl(f"{site.origin}/page", "--proxy-header", "X-Polite-Mode: wait") \
            == (200, PAGE.body.decode())
        trust = ssl.create_default_context(cafile=setup.polite_ca)
        authority = f"127.0.25.6:{site.port}"
        with socket.create_connection(("127.0.0.1", setup.api.base_url.port or 0), 10) as raw:
            raw.sendall(f"CONNECT {authority} HTTP/1.1\r\n\r\n".encode())
            assert raw.recv(4096).startswith(b"HTTP/1.1 200")
            with trust.wrap_socket(raw, server_hostname="127.0.25.6") as tls:
                tls.sendall(f"GET https://{authority}/page HTTP/1.1\r\nHost: {authority}\r\n"
                            "X-Polite-Mode: wait\r\n\r\n".encode())
                answer = b""
                while not answer.endswith(PAGE.body):
                    answer += tls.recv(65536)
                assert answer.startswith(b"HTTP/1.1 200")
                tls.sendall(b"GET https://127.0.25.7/page HTTP/1.1\r\nHost: 127.0.25.7\r\n\r\n")
                refused = b""
                while chunk := tls.recv(65536):
                    refused += chunk
    assert refused.startswith(b"HTTP/1.1 400") and b"the tunnel's origin" in refused
    arrivals = [at for at, path in site.arrivals if path == "/page"]
    assert len(arrivals) == 4  # the origin saw them spaced, whichever way they were asked
    assert all(b - a >= 0.65 for a, b in itertools.pairwise(arrivals)), arrivals


def test_a_tunnel_to_an_origin_that_speaks_no_tls_stays_plain(setup: Setup) -> None:
    """SMTP, SSH and the like greet first: the proxy's TLS attempt fails on the greeting,
    and the tunnel is a plain one, with host-level politeness, as without the flag."""

    with tcp_origin("127.0.25.8", greet_first) as port, \
            socket.create_connection(("127.0.0.1", setup.api.base_url.port or 0), 10) as raw:
        raw.sendall(f"CONNECT 127.0.25.8:{port} HTTP/1.1\r\n\r\n".encode())
        got = b""
        while b"220 greetings\r\n" not in got:
            got += raw.recv(4096)
        assert got.startswith(b"HTTP/1.1 200")
        raw.sendall(b"quit\r\n")
        while b"QUIT" not in got:
            got += raw.recv(4096)
    assert got.partition(b"\r\n\r\n")[2] == b"220 greetings\r\nQUIT\r\n"
