"""The layer rules of DESIGN.md, read from the imports of every module."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path

import polite

SRC = Path(polite.__file__).resolve().parent
STDLIB = set(sys.stdlib_module_names)
# The pure core never touches sockets, clocks, the environment or randomness.
CORE_FORBIDDEN = {"asyncio", "socket", "time", "os", "random", "logging", "subprocess",
                  "threading", "ssl", "http", "urllib.request", "select", "selectors"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_core_imports_only_the_standard_library_and_itself() -> None:
    files = sorted((SRC / "core").rglob("*.py"))
    assert files
    for path in files:
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "polite":
                assert name.startswith(("polite.core", "polite.errors")), (path, name)
                continue
            assert top in STDLIB or top == "__future__", (path, name)
            assert name not in CORE_FORBIDDEN and top not in CORE_FORBIDDEN, (path, name)


def test_config_is_a_leaf_with_the_standard_library_and_the_errors() -> None:
    for name in _imports(SRC / "config.py"):
        top = name.split(".")[0]
        assert name == "polite.errors" or top in STDLIB or top == "__future__", name


def test_every_public_module_declares_its_all() -> None:
    for info in pkgutil.walk_packages([str(SRC)], prefix="polite."):
        if info.name.split(".")[-1].startswith("_") or info.name == "polite.__main__":
            continue
        module = importlib.import_module(info.name)
        exported = getattr(module, "__all__", None)
        assert exported is not None, info.name
        assert len(set(exported)) == len(exported), info.name  # ruff's RUF022 keeps it sorted
        for name in exported:
            assert hasattr(module, name), (info.name, name)


# What each layer may import from polite itself (DESIGN.md, "Layers").
ALLOWED = {
    "core": ("polite.core", "polite.errors"),
    "storage": ("polite.core", "polite.errors", "polite.storage"),
    # fetch sees the storage protocols only; concrete backends are chosen at the edges
    "fetch": ("polite.core", "polite.errors", "polite.config", "polite.storage.base",
              "polite.clock", "polite.fetch"),
    "api": ("polite.core", "polite.errors", "polite.storage.base", "polite.clock",
            "polite.fetch", "polite.api"),
    # api and proxy are siblings: the edge (polite.serve) puts them on one port
    "proxy": ("polite.core", "polite.errors", "polite.storage.base", "polite.clock",
              "polite.fetch", "polite.proxy"),
    # the crawler is a sibling of api and proxy; open_crawler is its own wiring, so it may
    # choose a store (polite.storage) as polite.serve does for the service
    # Web Bot Auth: keys, signatures, key directories fetched through fetch's guard
    "identity": ("polite.core", "polite.errors", "polite.config", "polite.clock",
                 "polite.fetch", "polite.identity"),
    "crawl": ("polite.core", "polite.errors", "polite.config", "polite.storage",
              "polite.clock", "polite.fetch", "polite.identity", "polite.crawl"),
    # the survey likewise: a product that keeps its own state
    "survey": ("polite.core", "polite.errors", "polite.storage", "polite.clock",
               "polite.fetch", "polite.survey"),
    # the site middleware and its configuration page: a product of its own (seed 003)
    "site": ("polite.core", "polite.errors", "polite.storage", "polite.clock",
             "polite.fetch", "polite.identity", "polite.site"),
    # the drop-ins for Scrapy, httpx and requests: a product that chooses its own store
    "integrations": ("polite.core", "polite.errors", "polite.config", "polite.storage",
                     "polite.clock", "polite.fetch", "polite.identity",
                     "polite.integrations"),
    # the demonstration sites stand alone: a crawler may be pointed at them, not built in
    "demo": ("polite.core", "polite.errors", "polite.demo"),
}


def test_layers_import_only_downwards() -> None:
    for layer, allowed in ALLOWED.items():
        for path in sorted((SRC / layer).rglob("*.py")):
            for name in _imports(path):
                if name.split(".")[0] == "polite":
                    assert name.startswith(allowed), (path, name)
