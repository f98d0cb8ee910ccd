"""The suite's own order: the modules that take longest run first (RUN_FIRST in
tests/conftest.py), so that their waiting overlaps the rest of the run."""

from __future__ import annotations

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
