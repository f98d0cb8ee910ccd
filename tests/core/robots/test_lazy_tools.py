"""The tools a person runs on a robots.txt (diff, explain, lint) are imported when first
named: a process that only parses and matches (a server, a crawler, a frontier node) starts
without them, and ``from polite.core.robots import lint`` still gives the tool."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import polite.core.robots as robots
from tests.imports import loaded

TOOLS = ("polite.core.robots.diff", "polite.core.robots.explain", "polite.core.robots.lint")


def test_the_products_start_without_the_tools() -> None:
    held = loaded("polite.serve, polite.crawl.setup, polite.mcp._server, "
                  "polite.frontier._server, polite.cli", "polite")
    assert "polite.core.robots" in held
    assert [name for name in held if name in TOOLS] == []


def test_each_tool_is_its_module_s_own_object() -> None:
    from polite.core.robots import UNNAMED_AGENT, LintReport, diff_bodies, explain_body, lint

    diff_module = importlib.import_module("polite.core.robots.diff")
    explain_module = importlib.import_module("polite.core.robots.explain")
    lint_module = importlib.import_module("polite.core.robots.lint")

    assert robots.lint is lint is lint_module.lint
    assert robots.LintReport is LintReport is lint_module.LintReport
    assert explain_body is explain_module.explain_body
    assert diff_bodies is diff_module.diff_bodies
    assert UNNAMED_AGENT == diff_module.UNNAMED_AGENT == "AnyOtherBot"
    for name in robots.__all__:
        assert getattr(robots, name) is not None, name


def test_a_name_it_does_not_have_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_tool"):
        robots.no_such_tool  # noqa: B018


def test_diff_explain_and_lint_are_the_functions_whoever_imports_their_modules_first() -> None:
    script = ("import polite.core.robots.diff, polite.core.robots.explain, "
              "polite.core.robots.lint\n"
              "from polite.core.robots import diff, explain, lint\n"
              "import polite.core.robots as robots\n"
              "print(*(type(tool).__name__ for tool in (diff, explain, lint, robots.diff)))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["function"] * 4
