"""HTTPS through ``polite serve --intercept-tls`` against mitmproxy and a direct connection,
in one run, on loopback.

The 1 KB origin of ``proxy_vs_peers.py`` (an asyncio server answering from memory, kept
alive) over TLS on 127.0.25.200, with a certificate of a CA made for the run and a
robots.txt of two groups that polite checks every request against; ``polite serve
--intercept-tls`` as a user starts it (the origin's delay 0, the adaptive delay off,
``--upstream-ca`` the run's CA), on a page the origin does not let be cached (misses: each
request checked and sent on) and on a ``max-age=3600`` page (hits); ``mitmdump``
(mitmproxy) with its own CA and ``ssl_verify_upstream_trusted_ca`` the run's CA. The
clients are raw sockets under asyncio's TLS, each trusting the CA of the proxy it goes
through (the origin's for direct), so that the figures are the servers':

* added latency: the median of sequential requests inside one kept-alive tunnel, minus the
  direct median;
* requests per second with 1 and 32 tunnels, each sending its next request when the last
  answer arrived;
* tunnels per second: one connection after another, each CONNECT, TLS handshake, one
  request, close (the cost of a new tunnel; direct: a new TLS connection).

mitmproxy pins many of the libraries polite uses (cryptography, h11, h2, pyOpenSSL) to older
versions, so it is not installed beside polite: ``--mitmdump PATH``, else ``mitmdump`` on the
PATH, else the script makes a virtual environment in a temporary folder and installs
mitmproxy from PyPI there (a minute, once per run).

Run: ``.venv/bin/python bench/tls_vs_mitmproxy.py [--seconds S] [--rounds R]``; all servers
run through the whole run, and each round measures every path in turn, so that a noisy
machine weighs on all of them alike; the ratios are per round, then their median.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Awaitable
from contextlib import ExitStack
from pathlib import Path

import httpx

from polite.proxy.authority import CA_CERT_FILE, CertificateAuthority

# The origin, the raw-socket client, the process starter, the measures and the table of the
# proxy's bench (this folder is on the path when one of its scripts runs).
from proxy_vs_peers import ORIGIN, Client, free_port, latency, report, started, throughput

HOST = "127.0.25.200"

Address = tuple[str, int]


def make_origin_ca(folder: Path) -> tuple[Path, Path]:
    """A CA for the run, and a certificate of it for the origin: (the CA file, the origin's
    key and chain)."""
    authority = CertificateAuthority.open(folder / "origin-ca")
    chain = folder / "origin.pem"
    chain.write_bytes(authority.chain_pem(HOST))
    return folder / "origin-ca" / CA_CERT_FILE, chain


def find_mitmdump(given: str | None, folder: Path) -> str:
    if given:
        return given
    found = shutil.which("mitmdump") or shutil.which(
        "mitmdump", path=str(Path(sys.executable).parent))
    if found:
        return found
    print("mitmdump is not installed: installing mitmproxy from PyPI in a virtual "
          "environment of its own, in a temporary folder", file=sys.stderr)
    env = folder / "mitmproxy-venv"
    venv.create(env, with_pip=True)
    subprocess.run([str(env / "bin" / "pip"), "install", "--quiet", "mitmproxy"], check=True)
    return str(env / "bin" / "mitmdump")


async def connect(via: Address | None, origin: Address, trust: ssl.SSLContext,
                  path: str) -> Client:
    """A TLS connection to ``origin``, through the tunnel of the proxy at ``via``."""
    authority = f"{origin[0]}:{origin[1]}".encode()
    reader, writer = await asyncio.open_connection(*(via or origin))
    if via is not None:
        writer.write(b"CONNECT " + authority + b" HTTP/1.1\r\nHost: " + authority
                     + b"\r\nUser-Agent: benchbot/1.0\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.split(b" ", 2)[1] == b"200":
            raise RuntimeError(head.decode("latin-1").split("\r\n")[0])
    await writer.start_tls(trust, server_hostname=origin[0])
    request = (b"GET " + path.encode() + b" HTTP/1.1\r\nHost: " + authority
               + b"\r\nUser-Agent: benchbot/1.0\r\n\r\n")
    return Client(reader, writer, request)


async def tunnels(via: Address | None, origin: Address, trust: ssl.SSLContext,
                  seconds: float, path: str) -> float:
    done = 0
    started_at = time.perf_counter()
    while time.perf_counter() - started_at < seconds:
        client = await connect(via, origin, trust, path)
        await client.get()
        await client.close()
        done += 1
    return done / (time.perf_counter() - started_at)


# latency s, req/s at 1 and at 32 tunnels, new tunnels/s, the proxy's CPU µs per request
Figures = tuple[float, float, float, float, float]


def cpu_s(pid: int | None) -> float:
    """The CPU time a process has used (user and system), from /proc."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(via: Address | None, origin: Address, trust: ssl.SSLContext, seconds: float,
            path: str, pid: int | None) -> Figures:
    def open_client() -> Awaitable[Client]:
        return connect(via, origin, trust, path)

    median = asyncio.run(latency(open_client, 1000))
    one = asyncio.run(throughput(open_client, 1, seconds))
    before = cpu_s(pid)
    many = asyncio.run(throughput(open_client, 32, seconds))
    # The proxy's CPU per request at 32 tunnels: what a shared machine's load does not change.
    cpu_us = (cpu_s(pid) - before) / (many * seconds) * 1e6
    return median, one, many, asyncio.run(tunnels(via, origin, trust, seconds / 2, path)), \
        cpu_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput figure")
    parser.add_argument("--rounds", type=int, default=5,
                        help="each path measured this many times, the paths in turn")
    parser.add_argument("--mitmdump", help="the mitmdump to run (default: on the PATH, "
                        "else installed in a temporary virtual environment)")
    args = parser.parse_args()
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tls-bench-")))
        mitmdump = find_mitmdump(args.mitmdump, folder)
        origin_ca, chain = make_origin_ca(folder)
        origin_port = stack.enter_context(started([sys.executable, "-c", ORIGIN, HOST,
                                                   str(chain)]))
        origin = (HOST, int(origin_port))

        ca_dir = folder / "polite-ca"
        polite_ca = folder / "polite-ca.pem"
        polite_ca.write_bytes(subprocess.run(
            [sys.executable, "-m", "polite", "ca", "export", "--ca-dir", str(ca_dir)],
            check=True, capture_output=True).stdout)
        port = free_port()
        polite_pid: list[int] = []
        stack.enter_context(started(
            [sys.executable, "-m", "polite", "serve", "--port", str(port), "--store",
             "memory://", "--allow-private", "--agent", "benchbot", "--adaptive-factor", "0",
             "--intercept-tls", "--ca-dir", str(ca_dir), "--upstream-ca", str(origin_ca)],
            port, polite_pid))
        api = httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False)
        api.put(f"/delays/{HOST}", json={"delay": 0}).raise_for_status()

        mitm_port = free_port()
        confdir = folder / "mitmproxy"
        mitm_pid: list[int] = []
        stack.enter_context(started(
            [mitmdump, "--listen-host", "127.0.0.1", "--listen-port", str(mitm_port), "-q",
             "--set", f"confdir={confdir}", "--set",
             f"ssl_verify_upstream_trusted_ca={origin_ca}"], mitm_port, mitm_pid))
        version = subprocess.run([mitmdump, "--version"], capture_output=True, text=True,
                                 check=False).stdout.split("\n")[0].strip()

        def trusting(ca: Path) -> ssl.SSLContext:
            context = ssl.create_default_context(cafile=str(ca))
            context.set_alpn_protocols(["http/1.1"])
            return context

        paths: dict[str, tuple[Address | None, ssl.SSLContext, str, int | None]] = {
            "direct": (None, trusting(origin_ca), "/page", None),
            "polite (miss)": (("127.0.0.1", port), trusting(polite_ca), "/page", polite_pid[0]),
            "polite (hit)": (("127.0.0.1", port), trusting(polite_ca), "/cached",
                             polite_pid[0]),
            "mitmproxy": (("127.0.0.1", mitm_port),
                          trusting(confdir / "mitmproxy-ca-cert.pem"), "/page", mitm_pid[0]),
        }
        results: dict[str, list[Figures]] = {name: [] for name in paths}
        for round_ in range(args.rounds):
            for name, (via, trust, path, pid) in paths.items():
                results[name].append(measure(via, origin, trust, args.seconds, path, pid))
            print(f"round {round_ + 1} of {args.rounds}: " + ", ".join(
                f"{name} {results[name][-1][2]:,.0f}/s" for name in paths) + " at 32",
                file=sys.stderr)

    print(f"\n{version}; medians of {args.rounds} rounds, the paths measured in turn in "
          "each round\n")
    report(results, "mitmproxy", ["req/s, 1 tunnel", "req/s, 32 tunnels", "new tunnels/s",
                                  "CPU µs/request (32)"])

if __name__ == "__main__":
    main()
