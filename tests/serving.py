"""``polite serve`` as a real process, for tests that talk to it over HTTP."""

from __future__ import annotations

import os
import selectors
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from polite.fetch.trust import client_context
from tests.commands import Forked, popen

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def polite_serve(*options: str) -> Iterator[httpx.Client]:
    """``python -m polite serve OPTIONS`` on a free port; a client once /health answers."""
    with polite_serve_process(*options) as (api, _):
        yield api


def loop_cpu_s(pid: int) -> float:
    """The CPU time process ``pid``'s main thread (a server's event loop) has had, in
    seconds, to the nanosecond (Linux's schedstat): what a busy machine does not stretch."""
    with open(f"/proc/{pid}/task/{pid}/schedstat", encoding="ascii") as stat:
        return int(stat.read().split()[0]) / 1e9


@contextmanager
def polite_serve_process(*options: str, make: bool = False
                         ) -> Iterator[tuple[httpx.Client, subprocess.Popen[str] | Forked]]:
    """As :func:`polite_serve`, with the process too (forked: :mod:`tests.commands`); with
    ``make``, started as ``make serve ARGS='OPTIONS'`` is (with the ``polite`` beside this
    Python)."""
    port = free_port()
    options = ("--port", str(port), "--agent", "politetest", *options)
    started: subprocess.Popen[str] | Forked
    if make:
        script = Path(sys.executable).with_name("polite")
        if not script.exists() or shutil.which("make") is None:
            pytest.skip(f"make serve needs make and {script}")
        # STAMP= : the environment is this one, not a .venv made by make.
        command = ["make", "--no-print-directory", "-C", str(ROOT), "serve",
                   f"BIN={script.parent}", "STAMP=", "ARGS=" + shlex.join(options)]
        started = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, start_new_session=True)
    else:
        started = popen("serve", *options)
    with started as process:
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                              timeout=30, verify=client_context()) as api:
                deadline = time.monotonic() + 20
                while True:
                    try:
                        if api.get("/health").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if process.poll() is not None:
                        assert process.stderr is not None
                        pytest.fail(f"polite serve exited: {process.stderr.read()}")
                    assert time.monotonic() < deadline, "polite serve did not start"
                    time.sleep(0.05)
                yield api, process
        finally:
            if make:  # make and the polite it started: the session began with make
                os.killpg(process.pid, signal.SIGTERM)
            else:
                process.terminate()
            process.wait(10)


def through(api: httpx.Client, **options: object) -> httpx.Client:
    """A client that sends everything through the ``polite serve`` behind ``api``.

    Its TLS context, unless one is given, is polite's (the system's authorities loaded at
    its first TLS connection): httpx makes a context of its own for each client and each
    proxy's transport, loading certifi's authorities into it, 28 ms of CPU each time: 423
    contexts in a run of the suite (145 since), nearly all for clients that speak plain
    HTTP to loopback."""
    options.setdefault("verify", client_context())
    return httpx.Client(proxy=str(api.base_url).rstrip("/"), trust_env=False, timeout=30,
                        **options)  # type: ignore[arg-type]


def exchange(api: httpx.Client, data: bytes, *, until_close: bool = True,
             responses: int = 1) -> bytes:
    """Raw bytes to the ``polite serve`` behind ``api``; what comes back (to the close, or
    once ``responses`` answers are in)."""
    with socket.create_connection(("127.0.0.1", int(api.base_url.port or 0)),
                                  timeout=10) as sock:
        sock.sendall(data)
        got = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return got
            got += chunk
            if not until_close and got.count(b"HTTP/1.1 ") >= responses \
                    and got.endswith((b"\r\n\r\n", b"\n")):
                return got


def seed_001_figure_4(client: httpx.Client, url: str, body: bytes) -> list[int]:
    """Seed 001's Figure 4 run: ``url`` asked through ``client`` every 200 ms for 5 s; each
    answer is the page (``body``, through the proxy) or a 429 that says how long to wait.
    The statuses, in order."""
    statuses = []
    started = time.monotonic()
    for n in range(25):
        time.sleep(max(0.0, started + n * 0.2 - time.monotonic()))
        answer = client.get(url)
        statuses.append(answer.status_code)
        if answer.status_code == 429:
            assert int(answer.headers["retry-after"]) >= 1
            assert 0 < int(answer.headers["x-polite-retry-after-ms"]) <= 1000
        else:
            assert answer.status_code == 200
            assert answer.content == body
            assert "polite" in answer.headers["via"]
    return statuses


def send_staggered(api: httpx.Client, urls: list[str], headers: dict[str, str],
                   stagger_s: float) -> list[tuple[int, float]]:
    """Each URL through the proxy on a connection of its own, all opened first, then sent
    ``stagger_s`` apart from one thread (so the order they reach the proxy is the order
    sent); for each, the answer's status and when its head came back (time.monotonic())."""
    address = ("127.0.0.1", int(api.base_url.port or 0))
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sockets = [socket.create_connection(address, timeout=10) for _ in urls]
    heads = [b""] * len(urls)
    answers: list[tuple[int, float] | None] = [None] * len(urls)

    def send() -> None:
        for sock, url in zip(sockets, urls, strict=True):
            sock.sendall(f"GET {url} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())
            time.sleep(stagger_s)

    # Sent from a thread of its own while this one reads, so that each answer is timed as
    # it comes, not when the last request has gone.
    sender = threading.Thread(target=send, daemon=True)
    try:
        sender.start()
        with selectors.DefaultSelector() as selector:
            for index, sock in enumerate(sockets):
                selector.register(sock, selectors.EVENT_READ, index)
            deadline = time.monotonic() + 60
            while any(answer is None for answer in answers):
                assert time.monotonic() < deadline, f"no answer in 60 s: {heads!r}"
                for key, _ in selector.select(timeout=1):
                    index = key.data
                    chunk = sockets[index].recv(4096)
                    assert chunk, f"connection {index} closed before its answer: {heads!r}"
                    heads[index] += chunk
                    if b"\r\n" in heads[index]:
                        answers[index] = (int(heads[index].split(b" ", 2)[1]),
                                          time.monotonic())
                        selector.unregister(sockets[index])
        return [answer for answer in answers if answer is not None]
    finally:
        sender.join(10)
        for sock in sockets:
            sock.close()


def until_counted(api: httpx.Client, count: int, *, timeout_s: float = 30.0) -> bool:
    """Whether the node comes to count ``count`` requests queued or in flight (its
    dashboard's summary, asked until it does, ``timeout_s`` at most): a request counted has
    reached the proxy and holds its place (a client's order, a host's slot)."""
    deadline = time.monotonic() + timeout_s
    while True:
        node = api.get("/dashboard/summary").json()["node"]
        if node["queued"] + node["inFlight"] == count:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
