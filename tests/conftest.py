"""Shared test fixtures: where ../shared is, and a guard that keeps sockets on loopback."""

from __future__ import annotations

import fcntl
import gc
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tracemalloc
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.browser import browser, page  # noqa: F401  (fixtures for the page tests)
from tests.commands import forked_cpu_s
from tests.redis_server import redis_cluster, redis_server

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Holds an exclusive lock on the file ``path`` (made if need be) for the block: one
    process at a time, whichever test worker or test run it is."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# Tests whose sites listen on port 80 of fixed loopback addresses (the survey reads names
# without a port): they need root. Each holds the networks of the addresses it binds while
# it serves them (tests/port_80.py: its farms and sites take them), so that two tests never
# bind one address at once, however many workers or runs, and the others run side by side.
ON_PORT_80 = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the farm's sites listen on port 80 (root)"),
]


def on_port_80(test: Any) -> Any:
    for mark in ON_PORT_80:
        test = mark(test)
    return test


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or a skip with the reason when it is not there."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not here: the shared test data lives beside the project root")
    return path


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str,
              make: Callable[[Path], None]) -> Path:
    """A folder ``make`` fills once per test run, whichever worker asks first; the others
    wait for it and share it (read it, do not change it). For what is costly to make: a
    survey of the corpus, the manual, a wheel and a venv."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's, above each worker's own
    folder = root / f"once-{name}"
    with exclusive(root / f"once-{name}.lock"):
        done = folder / ".made"
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


# The survey of the corpus is made once a run (made_once); the mark is kept as the tests'
# label of what they read.
ON_CORPUS_SURVEY = pytest.mark.corpus_survey


@pytest.fixture(scope="session")
def corpus_survey(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``polite survey`` and ``polite report`` over the shared robots.txt corpus, once a
    run for the tests that read its tables (about 1 and 5 s of CPU); they read no figure,
    so none is drawn."""
    corpus = shared_path("corpus", "robots")

    def survey(folder: Path) -> None:
        out = folder / "corpus"
        for args in (["survey", "--robots-dir", str(corpus), "--out", str(out)],
                     ["report", str(out), "--no-figures"]):
            done = subprocess.run([sys.executable, "-m", "polite", *args],
                                  capture_output=True, text=True, timeout=300, check=False)
            assert done.returncode == 0, done.stderr

    return made_once(tmp_path_factory, "corpus-survey", survey) / "corpus"


# The modules that take longest, most of it waiting (sites with delays, worker processes,
# browsers, a venv, the corpus survey), longest first, as a full run measured them under
# -n 4 (each module's wall time on its worker, from its first test's start to its last
# test's end, as test-artifacts/schedule.txt gives it; those of 12 s or more; each run's
# slowest tests are in test-artifacts/durations.txt and its CPU by module in cpu.txt). They
# run before the rest, so that their waiting overlaps the many short tests instead of ending
# the run: `make test` hands each module whole to one worker (--dist loadfile), in this order.
RUN_FIRST = (
    "tests/integrations/test_scrapy_crawl.py",
    "tests/frontier/test_frontier_service.py",
    "tests/frontier/test_frontier_politeness.py",
    "tests/crawl/test_crawl_store_outage.py",
    "tests/api/test_serve_e2e.py",
    "tests/mcp_server/test_mcp_fetch.py",
    "tests/test_survey_report.py",
    "tests/frontier/test_frontier_nodes.py",
    "tests/docs/test_docs_browser.py",
    "tests/crawl/test_crawl_workers.py",
    "tests/crawl/test_crawl_lease.py",
    "tests/storage/test_store_url.py",
    "tests/test_survey_shared.py",
    "tests/test_survey_harvest.py",
    "tests/core/robots/test_compiled_once.py",
    "tests/integrations/test_clients.py",
    "tests/proxy/test_proxy.py",
    "tests/fetch/test_sitemaps_fetch.py",
    "tests/test_cli_survey.py",
    "tests/docs/test_docs_examples.py",
    "tests/test_cli.py",
    "tests/api/test_dashboard_browser.py",
    "tests/frontier/test_frontier_status.py",
    "tests/crawl/test_crawl_farm.py",
    "tests/test_bare_install.py",
    "tests/fetch/test_robots_fetch.py",
    "tests/identity/test_site_signatures.py",
    "tests/test_network_options.py",
    "tests/crawl/test_crawl_disk_full.py",
    "tests/core/robots/test_lint_diff.py",
    "tests/site_side/test_page.py",
    "tests/api/test_dashboard_api.py",
    "tests/proxy/test_tls.py",
    "tests/storage/test_contract.py",
    "tests/crawl/test_regp_experiment.py",
    "tests/fetch/test_decisions.py",
    "tests/mcp_server/test_mcp_peers.py",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shuffle", action="store_true",
        help="run the test modules, and the tests in each, in a shuffled order (its seed "
             "shown in the header): no test may depend on what ran before it "
             "(make test-shuffled)")
    parser.addoption("--shuffle-seed", type=int, default=None, metavar="SEED",
                     help="--shuffle, in the order drawn from SEED (the header's, to run "
                          "a shuffled order again)")
    parser.addoption(
        "--leaks", action="store_true",
        help="after each test, collect the garbage and fail the test (in its teardown) "
             "that left a socket, file or transport open: a collection a test, for finding "
             "leaks, not for every run (make test-leaks)")
    parser.addoption(
        "--leak-frames", type=int, default=0, metavar="FRAMES",
        help="with --leaks, trace where each object was made (FRAMES frames, tracemalloc: "
             "several times slower) to show it")


def pytest_configure(config: pytest.Config) -> None:
    # A run a non-interactive shell started in the background (`make test &` in a script)
    # has SIGINT ignored, and so would every command the tests start, which then never
    # sees the Ctrl-C the tests of interrupted commands send: they get it as a terminal
    # gives it.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if config.getoption("leaks"):
        config.pluginmanager.register(_LeakCheck(config.getoption("leak_frames")),
                                      "polite-leak-check")


def pytest_collection_finish() -> None:
    # A test worker holds every test it collected, and the modules they import, for the
    # whole run: frozen, they are out of every full collection's walk. Its young
    # collections come every 10,000 allocations rather than 700. The six workers'
    # collectors took 17.0 s of their 180 s of CPU in a run (16,197 collections), 9.2 s
    # (4,695) this way; what a test measures of memory it measures after a gc.collect()
    # of its own.
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


class _LeakCheck:
    """``--leaks``: what a test left open is found as it ends, not when the collector
    happens to run during a later test (whose warning names the wrong test)."""

    def __init__(self, frames: int) -> None:
        self.frames = frames

    def pytest_collection_finish(self) -> None:
        # traced from the first test on: what the tests make, not pytest's own start
        if self.frames and not tracemalloc.is_tracing():
            tracemalloc.start(self.frames)

    def pytest_sessionfinish(self) -> None:
        if self.frames:
            tracemalloc.stop()  # the report's own imports are not the tests'

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self) -> None:
        # The collector runs at the test's end alone, where its warnings are caught: run by
        # itself during the test (as allocations come), it freed what the test left open
        # where pytest's own capture took the warning, and the test passed.
        gc.disable()

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        result = yield
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            gc.collect()
        gc.enable()
        left = [found for found in caught if issubclass(found.category, ResourceWarning)]
        if left:
            pytest.fail(f"{item.nodeid} left open:\n" + "\n".join(
                _made_at(found) for found in left), pytrace=False)
        return result


def _made_at(found: warnings.WarningMessage) -> str:
    made = tracemalloc.get_object_traceback(found.source) if found.source is not None \
        else None
    where = "\n".join(made.format()) if made is not None else \
        "  (--leak-frames=20 shows where it was made)"
    return f"{found.message}\n{where}"


def _shuffle_seed(config: pytest.Config) -> int | None:
    """The seed of ``--shuffle``: the one given, or one drawn once a run (a test worker
    takes its controller's, so that every worker collects the same order)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return workerinput.get("shuffle_seed")
    given = config.getoption("shuffle_seed")
    if given is None and not config.getoption("shuffle"):
        return None
    if not hasattr(config, "_shuffle_seed"):
        config._shuffle_seed = (  # type: ignore[attr-defined]
            random.randrange(10**6) if given is None else given)
    return config._shuffle_seed  # type: ignore[attr-defined,no-any-return]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    seed = _shuffle_seed(node.config)
    if seed is not None:
        node.workerinput["shuffle_seed"] = seed


def _say_shuffled(config: pytest.Config) -> None:
    seed = _shuffle_seed(config)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if seed is not None and reporter is not None and not hasattr(config, "workerinput"):
        reporter.write_line(f"shuffled: --shuffle-seed={seed} runs this order again")


def pytest_sessionstart(session: pytest.Session) -> None:
    _say_shuffled(session.config)  # at the start, even with -q


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The modules of :data:`RUN_FIRST` first, in its order; the others after them, in
    the order collected. With ``--shuffle``, the modules and the tests in each in an order
    drawn from its seed instead (each module's tests still together)."""
    seed = _shuffle_seed(config)
    if seed is not None:
        draw = random.Random(seed)
        modules: dict[str, list[pytest.Item]] = {}
        for item in items:
            modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
        order = sorted(modules)  # the same draw whatever order they were collected in
        draw.shuffle(order)
        items[:] = []
        for module in order:
            tests = sorted(modules[module], key=lambda item: item.nodeid)
            draw.shuffle(tests)
            items.extend(tests)
        return
    rank = {module: place for place, module in enumerate(RUN_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


DURATIONS = Path(__file__).resolve().parents[1] / "test-artifacts" / "durations.txt"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config
                            ) -> None:
    """With ``--durations=N`` (as ``make test`` runs), the N slowest phases also go to
    ``test-artifacts/durations.txt``, so that every run leaves them to read."""
    _say_shuffled(config)  # and at the end, beside the failures it may explain
    count = config.getoption("durations")
    if not count or hasattr(config, "workerinput"):
        return
    phases = [report for reports in terminalreporter.stats.values() for report in reports
              if isinstance(report, pytest.TestReport)]
    _write_cpu(phases, count)
    _write_schedule(phases)
    phases.sort(key=lambda report: report.duration, reverse=True)
    total = sum(report.duration for report in phases)
    lines = [f"{report.duration:8.2f}s {report.when:<8} {report.nodeid}"
             for report in phases[:count]]
    DURATIONS.parent.mkdir(parents=True, exist_ok=True)
    DURATIONS.write_text(f"the {len(lines)} slowest of {len(phases)} test phases "
                         f"({total:,.0f} s in all, summed over the workers)\n"
                         + "\n".join(lines) + "\n")


CPU = DURATIONS.with_name("cpu.txt")
_CPU_KEY = pytest.StashKey[dict[str, float]]()


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process, of its children waited for, and of
    the commands forked for it (:mod:`tests.commands`)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
            + forked_cpu_s())


def _measured(item: pytest.Item, when: str) -> Iterator[None]:
    start = _cpu_s()
    yield
    item.stash.setdefault(_CPU_KEY, {})[when] = _cpu_s() - start


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _measured(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _measured(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    return (yield from _measured(item, "teardown"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Iterator[None]:
    report = yield
    cpu_s = item.stash.get(_CPU_KEY, {}).get(call.when)
    if cpu_s is not None:
        report.user_properties.append(("cpu_s", cpu_s))
    return report


def _write_cpu(phases: list[pytest.TestReport], count: int) -> None:
    """The CPU each test module took (its tests' phases, with the processes they waited
    for), most first, then the ``count`` tests that took most, into
    ``test-artifacts/cpu.txt``: where the suite's CPU goes."""
    modules: dict[str, float] = {}
    tests: dict[str, float] = {}
    for report in phases:
        cpu_s = dict(report.user_properties).get("cpu_s")
        if isinstance(cpu_s, float):
            module = report.nodeid.split("::", 1)[0]
            modules[module] = modules.get(module, 0.0) + cpu_s
            tests[report.nodeid] = tests.get(report.nodeid, 0.0) + cpu_s

    def ranked(table: dict[str, float], most: int | None = None) -> str:
        pairs = sorted(table.items(), key=lambda pair: pair[1], reverse=True)[:most]
        return "".join(f"{cpu_s:8.1f}s {name}\n" for name, cpu_s in pairs)

    CPU.parent.mkdir(parents=True, exist_ok=True)
    CPU.write_text(f"CPU (user + system, with the processes waited for) of {len(modules)} "
                   f"test modules: {sum(modules.values()):,.0f} s in all\n"
                   + ranked(modules) + f"\nthe {count} tests that took most\n"
                   + ranked(tests, count))


SCHEDULE = DURATIONS.with_name("schedule.txt")


def _write_schedule(phases: list[pytest.TestReport]) -> None:
    """Each module's wall time on its worker (from its first test's start to its last
    test's end) and when it ended, the modules in the order they ended, into
    ``test-artifacts/schedule.txt``: what RUN_FIRST ranks, and what ran last, alone."""
    if not phases:
        return
    spans: dict[str, tuple[float, float, str]] = {}
    for report in phases:
        module = report.nodeid.split("::", 1)[0]
        node = getattr(report, "node", None)  # the worker's, under xdist
        worker = node.gateway.id if node is not None else "-"
        start, stop, _ = spans.get(module, (report.start, report.stop, worker))
        spans[module] = (min(start, report.start), max(stop, report.stop), worker)
    zero = min(start for start, _, _ in spans.values())
    ends: dict[str, float] = {}
    for _, stop, worker in spans.values():
        ends[worker] = max(ends.get(worker, zero), stop)
    lines = [f"{stop - zero:7.1f} {stop - start:7.1f}s  {worker:<4} {module}"
             for module, (start, stop, worker) in sorted(spans.items(),
                                                         key=lambda pair: pair[1][1])]
    SCHEDULE.parent.mkdir(parents=True, exist_ok=True)
    SCHEDULE.write_text(
        f"the {len(spans)} test modules in the order they ended: when (s from the first "
        "test's start), their wall time on their worker, the worker\n"
        + "\n".join(lines) + "\n\nwhen each worker ran its last test: "
        + ", ".join(f"{worker} {end - zero:.1f} s" for worker, end in sorted(ends.items()))
        + "\n\nthe modules by wall time, most first\n"
        + "".join(f"{stop - start:8.1f}s {module}\n" for module, (start, stop, _) in
                  sorted(spans.items(), key=lambda pair: pair[1][0] - pair[1][1])))


_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: object) -> None:
    host = address[0] if isinstance(address, tuple) else address
    loopback = isinstance(host, str) and (host.startswith("127.") or host in ("::1", "localhost"))
    if self.family in (socket.AF_INET, socket.AF_INET6) and not loopback:
        raise RuntimeError(f"tests may only connect to loopback, not {address!r}")
    _real_connect(self, address)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)
    yield


@pytest.fixture(scope="session")
def _redis_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    folder = tmp_path_factory.mktemp("redis")
    with redis_server(folder, unix_socket=folder / "redis.sock") as url:
        yield url, f"unix://{folder / 'redis.sock'}?db=0"


@pytest.fixture(scope="session")
def redis_url(_redis_urls: tuple[str, str]) -> str:
    """One real redis-server for the session; tests keep apart by key prefix."""
    return _redis_urls[0]


@pytest.fixture(scope="session")
def redis_unix_url(_redis_urls: tuple[str, str]) -> str:
    """The session's redis-server (:func:`redis_url`'s) on its Unix socket:
    ``unix:///PATH?db=0``."""
    return _redis_urls[1]


@pytest.fixture(scope="session")
def rediss_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server speaking TLS only, with a certificate of a CA of the test's
    own: ``rediss://127.0.0.1:PORT/0?ssl_ca_certs=CA``."""
    from tests.tls import make_authority

    folder = tmp_path_factory.mktemp("rediss")
    with redis_server(folder, tls=make_authority(folder, "redis-ca")) as url:
        yield url


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server in cluster mode (one node, every slot): scripts whose keys are in
    two slots are refused with CROSSSLOT, as by a Redis Cluster of many nodes."""
    with redis_server(tmp_path_factory.mktemp("redis-cluster"), cluster=True) as url:
        yield url


@pytest.fixture(scope="session")
def redis_cluster_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """A real Redis Cluster of three redis-server primaries (started once, on the first
    test that asks); its nodes' URLs. polite reaches it as ``NODE/0?cluster=1``."""
    with redis_cluster(tmp_path_factory.mktemp("redis-3-nodes")) as nodes:
        yield nodes


@pytest.fixture
def redis_prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}:"
