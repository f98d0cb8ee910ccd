"""The suite's own order: the modules that take longest run first (RUN_FIRST in
tests/conftest.py), so that their waiting overlaps the rest of the run."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import RUN_FIRST, pytest_collection_modifyitems

ROOT = Path(__file__).resolve().parents[1]


def test_run_first_names_test_modules_that_exist() -> None:
    # A module renamed or removed would quietly lose its place at the front.
    missing = [module for module in RUN_FIRST if not (ROOT / module).is_file()]
    assert not missing
    assert len(set(RUN_FIRST)) == len(RUN_FIRST)


@dataclass
class _Item:
    nodeid: str


@dataclass
class _Worker:
    """What a test worker's config gives the ordering: its controller's seed, if any."""
    workerinput: dict[str, int]


def test_the_longest_modules_go_first_in_their_order_the_rest_as_collected() -> None:
    first, second = RUN_FIRST[0], RUN_FIRST[1]
    collected = [_Item("tests/core/test_a.py::test_1"), _Item(f"{second}::test_x"),
                 _Item("tests/core/test_a.py::test_2"), _Item(f"{first}::test_y[1]"),
                 _Item("tests/api/test_b.py::test_3"), _Item(f"{first}::test_y[2]")]
    items: list = list(collected)
    pytest_collection_modifyitems(_Worker({}), items)  # type: ignore[arg-type]  # no seed
    assert [item.nodeid for item in items] == [
        f"{first}::test_y[1]", f"{first}::test_y[2]", f"{second}::test_x",
        "tests/core/test_a.py::test_1", "tests/core/test_a.py::test_2",
        "tests/api/test_b.py::test_3"]


def _shuffled(seed: int, collected: list[_Item]) -> list[str]:
    items: list = list(collected)
    pytest_collection_modifyitems(_Worker({"shuffle_seed": seed}), items)  # type: ignore[arg-type]
    return [item.nodeid for item in items]


def test_a_shuffled_order_keeps_each_module_together_and_comes_again_from_its_seed() -> None:
    collected = [_Item(f"tests/test_{module}.py::test_{test}")
                 for module in "abcdefgh" for test in range(8)]
    orders = {seed: _shuffled(seed, collected) for seed in range(5)}
    for order in orders.values():
        assert sorted(order) == sorted(item.nodeid for item in collected)
        modules = [nodeid.split("::")[0] for nodeid in order]
        runs = [module for place, module in enumerate(modules)
                if place == 0 or modules[place - 1] != module]
        assert len(runs) == len(set(runs)) == 8  # each module's tests in one run
    # the order depends on the seed only, not on the order the tests were collected in
    assert _shuffled(3, collected[::-1]) == orders[3]
    assert len({tuple(order) for order in orders.values()}) == 5
    assert all(order != [item.nodeid for item in collected] for order in orders.values())


LEAKING = '''
import socket


def test_leaves_a_socket_open():
    held = [socket.socket()]
    held.append(held)  # a cycle: only the collector frees it, whenever it next runs


def test_closes_its_socket():
    with socket.socket():
        pass
'''


def test_leaks_fails_the_test_that_left_a_socket_open_and_says_where_it_was_made(
        tmp_path: Path) -> None:
    (tmp_path / "test_leaking.py").write_text(LEAKING)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
               "no:hypothesispytest", "-p", "tests.conftest", "--rootdir", str(tmp_path),
               "-c", os.devnull, str(tmp_path / "test_leaking.py")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    found = subprocess.run([*command, "--leaks", "--leak-frames=5"], capture_output=True,
                           text=True, cwd=ROOT, env=env, timeout=600, check=False)
    assert found.returncode == 1, found.stdout + found.stderr
    assert "2 passed, 1 error" in found.stdout, found.stdout  # its teardown failed
    assert "test_leaking.py::test_leaves_a_socket_open left open:" in found.stdout
    assert "unclosed <socket.socket" in found.stdout
    assert 'test_leaking.py", line 6' in found.stdout  # where the socket was made
    # Without --leaks the socket is freed whenever the collector next runs: nothing fails.
    quiet = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env,
                           timeout=600, check=False)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
