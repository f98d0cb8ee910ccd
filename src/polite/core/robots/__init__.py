"""robots.txt in every dialect polite reads: parsing, matching, typed fields, META tags."""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

from polite.core._steps import Steps
from polite.core.robots.meta import (
    RobotsDirectives,
    parse_meta_content,
    parse_meta_tags,
    parse_x_robots_tag,
)
from polite.core.robots.model import (
    AgentRules,
    DecidedBy,
    Decision,
    Dialect,
    Directive,
    Group,
    ParseIssue,
    Rule,
    Severity,
)
from polite.core.robots.parser import MAX_ROBOTS_BYTES, parse_body, parse_body_steps
from polite.core.robots.robotstxt import RobotsTxt, product_token
from polite.errors import UnknownDialect

if TYPE_CHECKING:
    from polite.core.robots.diff import (
        UNNAMED_AGENT,
        Change,
        RobotsDiff,
        diff,
        diff_bodies,
        named_agents,
        sample_paths,
    )
    from polite.core.robots.explain import (
        AgentMatch,
        Cell,
        Explanation,
        GroupChoice,
        TieBreak,
        default_dialects,
        explain,
        explain_body,
    )
    from polite.core.robots.lint import (
        LineClass,
        LineKind,
        LintReport,
        lint,
        lint_body,
    )

__all__ = [
    "MAX_ROBOTS_BYTES",
    "UNNAMED_AGENT",
    "AgentMatch",
    "AgentRules",
    "Cell",
    "Change",
    "DecidedBy",
    "Decision",
    "Dialect",
    "Directive",
    "Explanation",
    "Group",
    "GroupChoice",
    "LineClass",
    "LineKind",
    "LintReport",
    "ParseIssue",
    "RobotsDiff",
    "RobotsDirectives",
    "RobotsTxt",
    "Rule",
    "Severity",
    "TieBreak",
    "default_dialects",
    "diff",
    "diff_bodies",
    "explain",
    "explain_body",
    "lint",
    "lint_body",
    "named_agents",
    "parse",
    "parse_dialect",
    "parse_meta_content",
    "parse_meta_tags",
    "parse_x_robots_tag",
    "product_token",
    "sample_paths",
]


# The tools a person runs on a file (diff, explain, lint), imported when first named: a
# process that only parses and matches (a server, a crawler, a frontier) is spared a fifth of
# this package's import.
_TOOLS = {
    **dict.fromkeys(("UNNAMED_AGENT", "Change", "RobotsDiff", "diff", "diff_bodies",
                     "named_agents", "sample_paths"), "diff"),
    **dict.fromkeys(("AgentMatch", "Cell", "Explanation", "GroupChoice", "TieBreak",
                     "default_dialects", "explain", "explain_body"), "explain"),
    **dict.fromkeys(("LineClass", "LineKind", "LintReport", "lint", "lint_body"), "lint"),
}


def __getattr__(name: str) -> Any:
    """A name of :mod:`polite.core.robots.diff`, ``explain`` or ``lint``, from its module
    (imported then)."""
    tool = _TOOLS.get(name)
    if tool is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{tool}"), name)


class _Package(ModuleType):
    """This package, whose ``diff``, ``explain`` and ``lint`` stay the functions whoever
    imports their modules first: the import system names a submodule on its package once
    loaded, and the package's member of that name is the function of that name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and value.__name__ == f"{__name__}.{name}" and (
                _TOOLS.get(name) == name):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def parse_dialect(name: str | Dialect) -> Dialect | None:
    """A dialect from its name; ``None`` for ``"auto"``. Raises :class:`UnknownDialect`."""
    if isinstance(name, Dialect):
        return name
    if name == "auto":
        return None
    try:
        return Dialect(name.lower())
    except ValueError:
        known = ", ".join(["auto", *(d.value for d in Dialect)])
        message = f"unknown robots.txt dialect {name!r}; choose one of {known}"
        raise UnknownDialect(message) from None


def parse(
    body: bytes | str,
    dialect: str | Dialect = "auto",
    *,
    url: str | None = None,
    max_bytes: int = MAX_ROBOTS_BYTES,
) -> RobotsTxt:
    """Read a robots.txt body. Never raises on the body's content: problems become
    :attr:`RobotsTxt.issues`.

    ``dialect`` is ``"auto"`` (REGP when the file says ``Robot-version: 3.0`` or higher, else
    RFC 9309), ``"rfc9309"``, ``"google"``, ``"koster1996"`` or ``"regp"``. ``url``, the
    file's own URL, resolves relative Sitemap lines. Bodies over ``max_bytes`` are cut there.
    """
    # parse_steps's work without its own generator: a few percent of a small file's time
    return RobotsTxt(parse_body(body, parse_dialect(dialect), url=url, max_bytes=max_bytes))


def parse_steps(
    body: bytes | str,
    dialect: str | Dialect = "auto",
    *,
    url: str | None = None,
    max_bytes: int = MAX_ROBOTS_BYTES,
) -> Steps[RobotsTxt]:
    """:func:`parse` in steps (see :mod:`polite.core._steps`): for a caller that must not
    wait for a large file's whole reading."""
    body_read = yield from parse_body_steps(body, parse_dialect(dialect), url=url,
                                            max_bytes=max_bytes)
    return RobotsTxt(body_read)
