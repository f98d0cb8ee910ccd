"""``polite COMMAND`` run to its end, in a process of its own forked from an interpreter that
has imported polite already (one a test worker, started at its first command).

The suite runs some three hundred short commands; each fresh interpreter spent 0.1 to 0.25 s
of CPU importing polite before its first line of work, about a tenth of the suite's CPU.
The process forked here is a real one all the same: its own pid, its standard streams the
pipes read here, its environment and working directory the caller's, ``sys.argv`` and
``__main__`` as ``python -m polite`` makes them, its exit (atexit, the streams flushed) its
interpreter's own, and its status what a fresh one would give. What it does not show is a
module a command uses without importing it that the interpreter imported first: the tests
of ``tests/test_cli.py``, the bare install's and ``tests/test_cli_package.py`` start fresh
interpreters for that (``fresh=True`` here), and mypy reads every import.

Nothing that starts threads is imported before the fork (numpy's, pyarrow's and
matplotlib's pools are; the report's figures and tables import them in the command's own
process), and the interpreter refuses to fork if a thread has started anyway: a new
interpreter runs the command then, as it does where ``os.fork`` is not, when a second
thread of the same test runs a command meanwhile, or when the test changes a variable the
interpreter reads as it starts (``PYTHON*``, the locale's)."""

from __future__ import annotations

import atexit
import gc
import json
import locale
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["forked_cpu_s", "run"]

_TIMEOUT_S = 300.0  # a guard against a command that hangs: a loaded machine took more than
# a minute for polite report over a survey
_MESSAGE_BYTES = 1 << 20

# What the commands the tests run import before their work, made ready once
_IMPORTED_FIRST = (
    "polite.cli.main", "polite.cli.crawl", "polite.cli.demo", "polite.cli.frontier",
    "polite.cli.keys", "polite.cli.robots", "polite.cli.site", "polite.cli.sitemap",
    "polite.cli.survey", "polite.cli.ulinks", "polite.crawl", "polite.robots",
    "polite.sitemaps", "polite.survey", "polite.survey.harvest", "polite.survey.report",
    "polite.fetch.resolve", "polite.storage.url", "polite._loop", "uvloop", "httpx",
)

# Variables the interpreter reads as it starts: a command given other values than the
# forking interpreter had starts an interpreter of its own
_READ_AT_START = ("PYTHON", "LC_", "LANG")


def _started_with(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_READ_AT_START)}


# -- the forking interpreter --------------------------------------------------------------

def _serve(channel: socket.socket) -> None:
    """Fork a process for each command asked for on ``channel``; answer its pid, then its
    status and CPU seconds. Ends when the worker's end closes."""
    for name in _IMPORTED_FIRST:
        __import__(name)
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    if threads != 1:  # a fork would leave a thread's locks held for ever
        channel.send(json.dumps({"ready": False, "threads": threads}).encode())
        return
    gc.collect()
    gc.freeze()  # what was imported is not copied into each process by the collector's walks
    channel.send(json.dumps({"ready": True}).encode())
    while True:
        message, fds, _, _ = socket.recv_fds(channel, _MESSAGE_BYTES, 3)
        if not message:
            return
        asked = json.loads(message)
        pid = os.fork()
        if pid == 0:
            channel.close()
            _become(asked, fds)  # raises SystemExit: the interpreter ends as a fresh one does
        for fd in fds:
            os.close(fd)
        channel.send(json.dumps({"pid": pid}).encode())
        _, status, usage = os.wait4(pid, 0)
        channel.send(json.dumps({"status": os.waitstatus_to_exitcode(status),
                                 "cpu_s": usage.ru_utime + usage.ru_stime}).encode())


def _become(asked: dict[str, Any], fds: list[int]) -> None:
    """In the forked process: take the streams, place and environment asked for, and run
    ``python -m polite ARGS`` as its main module."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    cwd = str(asked["cwd"])
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(asked["env"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path[0] = cwd  # what -m puts first
    args = [str(arg) for arg in asked["args"]]
    sys.argv = ["-m", *args]  # runpy puts the module's file first
    runpy.run_module("polite", run_name="__main__", alter_sys=True)
    raise SystemExit(0)


# -- the worker's end ---------------------------------------------------------------------

class _Forker:
    """A worker's forking interpreter, started at its first command."""

    def __init__(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        root = Path(__file__).resolve().parents[1]
        self.env = _started_with(dict(os.environ))
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import sys, socket; from tests.commands import _serve; "
             "_serve(socket.socket(fileno=int(sys.argv[1])))", str(theirs.fileno())],
            cwd=root, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL)
        theirs.close()
        self.channel = mine
        self.ready = bool(self._answer()["ready"])
        self.lock = threading.Lock()
        self.cpu_s = 0.0  # the CPU of the processes it forked, which the worker never waits for
        atexit.register(self.close)

    def _answer(self, timeout: float | None = 120) -> dict[str, Any]:
        self.channel.settimeout(timeout)
        message = self.channel.recv(_MESSAGE_BYTES)
        if not message:
            raise RuntimeError("the forking interpreter ended")
        found: dict[str, Any] = json.loads(message)
        return found

    def close(self) -> None:
        self.channel.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def run(self, args: list[str], stdin: bytes | None, timeout: float
            ) -> tuple[int, bytes, bytes]:
        """Run ``polite ARGS`` forked; its status, standard output and error."""
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        if stdin is None:
            in_read, in_write = os.open(os.devnull, os.O_RDONLY), None
        else:
            in_read, in_write = os.pipe()
        try:
            asked = {"args": args, "cwd": os.getcwd(), "env": dict(os.environ)}
            socket.send_fds(self.channel, [json.dumps(asked).encode()],
                            [in_read, out_write, err_write])
        finally:
            for fd in (in_read, out_write, err_write):
                os.close(fd)
        pid = int(self._answer()["pid"])
        try:
            out, err = _exchange(stdin, in_write, out_read, err_read, pid, timeout)
        finally:  # killed past its time-out, or ended: its status is read either way
            for fd in (out_read, err_read):
                os.close(fd)
            ended = self._answer(timeout=None)
        self.cpu_s += float(ended["cpu_s"])
        return int(ended["status"]), out, err


def _exchange(stdin: bytes | None, in_write: int | None, out_read: int, err_read: int,
              pid: int, timeout: float) -> tuple[bytes, bytes]:
    """Write ``stdin`` and read both streams to their ends, as ``communicate`` does; past
    the time-out the process is killed and :class:`subprocess.TimeoutExpired` raised."""
    read = {out_read: bytearray(), err_read: bytearray()}
    pending = memoryview(stdin or b"")
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for fd in read:
            selector.register(fd, selectors.EVENT_READ)
        if in_write is not None:
            if pending:
                os.set_blocking(in_write, False)
                selector.register(in_write, selectors.EVENT_WRITE)
            else:
                os.close(in_write)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                if in_write is not None and in_write in selector.get_map():
                    os.close(in_write)
                raise subprocess.TimeoutExpired(["polite"], timeout, bytes(read[out_read]),
                                                bytes(read[err_read]))
            for key, _ in selector.select(left):
                fd = key.fd
                if fd == in_write:
                    try:
                        pending = pending[os.write(fd, pending[:65536]):]
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(fd)
                        os.close(fd)
                    continue
                chunk = os.read(fd, 65536)
                if chunk:
                    read[fd] += chunk
                else:
                    selector.unregister(fd)
    return bytes(read[out_read]), bytes(read[err_read])


_forker: _Forker | None = None
_starting = threading.Lock()


def forked_cpu_s() -> float:
    """CPU seconds of the commands this process had forked, so far (their parent is the
    forking interpreter: the worker's own count of its children misses them)."""
    return _forker.cpu_s if _forker is not None else 0.0


def _forking() -> _Forker | None:
    """The worker's forking interpreter, when a command can be forked from it now."""
    global _forker
    if not hasattr(os, "fork") or os.environ.get("POLITE_TESTS_FORK") == "0":
        return None
    with _starting:
        if _forker is None:
            _forker = _Forker()
    if not _forker.ready or _started_with(dict(os.environ)) != _forker.env:
        return None
    return _forker


def _text(data: bytes) -> str:
    """Bytes read as ``subprocess.run(text=True)`` reads them."""
    encoding = locale.getpreferredencoding(False)
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")


def run(*args: str, stdin: bytes | None = None, fresh: bool = False,
        timeout: float = _TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """``python -m polite ARGS`` to its end, its output captured as text; ``fresh``: in an
    interpreter started for it alone. Killed past ``timeout`` seconds
    (:class:`subprocess.TimeoutExpired`)."""
    command = [sys.executable, "-m", "polite", *args]
    forker = None if fresh else _forking()
    if forker is None or not forker.lock.acquire(blocking=False):
        return subprocess.run(command, input=stdin.decode() if stdin else None,
                              capture_output=True, text=True, timeout=timeout, check=False)
    try:
        status, out, err = forker.run(list(args), stdin, timeout)
    finally:
        forker.lock.release()
    return subprocess.CompletedProcess(command, status, _text(out), _text(err))

