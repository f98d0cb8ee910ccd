"""The port-80 locks (tests/port_80.py): a test holding an address's network keeps every
other process from it, and from the one lock of runs before them, and no other network."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.port_80 import EVERY, holding_port_80

# A process of its own (flock is per process): can it lock the file now, without waiting?
_TRY = ("import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)\n"
        "try:\n"
        "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "except BlockingIOError:\n"
        "    sys.exit(1)\n")


def free(path: Path) -> bool:
    done = subprocess.run([sys.executable, "-c", _TRY, str(path)], check=False, timeout=60)
    return done.returncode == 0


def test_a_network_held_is_held_from_every_other_process_until_the_block_ends(
        tmp_path: Path) -> None:
    held = tmp_path / "polite-tests-port-80-127.0.251.lock"
    other = tmp_path / "polite-tests-port-80-127.0.252.lock"
    with holding_port_80(["127.0.251.1", "127.0.251.9"], tmp_path):
        with holding_port_80(["127.0.251.2"], tmp_path):  # a second site of the same test
            assert not free(held)
        assert not free(held)  # still the first's
        assert free(other)
        assert not free(tmp_path / EVERY)  # a run that takes the one lock waits for this one
    assert free(held) and free(tmp_path / EVERY)


def test_no_address_takes_no_lock(tmp_path: Path) -> None:
    with holding_port_80([], tmp_path):
        assert not (tmp_path / EVERY).exists()
