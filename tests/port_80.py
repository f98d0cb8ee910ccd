"""Port 80 of the loopback addresses, held by one test at a time per network of 256
addresses (127.A.B.0/24), whichever worker of whichever test run it is: two tests binding
one address on port 80 at once would fail, and two on networks of their own run side by
side (the survey's farms read names without a port, so their sites listen on port 80).

A test holds what it binds while it serves: a farm takes all its networks at once, in one
order, before it binds any, so two farms never each wait for the other's."""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

FOLDER = Path(tempfile.gettempdir())
# The one lock of every port-80 test, as runs before the networks' locks took it (each test
# alone, exclusively): held shared here, so that a run of either kind excludes the other's.
EVERY = "polite-tests-port-80.lock"

_guard = threading.Lock()
_held: dict[Path, tuple[int, int]] = {}  # lock file -> (descriptor, holders in this process)


def network_of(address: str) -> str:
    return address.rsplit(".", 1)[0]


def _take(path: Path, mode: int) -> None:
    with _guard:
        if path in _held:  # the same test again (a second site on the network)
            descriptor, count = _held[path]
            _held[path] = (descriptor, count + 1)
            return
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(descriptor, mode)
        except BaseException:
            os.close(descriptor)
            raise
        _held[path] = (descriptor, 1)


def _give(path: Path) -> None:
    with _guard:
        descriptor, count = _held[path]
        if count > 1:
            _held[path] = (descriptor, count - 1)
            return
        del _held[path]
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        os.close(descriptor)


@contextmanager
def holding_port_80(addresses: Iterable[str], folder: Path = FOLDER) -> Iterator[None]:
    """Port 80 of ``addresses`` this test's to bind until the block ends (none: no lock);
    the locks are files in ``folder``, the machine's temporary folder."""
    addresses = list(addresses)
    if not addresses:
        yield
        return
    paths = [folder / f"polite-tests-port-80-{network}.lock"
             for network in sorted({network_of(address) for address in addresses})]
    taken: list[Path] = []
    try:
        _take(folder / EVERY, fcntl.LOCK_SH)
        taken.append(folder / EVERY)
        for path in paths:
            _take(path, fcntl.LOCK_EX)
            taken.append(path)
        yield
    finally:
        for path in reversed(taken):
            _give(path)
