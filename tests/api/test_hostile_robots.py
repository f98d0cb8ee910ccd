"""A hostile robots.txt must not hold ``polite serve``: other requests are answered while
its work is done.

The file is the one a probe served, at full size: ``User-agent: *``, ``Allow: /`` and 14,000
lines ``Content-Usage: /*x{n}*y train-ai=n`` (507 KB, under the 500 KiB cap). One
``POST /politeness/verbose?purpose=train-ai`` with 50 URLs of that host took 21 s, and
``GET /health`` waited as long. The test asks for ``/health`` once the service has read the
whole file (the origin sees it close the connection) and asserts the answer comes before the
verbose call's: an order of events, not a duration.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack, suppress

import httpx

from tests.arrival import ANCILLARY_BYTES, SO_TIMESTAMPNS, arrived
from tests.serving import loop_cpu_s, polite_serve, polite_serve_process
from tests.sites import request_head, tcp_origin

HOST = "127.74.12.2"
EVICTING_HOST = "127.74.12.3"
LOOKUP_HOST = "127.74.12.4"
HOSTILE = ("User-agent: *\nAllow: /\n" + "".join(f"Content-Usage: /*x{n}*y train-ai=n\n"
                                                  for n in range(14_000))).encode()


def test_health_is_answered_while_a_hostile_file_is_worked_on() -> None:
    consumed = threading.Event()

    def origin(conn: socket.socket, stop: threading.Event) -> None:
        _serve_robots(conn, HOSTILE, after=consumed.set)

    with tcp_origin(HOST, origin) as port, \
            polite_serve("--store", "memory://", "--allow-private") as api:
        # 50 URLs, each matched by one of the patterns (and by shorter ones)
        urls = [f"http://{HOST}:{port}/page{n}x{n}y" for n in range(0, 14_000, 280)]
        asking, verbose = _verbose_in_background(str(api.base_url), urls)
        assert consumed.wait(120), "the service never read robots.txt"
        health = api.get("/health")
        answered_first = asking.is_alive()
        asking.join(600)
        assert health.status_code == 200
        assert answered_first, "/health waited for the verbose call"
        (answer,) = verbose
        assert answer.status_code == 200, answer.text
        for url, found in zip(urls, answer.json(), strict=True):  # (one a turn: allowed or not)
            n = url.rsplit("/page", 1)[1].split("x")[0]
            assert found["usage"]["pref"] == "disallow", url
            assert f": /*x{n}*y train-ai=n" in found["usage"]["reason"], (url, found)


def _health_loop_cpu_s(connection: socket.socket, pid: int) -> float:
    """Ask ``GET /health`` on ``connection`` (kept alive) and return the service loop's CPU
    time from the request to its answer's arrival. The loop's CPU is read before the request
    and after the answer is read; what the loop ran between the answer's arrival (the
    kernel's stamp) and that read is at most the wall time between the two, taken off: on a
    busy machine this client waits for a core to read the answer while the loop goes on
    with the lookups, and that is not time /health waited."""
    begun = loop_cpu_s(pid)
    host, port = connection.getpeername()[:2]
    connection.sendall(f"GET /health HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    answer, landed = b"", 0.0
    whole: int | None = None  # the answer's length, once its head is in
    while whole is None or len(answer) < whole:
        data, ancillary, _, _ = connection.recvmsg(65536, ANCILLARY_BYTES)
        assert data, "the service closed the connection"
        if not answer:
            landed = arrived(ancillary)
        answer += data
        head, blank, _ = answer.partition(b"\r\n\r\n")
        if whole is None and blank:
            length = head.lower().partition(b"\r\ncontent-length:")[2].split(b"\r\n")[0]
            whole = len(head) + len(blank) + int(length or 0)
    ended = loop_cpu_s(pid)
    read_s = time.monotonic() - landed
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    return max(0.0, ended - begun - read_s)


def _verbose_in_background(base_url: str, urls: list[str]
                           ) -> tuple[threading.Thread, list[httpx.Response]]:
    """``POST /politeness/verbose?purpose=train-ai`` of ``urls`` on a thread of its own,
    begun (its client open) when this returns; the answer lands in the list."""
    verbose: list[httpx.Response] = []
    begun = threading.Event()

    def ask() -> None:
        with httpx.Client(base_url=base_url, trust_env=False, timeout=600) as client:
            begun.set()
            verbose.append(client.post("/politeness/verbose", json=urls,
                                       params={"purpose": "train-ai"}))

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    begun.wait(30)
    return asking, verbose


def _serve_robots(conn: socket.socket, body: bytes, *,
                  before: Callable[[], object] | None = None,
                  after: Callable[[], None] | None = None) -> None:
    """``body`` as robots.txt, 404 for anything else; ``before`` is called before the file
    is sent, ``after`` once the service has read it all and closed the connection."""
    with conn:
        head = request_head(conn)
        if head is None:
            return
        if not head.startswith(b"GET /robots.txt "):
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        if before is not None:
            before()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
        if after is not None:
            with suppress(OSError):  # until the service has read it all and closed
                while conn.recv(4096):
                    pass
            after()


def _serve_hostile(conn: socket.socket, stop: threading.Event) -> None:
    _serve_robots(conn, HOSTILE)


# What one /health may cost the service's loop at worst while the call runs, as a share of
# what the loop spent on the whole call: a loop held for the lookups (or for the file's
# parse) spends most of the call inside one /health's wait; answered between two lookups,
# one step. Counted in the loop thread's CPU time, which a busy machine does not stretch as
# it stretches wall time (a wall-time bound failed at load 8, the service descheduled).
HEALTH_SHARE = 0.25


def test_health_stays_quick_beside_a_verbose_call_on_the_hostile_file() -> None:
    """A verbose call of 200 URLs with a purpose, on a service that has not read the file:
    fetched, then parsed and its AI-usage rules compiled in steps on the event loop, then
    one lookup a turn of the loop (a fraction of a millisecond each, see
    tests/core/robots/test_compiled_once.py); /health, asked again and again meanwhile,
    is answered between two steps. (What is counted, not timed, is in
    tests/fetch/test_robots_steps.py.)"""
    with tcp_origin(LOOKUP_HOST, _serve_hostile) as port, \
            polite_serve_process("--store", "memory://", "--allow-private") as (api, process):
        urls = [f"http://{LOOKUP_HOST}:{port}/page{n}x{n}y" for n in range(0, 14_000, 70)]
        started = loop_cpu_s(process.pid)
        asking, verbose = _verbose_in_background(str(api.base_url), urls)
        took: list[float] = []
        with socket.create_connection((api.base_url.host, api.base_url.port)) as health:
            health.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            while asking.is_alive():
                took.append(_health_loop_cpu_s(health, process.pid))
        asking.join()
        call_s = loop_cpu_s(process.pid) - started
        (answer,) = verbose
        assert answer.status_code == 200, answer.text
        assert [found["usage"]["pref"] for found in answer.json()] == ["disallow"] * len(urls)
        assert len(took) >= 5, took  # asked while the lookups ran
        assert max(took) <= HEALTH_SHARE * call_s, (sorted(took)[-5:], call_s)


# 3,000 lines like the probe's 30,000 (``Disallow: /p{i}/*x{i}$``): 72 KB, charged about 1 MB
# parsed with its matcher, so that a 1.5 MiB budget keeps one such file and each new origin
# evicts the one before.
WILDCARD_LINES = ("User-agent: *\n" + "".join(f"Disallow: /p{i}/*x{i}$\n"
                                               for i in range(3000))).encode()


def test_health_is_answered_while_parsed_files_are_evicted() -> None:
    """Eight origins serve the hostile file to one decision call, each new file evicting
    the last; the eighth holds its answer until ``/health`` has been answered, which must
    therefore come while files are being evicted (the probe saw it stall a second as
    evicted files were freed and the collector walked millions of their objects)."""
    answered = threading.Event()
    served: list[int] = []
    seen = threading.Condition()
    origins = 8

    def origin(index: int) -> Callable[[socket.socket, threading.Event], None]:
        def was_served() -> None:
            with seen:
                served.append(index)
                seen.notify_all()

        def handle(conn: socket.socket, stop: threading.Event) -> None:
            _serve_robots(conn, WILDCARD_LINES, after=was_served,
                          before=(lambda: answered.wait(120)) if index == origins - 1 else None)

        return handle

    with ExitStack() as stack:
        ports = [stack.enter_context(tcp_origin(EVICTING_HOST, origin(i)))
                 for i in range(origins)]
        api = stack.enter_context(polite_serve("--store", "memory://", "--allow-private",
                                               "--robots-memory-mb", "1.5",
                                               "--default-delay-ms", "0"))
        urls = [f"http://{EVICTING_HOST}:{port}/p7/ax7" for port in ports]
        decided: list[httpx.Response] = []

        def ask() -> None:
            with httpx.Client(base_url=str(api.base_url), trust_env=False,
                              timeout=600) as client:
                decided.append(client.post("/politeness", json=urls))

        asking = threading.Thread(target=ask, daemon=True)
        asking.start()
        with seen:  # three files read: two evicted already, more to come
            assert seen.wait_for(lambda: len(served) >= 3, 120), "robots.txt never read"
        health = api.get("/health")
        still_open = origins - 1 not in served
        answered.set()
        asking.join(600)
        assert health.status_code == 200
        assert still_open  # the eighth file was held until /health had answered
        (answer,) = decided
        assert answer.status_code == 200, answer.text
        assert answer.json() == []  # every URL disallowed (the answer lists those allowed)
        assert sorted(served) == list(range(origins))


COLLECTED_HOST = "127.74.12.9"


def _collector_objects(api: httpx.Client) -> dict[str, int]:
    """``polite_gc_objects`` of ``/metrics``, by its ``state`` label."""
    found: dict[str, int] = {}
    for line in api.get("/metrics").text.splitlines():
        if line.startswith("polite_gc_objects{"):
            label, value = line.split("}")
            found[label.split('"')[1]] = int(float(value))
    return found


def test_a_full_collection_walks_what_the_service_made_since_start_up() -> None:
    """A full pass of the garbage collector walks every object it tracks, on the event
    loop, when an allocation sets it off: a hostile file's work set one off, and walking
    the service's start-up objects (35,000, for modules, classes and functions that live
    as long as the process) held the loop 10 to 20 ms of CPU at a time. They are frozen
    before the service listens; what it tracks after the hostile file's work (a parsed file
    is a few packed containers) is a small part of them."""
    with tcp_origin(COLLECTED_HOST, _serve_hostile) as port, \
            polite_serve("--store", "memory://", "--allow-private") as api:
        started = _collector_objects(api)
        urls = [f"http://{COLLECTED_HOST}:{port}/page{n}x{n}y" for n in range(0, 14_000, 280)]
        answer = api.post("/politeness/verbose", json=urls, params={"purpose": "train-ai"},
                          timeout=600)
        assert answer.status_code == 200, answer.text
        assert [found["usage"]["pref"] for found in answer.json()] == ["disallow"] * len(urls)
        worked = _collector_objects(api)
    assert started["frozen"] > 20_000, started
    assert worked["tracked"] < started["frozen"] // 5, (started, worked)
