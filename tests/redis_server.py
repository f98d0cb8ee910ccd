"""A real ``redis-server`` on loopback for the tests of the shared store.

``.ci/run`` installs the server and sets ``POLITE_REQUIRE_REDIS=1``, so that in CI a missing
server is a failure, not a skip.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import redis

    from tests.tls import SiteAuthority


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_binary() -> str:
    """The server's path, or a skip (a failure in CI) when it is not installed."""
    found = shutil.which("redis-server")
    if found is None:
        message = "redis-server is not installed (apt-get install -y redis-server)"
        if os.environ.get("POLITE_REQUIRE_REDIS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found


@contextmanager
def redis_server(folder: Path, *, appendonly: bool = False, cluster: bool = False,
                 unix_socket: Path | None = None, tls: SiteAuthority | None = None
                 ) -> Iterator[str]:
    """Start a server with its files in ``folder``; yields ``redis://127.0.0.1:PORT/0``.
    ``cluster``: a Redis Cluster of this one node holding every slot, which refuses what a
    cluster refuses (a command or script whose keys are in two slots: CROSSSLOT).
    ``unix_socket``: it listens there too. ``tls``: it speaks TLS only, with a certificate
    of that authority, and the URL is ``rediss://127.0.0.1:PORT/0?ssl_ca_certs=CA``."""
    port = free_port()
    process = start_redis(folder, port, appendonly=appendonly, cluster=cluster,
                          unix_socket=unix_socket, tls=tls)
    try:
        if cluster:
            _take_every_slot(port)
        yield (f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={tls.path}" if tls is not None
               else f"redis://127.0.0.1:{port}/0")
    finally:
        process.terminate()
        process.wait(10)


def start_redis(folder: Path, port: int, *, appendonly: bool = False, cluster: bool = False,
                unix_socket: Path | None = None, tls: SiteAuthority | None = None
                ) -> subprocess.Popen[bytes]:
    """A server on ``port`` with its files in ``folder``, once it answers; the caller stops
    it (a test that kills a server and starts it again on the same port and files).
    ``unix_socket`` and ``tls`` as :func:`redis_server`'s."""
    binary = redis_binary()
    command = [binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(folder),
               "--save", "", "--appendonly", "yes" if appendonly else "no",
               "--protected-mode", "yes", "--loglevel", "warning"]
    if unix_socket is not None:
        command += ["--unixsocket", str(unix_socket), "--unixsocketperm", "700"]
    context = None
    if tls is not None:
        tls.server("127.0.0.1")  # writes the key and certificate the server reads
        chain = tls.path.with_name(f"{tls.name}-127.0.0.1.pem")
        command += ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(chain),
                    "--tls-key-file", str(chain), "--tls-auth-clients", "no"]
        context = ssl.create_default_context(cafile=str(tls.path))
    log = folder / "redis-server.log"
    command += ["--logfile", str(log)]
    if cluster:
        # the cluster bus on a free port of its own (by default the port + 10000)
        command += ["--cluster-enabled", "yes", "--cluster-config-file",
                    str(folder / "nodes.conf"), "--cluster-port", str(free_port())]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(port, process, log, context)
    except BaseException:
        process.kill()
        process.wait(10)
        raise
    return process


@contextmanager
def redis_cluster(folder: Path, *, nodes: int = 3) -> Iterator[list[str]]:
    """A Redis Cluster of ``nodes`` primaries on loopback (``redis-cli --cluster create``,
    no replicas), each node's files in a folder of its own; yields the nodes'
    ``redis://127.0.0.1:PORT`` URLs once every node says the cluster is ok."""
    redis_binary()  # a skip (a failure in CI) when the server is not installed
    cli = shutil.which("redis-cli")
    if cli is None:
        message = "redis-cli is not installed (apt-get install -y redis-tools)"
        if os.environ.get("POLITE_REQUIRE_REDIS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    started: list[tuple[int, subprocess.Popen[bytes]]] = []
    try:
        for n in range(nodes):
            home = folder / f"node{n}"
            home.mkdir()
            started.append(_start_node(home))
        made = subprocess.run(
            [cli, "--cluster", "create", *(f"127.0.0.1:{port}" for port, _ in started),
             "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, text=True, timeout=30)
        if made.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {made.stdout}{made.stderr}")
        import redis

        deadline = time.monotonic() + 15
        for port, _ in started:
            client = redis.Redis(host="127.0.0.1", port=port)
            try:
                _wait_for_cluster(client, deadline, "the cluster did not come up within 15 s")
            finally:
                client.close()
        yield [f"redis://127.0.0.1:{port}" for port, _ in started]
    finally:
        for _, process in started:
            process.terminate()
        for _, process in started:
            process.wait(10)


def _start_node(home: Path, attempts: int = 5) -> tuple[int, subprocess.Popen[bytes]]:
    """A cluster node answering in ``home``: its port and process. The ports are free when
    chosen, not held: another process (another worker's node, a connection's local port)
    may bind one before the node does, and the node then exits; it is started again on
    others. (Nodes once took ports from a fixed range, probed one by one: two workers
    starting clusters at once chose the same ones.)"""
    for _ in range(attempts - 1):
        port = free_port()
        try:
            return port, start_redis(home, port, cluster=True)
        except _Exited:
            (home / "nodes.conf").unlink(missing_ok=True)
    port = free_port()
    return port, start_redis(home, port, cluster=True)


class _Exited(RuntimeError):
    """The server stopped instead of answering (a port taken, a bad option: its log says)."""


def _wait_for(port: int, process: subprocess.Popen[bytes], log: Path | None = None,
              context: ssl.SSLContext | None = None) -> None:
    """Until the server on ``port`` answers PING (10 s at most; over TLS with ``context``);
    its ``log`` in the error when it stopped instead."""
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as plain, \
                    (context.wrap_socket(plain, server_hostname="127.0.0.1")
                     if context is not None else plain) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        if process.poll() is not None:
            said = log.read_text() if log is not None and log.exists() else ""
            raise _Exited(f"redis-server on port {port} did not start: {said}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"redis-server on port {port} did not answer within 10 s")
        time.sleep(0.02)


def _take_every_slot(port: int) -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        client.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        _wait_for_cluster(client, time.monotonic() + 10,
                          "the one-node cluster did not come up within 10 s")
    finally:
        client.close()


def _wait_for_cluster(client: redis.Redis, deadline: float, failure: str) -> None:
    """Until the node ``client`` speaks to says the cluster is ok; ``failure`` past
    ``deadline``."""
    while b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
        if time.monotonic() > deadline:
            raise RuntimeError(failure)
        time.sleep(0.05)
