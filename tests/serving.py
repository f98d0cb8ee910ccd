"""``polite serve`` as a real process, for tests that talk to it over HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def polite_serve(*options: str) -> Iterator[httpx.Client]:
    """``python -m polite serve OPTIONS`` on a free port; a client once /health answers."""
    with polite_serve_process(*options) as (api, _):
        yield api


@contextmanager
def polite_serve_process(*options: str
                         ) -> Iterator[tuple[httpx.Client, subprocess.Popen[str]]]:
    """As :func:`polite_serve`, with the process too."""
    port = free_port()
    command = [sys.executable, "-m", "polite", "serve", "--port", str(port), "--agent",
               "politetest", *options]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False,
                              timeout=30) as api:
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
            process.terminate()
            process.wait(10)
