"""``polite COMMAND`` in a process of its own forked from an interpreter that has imported
polite already (one a test worker, started at its first command): :func:`run` to its end,
:func:`popen` started (``polite serve``, ``polite frontier serve``), and
:func:`command_line` for code that starts the process itself (a launcher, :mod:`tests.launch`,
asks for the fork).

The suite runs some five hundred commands; each fresh interpreter spent 0.1 to 0.35 s of
CPU importing polite before its first line of work, about a sixth of the suite's CPU. The
process forked here is a real one all the same: its own pid (signals reach it), its standard
streams pipes read here, its environment and working directory the caller's, ``sys.argv``
and ``__main__`` as ``python -m polite`` makes them, its exit an interpreter's (its threads
waited for, atexit, the streams flushed; the modules imported before the fork are not torn
down: see :func:`_exit`), and its status what a fresh one would give. What it does not show is
a module a command uses without importing it that the interpreter imported first: the tests
of ``tests/test_cli.py`` (``fresh=True`` here), the bare install's, those of
``tests/test_cli_package.py`` and those that start their processes themselves run fresh
interpreters for that, and mypy reads every import.

Nothing that starts threads is imported before the fork (numpy, pyarrow and matplotlib
start theirs at import: the report's figures and tables import them in the command's own
process), and the interpreter refuses to fork if a thread has started anyway: a new
interpreter runs the command then, as it does where ``os.fork`` is not, or when the command
is given other values of the variables an interpreter reads as it starts (``PYTHON*``, the
locale's) than the forking one had."""

from __future__ import annotations

import atexit
import contextlib
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
from typing import Any, NoReturn

__all__ = ["Forked", "command_line", "forked_commands", "forked_cpu_s", "popen", "run"]

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
    "polite.cli.serve", "polite.serve", "polite.frontier._server",
)

# What one command imports that the others do not, made ready at its first run (a module
# run with -m, and the command's first word): the MCP SDK, and Scrapy (not its reactor, which
# each crawl chooses), are each about a second of CPU to import
_IMPORTED_FOR = {
    ("polite", "mcp"): ("polite.mcp._server", "polite.mcp._fetch"),
    ("scrapy", "runspider"): (
        "scrapy.cmdline", "scrapy.crawler", "scrapy.spiders", "scrapy.linkextractors",
        "scrapy.commands.runspider", "scrapy.core.engine", "scrapy.core.downloader",
        "scrapy.core.scraper", "scrapy.core.downloader.handlers.http11",
        "scrapy.extensions.logstats", "polite.integrations.scrapy"),
}

# Variables the interpreter reads as it starts: a command given other values than the
# forking interpreter had starts an interpreter of its own
_READ_AT_START = ("PYTHON", "LC_", "LANG")


def _started_with(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_READ_AT_START)}


# -- the forking interpreter --------------------------------------------------------------

def _serve(channel: socket.socket) -> None:
    """Fork a process for each command asked for, on ``channel`` by the worker or at the
    address it is told by a launcher (:mod:`tests.launch`): its standard streams and a
    socket come with the ask; the pid is said on that socket at once, the status and CPU
    seconds once it ends (a launched command's CPU on ``channel`` too, for the worker's
    count). A command whose socket closes first (its launcher killed) is killed. Ends when
    the worker's end closes."""
    _import(_IMPORTED_FIRST)
    threads = _threads()
    if threads != 1:  # a fork would leave a thread's locks held for ever
        channel.send(json.dumps({"ready": False, "threads": threads}).encode())
        return
    gc.collect()
    gc.freeze()  # what was imported is not copied into each process by the collector's walks
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    name = f"polite-tests-{os.getpid()}-{os.urandom(8).hex()}"
    try:
        listener.bind(f"\0{name}")  # an abstract address (Linux): no file to remove
        listener.listen(64)
    except OSError:  # no launcher then: command_line() gives fresh interpreters
        name = ""
    channel.send(json.dumps({"ready": True, "address": name and f"@{name}"}).encode())
    woken, wake = os.pipe()  # a child's end wakes the loop (SIGCHLD)
    for fd in (woken, wake):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    children: dict[int, tuple[socket.socket, bool]] = {}  # a pid's socket, and whether a
    # launcher asked for it
    with selectors.DefaultSelector() as selector:
        selector.register(channel, selectors.EVENT_READ)
        selector.register(listener, selectors.EVENT_READ)
        selector.register(woken, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj is woken:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(woken, 4096):
                            pass
                    continue
                if isinstance(key.data, int):  # a command's socket, closed by its asker
                    selector.unregister(key.fileobj)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(key.data, signal.SIGKILL)
                    continue
                launched = key.fileobj is listener
                asker = listener.accept()[0] if launched else channel
                try:
                    message, fds, _, _ = socket.recv_fds(asker, _MESSAGE_BYTES, 4)
                except ConnectionError:
                    message, fds = b"", []
                if not message:
                    if launched:  # gone before it asked
                        asker.close()
                        continue
                    return
                asked = json.loads(message)
                if launched and _started_with(asked["env"]) != _started_with(dict(os.environ)):
                    asker.send(json.dumps({"fresh": True}).encode())  # it execs python
                    for fd in fds:
                        os.close(fd)
                    asker.close()
                    continue
                reply = asker if launched else socket.socket(fileno=fds.pop())
                command = (asked["module"], next(iter(asked["args"]), ""))
                if command in _IMPORTED_FOR:
                    _import(_IMPORTED_FOR[command])
                    if _threads() != 1 or "twisted.internet.reactor" in sys.modules:
                        raise RuntimeError(f"importing for {command} started a thread or a "
                                           "reactor")
                pid = os.fork()
                if pid == 0:  # what the loop holds is not the command's
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    selector.close()
                    for held in (channel, listener, reply, *(c for c, _ in children.values())):
                        held.close()
                    for fd in (woken, wake):
                        os.close(fd)
                    _become(asked, fds)  # the interpreter ends as a fresh one
                for fd in fds:
                    os.close(fd)
                reply.send(json.dumps({"pid": pid}).encode())
                children[pid] = (reply, launched)
                selector.register(reply, selectors.EVENT_READ, pid)
            _reap(children, selector, channel)


def _import(names: tuple[str, ...]) -> None:
    for name in names:
        with contextlib.suppress(ImportError):  # an extra not installed: imported by the
            __import__(name)  # command that needs it, which says which


def _threads() -> int:
    """This process's threads, those of C libraries included."""
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1


def _reap(children: dict[int, tuple[socket.socket, bool]], selector: selectors.BaseSelector,
          channel: socket.socket) -> None:
    """Say to each ended child's socket that it ended, with its status and CPU seconds (a
    launched one's CPU to the worker too)."""
    while children:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reply, launched = children.pop(pid)
        with contextlib.suppress(KeyError):  # not if it was closed first
            selector.unregister(reply)
        cpu_s = usage.ru_utime + usage.ru_stime
        with contextlib.suppress(OSError):  # the worker gone, or no longer asking
            reply.send(json.dumps({"status": os.waitstatus_to_exitcode(status),
                                   "cpu_s": cpu_s}).encode())
        reply.close()
        if launched:
            with contextlib.suppress(OSError):
                channel.send(json.dumps({"launched_cpu_s": cpu_s}).encode())


def _become(asked: dict[str, Any], fds: list[int]) -> NoReturn:
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
    try:
        runpy.run_module(str(asked["module"]), run_name="__main__", alter_sys=True)
    except SystemExit as end:
        if end.code is not None and not isinstance(end.code, int):
            raise  # a message: the interpreter prints it and ends with 1, as a fresh one
        _exit(end.code or 0)
    _exit(0)  # (an exception other than SystemExit goes on to the interpreter's own end)


def _exit(status: int) -> NoReturn:
    """End the command as the interpreter ends one: its threads waited for, the functions
    registered with :mod:`atexit` run, what the command made and left in cycles collected
    (their finalizers run), the standard streams flushed; then ``status``. What the
    interpreter does after that, tearing down every module imported before the fork, wrote
    to each of their pages shared with the forking interpreter: 6,200 page faults and some
    40 ms of CPU a command (of 50), hundreds of commands a run."""
    threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter calls first
    atexit._run_exitfuncs()
    gc.collect()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # the interpreter says so, and ends with 120
        raise SystemExit(status) from None
    os._exit(status)


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
        try:
            answer = _answer(mine, 120)
        except (RuntimeError, OSError):  # it ended, or never answered: fresh interpreters
            answer = {"ready": False}
        self.ready = bool(answer["ready"])
        self.address = str(answer.get("address", ""))  # where a launcher asks
        self.cpu_s = 0.0  # the CPU of the processes it forked, which the worker never waits for
        self.forked = 0  # how many
        atexit.register(self.close)

    def close(self) -> None:
        self.channel.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def start(self, args: list[str], env: dict[str, str], *, stdin: bool
              ) -> tuple[int, socket.socket, int | None, int, int]:
        """Fork ``polite ARGS``, its output and errors on pipes, its input a pipe when
        ``stdin`` (else empty): its pid, the socket its end will be said on (:meth:`status`),
        and this side's ends of the pipes (the input's, None without one; the output's; the
        errors')."""
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        in_read, in_write = os.pipe() if stdin else (os.open(os.devnull, os.O_RDONLY), None)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        asked = {"module": "polite", "args": args, "cwd": os.getcwd(), "env": env}
        self.forked += 1
        try:
            socket.send_fds(self.channel, [json.dumps(asked).encode()],
                            [in_read, out_write, err_write, theirs.fileno()])
            pid = int(_answer(mine, 120)["pid"])
        except BaseException:
            mine.close()
            for fd in (out_read, err_read, in_write):
                if fd is not None:
                    os.close(fd)
            raise
        finally:  # the command's ends are the command's
            theirs.close()
            for fd in (in_read, out_write, err_write):
                os.close(fd)
        return pid, mine, in_write, out_read, err_read

    def count_launched(self) -> None:
        """Count the commands a launcher asked for that ended, and their CPU, as the
        forking interpreter said."""
        try:
            while True:
                ended = _answer(self.channel, 0)
                self.forked += 1
                self.cpu_s += float(ended["launched_cpu_s"])
        except (BlockingIOError, RuntimeError, OSError):
            pass  # none left to read
        finally:
            self.channel.settimeout(None)  # the asks sent on it wait for room

    def status(self, reply: socket.socket, timeout: float | None) -> int:
        """The status of the command whose end ``reply`` says, its CPU counted (as
        :func:`_answer` when it has not ended within ``timeout``)."""
        ended = _answer(reply, timeout)
        reply.close()
        self.cpu_s += float(ended["cpu_s"])
        return int(ended["status"])


def _answer(channel: socket.socket, timeout: float | None) -> dict[str, Any]:
    """The next message on ``channel`` (:class:`TimeoutError` past ``timeout``; with 0,
    :class:`BlockingIOError` when none is there)."""
    channel.settimeout(timeout)
    message = channel.recv(_MESSAGE_BYTES)
    if not message:
        raise RuntimeError("the forking interpreter ended")
    found: dict[str, Any] = json.loads(message)
    return found


class Forked:
    """A ``polite`` command forked, shown as :class:`subprocess.Popen` shows a process: its
    output and errors read from pipes (text), its end waited for, signals sent to it."""

    def __init__(self, forker: _Forker, args: list[str], env: dict[str, str]) -> None:
        self.args = [sys.executable, "-m", "polite", *args]
        self._forker = forker
        self.returncode: int | None = None
        self.pid, self._reply, _, out_read, err_read = forker.start(args, env, stdin=False)
        encoding = locale.getpreferredencoding(False)
        self.stdin = None
        self.stdout = open(out_read, encoding=encoding)  # noqa: SIM115  (closed by __exit__)
        self.stderr = open(err_read, encoding=encoding)  # noqa: SIM115

    def _ended(self, timeout: float | None) -> bool:
        try:
            self.returncode = self._forker.status(self._reply, timeout)
        except (BlockingIOError, TimeoutError):
            return False
        return True

    def poll(self) -> int | None:
        if self.returncode is None:
            self._ended(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self._ended(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # not a pid the system may have given another process
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stdout.close()
        self.stderr.close()
        self.wait()


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


def forked_commands() -> int:
    """How many commands this process had forked, so far (those of :func:`command_line`
    once they ended)."""
    if _forker is None:
        return 0
    _forker.count_launched()
    return _forker.forked


def forked_cpu_s() -> float:
    """CPU seconds of the commands this process had forked that ended, so far (their parent
    is the forking interpreter: the worker's own count of its children misses them)."""
    if _forker is None:
        return 0.0
    _forker.count_launched()
    return _forker.cpu_s


def _forking(env: dict[str, str]) -> _Forker | None:
    """The worker's forking interpreter, when a command given ``env`` can be forked from
    it."""
    global _forker
    if not hasattr(os, "fork") or os.environ.get("POLITE_TESTS_FORK") == "0":
        return None
    with _starting:
        if _forker is None:
            _forker = _Forker()
    if not _forker.ready or _started_with(env) != _forker.env:
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
    env = dict(os.environ)
    forker = None if fresh else _forking(env)
    if forker is None:
        return subprocess.run(command, input=stdin.decode() if stdin else None,
                              capture_output=True, text=True, timeout=timeout, check=False)
    pid, reply, in_write, out_read, err_read = forker.start(list(args), env,
                                                            stdin=stdin is not None)
    try:
        out, err = _exchange(stdin, in_write, out_read, err_read, pid, timeout)
    finally:  # killed past its time-out, or ended: its status is read either way
        for fd in (out_read, err_read):
            os.close(fd)
        status = forker.status(reply, None)
    return subprocess.CompletedProcess(command, status, _text(out), _text(err))


def popen(*args: str, env: dict[str, str] | None = None
          ) -> Forked | subprocess.Popen[str]:
    """``python -m polite ARGS`` started, its output and errors on pipes (text), forked
    when it can be (``env``: the environment it is given, else this process's)."""
    given = dict(os.environ if env is None else env)
    forker = _forking(given)
    if forker is None:
        return subprocess.Popen([sys.executable, "-m", "polite", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=given)
    return Forked(forker, list(args), given)


_LAUNCHER = Path(__file__).with_name("launch.py")


def command_line(*args: str, module: str = "polite") -> list[str]:
    """A command line of ``python -m MODULE ARGS`` for code that starts the process itself
    (the MCP SDK's stdio client, a test's own ``subprocess.Popen``): forked by this worker's
    forking interpreter through :mod:`tests.launch` when it can be. The pid its starter sees
    is the launcher's, which passes signals on; a test that kills its process with SIGKILL
    and at once starts another on the same state wants :func:`popen` or a fresh
    interpreter (the forking interpreter kills the command a moment later)."""
    forker = _forking(dict(os.environ))
    if forker is None or not forker.address:
        return [sys.executable, "-m", module, *args]
    return [sys.executable, "-I", "-S", str(_LAUNCHER), forker.address, module, *args]
