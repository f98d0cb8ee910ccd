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
        # a module of a private package is private too (the generated gRPC modules)
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
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
    "api": ("polite.core", "polite.errors", "polite.config", "polite.storage.base",
            "polite.clock", "polite.fetch", "polite.api"),
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
    # the MCP server for AI agents: a product beside the service and the crawler, which
    # chooses its own store
    "mcp": ("polite.core", "polite.errors", "polite.config", "polite.storage", "polite.clock",
            "polite.fetch", "polite.identity", "polite.mcp"),
    # the URL Frontier service for crawlers in other languages: a product beside the
    # service, the crawler and the MCP server, which chooses its own store
    "frontier": ("polite.core", "polite.errors", "polite.config", "polite.storage",
                 "polite.clock", "polite.fetch", "polite.frontier"),
    # the demonstration sites stand alone: a crawler may be pointed at them, not built in
    "demo": ("polite.core", "polite.errors", "polite.demo"),
}


def test_layers_import_only_downwards() -> None:
    for layer, allowed in ALLOWED.items():
        for path in sorted((SRC / layer).rglob("*.py")):
            for name in _imports(path):
                if name.split(".")[0] == "polite":
                    assert name.startswith(allowed), (path, name)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(tree: ast.Module, package: str, modules: set[str], *,
              in_functions: bool) -> set[str]:
    """The modules of ``modules`` that ``tree`` (a module of ``package``) imports."""
    found: set[str] = set()
    pending: list[ast.AST] = [tree]
    while pending:
        for child in ast.iter_child_nodes(pending.pop()):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if not in_functions and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                named = {f"{base}.{alias.name}" for alias in child.names} & modules
                found.update(named)
                if len(named) < len(child.names):  # a name that is not a module
                    found.add(base)
            pending.append(child)
    return found & modules


def _graph(*, in_functions: bool) -> dict[str, set[str]]:
    """Module -> the modules of polite it imports: at module level, or anywhere with
    ``in_functions`` (an import deferred into a function still ties the two together);
    never under ``if TYPE_CHECKING:``, which runs nothing. ``from package import module``
    is an edge to the module, not to the package (whose ``__init__`` Python runs first
    anyway, circle or not)."""
    paths = {_module_name(path): path for path in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text("utf-8"))
        graph[name] = _imported(tree, package, set(paths), in_functions=in_functions) - {name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                connect(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = [stack.pop()]
            while group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return circles


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_at_module_level() -> None:
    graph = _graph(in_functions=False)
    assert "polite.storage.frontier" in graph["polite.storage.redis_frontier"]  # it reads
    assert _circles(graph) == []


def test_no_import_circle_even_through_imports_in_functions() -> None:
    graph = _graph(in_functions=True)
    assert "polite.storage.redis" in graph["polite.storage"]  # deferred into open_store
    assert _circles(graph) == []
