"""The reference pages, generated from the code at every build rather than written by hand.

- ``reference/cli.md``: every command and option of the ``polite`` parser, walked through its
  subparsers;
- ``reference/rest.md``: every path, method and parameter of the OpenAPI document that
  ``polite serve`` answers at ``/openapi.json``;
- ``reference/python/*.md``: every name in ``__all__`` of the public modules, rendered by
  mkdocstrings from its docstring;
- ``reference/urlfrontier.md``: every RPC, message, field and enum of the URL Frontier
  ``.proto`` that ``polite frontier serve`` implements, with its comments.

MkDocs loads this file as a hook (``hooks:`` in mkdocs.yml); the tests import it too, to
compare the pages with what they describe.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# The modules a user imports, in the order the Python reference lists them. A test checks
# that every package of polite with a non-empty __all__ is here or named in INTERNAL.
PUBLIC_MODULES = (
    ("polite.robots", "robots.txt: parse, decide, explain, lint, diff"),
    ("polite.sitemaps", "sitemaps: one streaming parser for every form"),
    ("polite.errors", "the error tree"),
    ("polite.crawl", "the crawler as a library"),
    ("polite.integrations", "the gates the drop-ins share"),
    ("polite.integrations.httpx", "httpx transports"),
    ("polite.integrations.requests", "the requests adapter"),
    ("polite.integrations.scrapy", "Scrapy's robots.txt parser and downloader middleware"),
    ("polite.storage", "the stores: memory, SQLite, Redis"),
    ("polite.fetch", "robots.txt over HTTP"),
    ("polite.survey", "the site-metadata survey"),
    ("polite.core.ulinks", "a site's most useful pages from its sitemaps"),
    ("polite.core.politeness", "the spacing arithmetic"),
    ("polite.site", "the site side: middleware, store, guard"),
    ("polite.site.page", "the site's configuration page as an ASGI app"),
    ("polite.identity.keys", "Web Bot Auth: keys"),
    ("polite.identity.signatures", "Web Bot Auth: signing and verifying requests"),
    ("polite.identity.directory", "Web Bot Auth: key directories"),
    ("polite.identity.options", "Web Bot Auth: the settings that turn signing on"),
    ("polite.api", "the REST service as an ASGI app"),
    ("polite.proxy", "the forward proxy"),
    ("polite.demo", "the demo sites"),
    ("polite.clock", "clocks"),
)

# Packages and modules with an __all__ that are not a user's entry point: the command
# line's own modules, the wiring of polite serve, and the pure core's parts, which the
# public modules above re-export where a user needs them.
INTERNAL = ("polite.cli", "polite.config", "polite.serve", "polite.core")


def build_parser() -> argparse.ArgumentParser:
    """The ``polite`` parser: ``polite.cli.build_parser`` where the command line exposes it,
    else the function ``polite.cli.main`` builds it with."""
    cli = importlib.import_module("polite.cli")
    factory = getattr(cli, "build_parser", None) or cli._build_parser
    parser = factory()
    assert isinstance(parser, argparse.ArgumentParser)
    return parser


def _subcommands(parser: argparse.ArgumentParser
                 ) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, child in action.choices.items():
                yield name, helps.get(name, ""), child


def commands(parser: argparse.ArgumentParser | None = None, path: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """Every command with its words (``("robots", "check")``), its one-line help and its
    parser, the top level first (words ``()``)."""
    if parser is None:
        parser = build_parser()
        yield (), "", parser
    for name, summary, child in _subcommands(parser):
        yield (*path, name), summary, child
        yield from commands(child, (*path, name))


def options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """The options and positional arguments of one command (not its subcommands)."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            yield action


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    # %(default)s and the like, expanded as --help expands them
    return str(parser._get_formatter()._expand_help(action))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _name(action: argparse.Action) -> str:
    if action.option_strings:
        shown = ", ".join(f"`{flag}`" for flag in action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or action.dest.upper()
            if isinstance(metavar, tuple):
                metavar = " ".join(metavar)
            shown += f" `{metavar}`"
        return shown
    metavar = action.metavar or action.dest
    return f"`{metavar if isinstance(metavar, str) else ' '.join(metavar)}`"


def anchor(words: tuple[str, ...]) -> str:
    return "polite" + "".join(f"-{word}" for word in words)


def cli_page() -> str:
    lines = ["# Command line", "",
             "Generated from the `polite` command's own parser at every build: each command, "
             "its usage, and every option with its help as `--help` prints it.", ""]
    for words, summary, parser in commands():
        title = " ".join(("polite", *words))
        depth = "#" * min(2 + len(words) // 2, 4) if words else "##"
        lines += [f"{depth} `{title}` {{#{anchor(words)}}}", ""]
        if summary:
            lines += [_cell(summary[0].upper() + summary[1:]) + ".", ""]
        if parser.description and parser.description != summary:
            lines += [" ".join(parser.description.split()), ""]
        usage = " ".join(parser.format_usage().replace("usage:", "", 1).split())
        lines += ["```text", usage, "```", ""]
        children = list(_subcommands(parser))
        if children:
            lines += ["| command | what it does |", "|---|---|"]
            lines += [f"| [`{' '.join(('polite', *words, name))}`](#{anchor((*words, name))})"
                      f" | {_cell(text)} |" for name, text, _ in children]
            lines.append("")
        rows = [(action, _help(parser, action)) for action in options(parser)
                if action.help != argparse.SUPPRESS]
        if rows:
            lines += ["| option | default | what it does |", "|---|---|---|"]
            for action, text in rows:
                default = action.default
                shown = ("" if default in (None, False, argparse.SUPPRESS)
                         or action.nargs == 0 or not action.option_strings
                         else f"`{default}`")
                if action.choices is not None and not isinstance(action.choices, dict):
                    text += f" (one of {', '.join(map(str, action.choices))})"
                lines.append(f"| {_name(action)} | {_cell(shown)} | {_cell(text)} |")
            lines.append("")
    return "\n".join(lines)


def openapi_document() -> dict[str, Any]:
    """The document ``polite serve`` answers at ``/openapi.json``."""
    app = importlib.import_module("polite.api.app")
    document: dict[str, Any] = app.OPENAPI
    return document


METHODS = ("get", "post", "put", "delete", "patch")


def _schema(schema: dict[str, Any]) -> str:
    return "`" + json.dumps(schema, sort_keys=True) + "`" if schema else ""


def operation_anchor(method: str, path: str) -> str:
    return "-".join([method, *re.findall(r"[a-z0-9]+", path.lower())])


def rest_page() -> str:
    document = openapi_document()
    info = document.get("info", {})
    lines = ["# REST API", "",
             f"Generated from the OpenAPI {document.get('openapi', '')} document that "
             "`polite serve` answers at `/openapi.json` "
             f"(*{info.get('title', '')}*, version {info.get('version', '')}). "
             "Every path, method and parameter it lists is here; the tutorial "
             "[Running the politeness service](../tutorials/operator.md) shows them at work.",
             ""]
    for path, item in document["paths"].items():
        for method in METHODS:
            if method not in item:
                continue
            operation = item[method]
            lines += [f"## `{method.upper()} {path}` {{#{operation_anchor(method, path)}}}", "",
                      _cell(operation.get("summary", "")), ""]
            parameters = operation.get("parameters", [])
            if parameters:
                lines += ["| parameter | in | required | schema | what it is |",
                          "|---|---|---|---|---|"]
                for parameter in parameters:
                    lines.append(
                        f"| `{parameter['name']}` | {parameter['in']} | "
                        f"{'yes' if parameter.get('required') else 'no'} | "
                        f"{_cell(_schema(parameter.get('schema', {})))} | "
                        f"{_cell(parameter.get('description', ''))} |")
                lines.append("")
            body = operation.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                lines += [f"Request body (`{media}`): {_cell(_schema(content.get('schema', {})))}",
                          ""]
            for status, response in operation.get("responses", {}).items():
                media = ", ".join(f"`{name}`" for name in response.get("content", {}))
                schemas = [content.get("schema", {})
                           for content in response.get("content", {}).values()]
                shown = " ".join(_schema(schema) for schema in schemas if schema)
                lines += [f"Response `{status}`{' ' + media if media else ''}"
                          f"{': ' + _cell(shown) if shown else ''}", ""]
    return "\n".join(lines)


def public_names(module: str) -> list[str]:
    return list(importlib.import_module(module).__all__)


def _shadowed(module: str, name: str) -> str | None:
    """The defining path of an exported function or class named as its own module is
    (``diff`` of ``polite.core.robots.diff``): there the package's member of that name is
    the submodule to a static reader, so the object is documented by its defining path."""
    obj = getattr(importlib.import_module(module), name)
    defined = getattr(obj, "__module__", "")
    if isinstance(defined, str) and defined.endswith("." + name):
        return f"{defined}.{obj.__qualname__}"
    return None


def python_page(module: str, summary: str) -> str:
    names = public_names(module)
    lines = [f"# `{module}`", "", f"{summary[0].upper() + summary[1:]}. Generated from the "
             "docstrings of the names in the module's `__all__`.", ""]
    if not names:
        return "\n".join([*lines, "The module exports no names.", ""])
    plain = [name for name in names if _shadowed(module, name) is None]
    lines += [f"::: {module}", "    options:", "      members:"]
    lines += [f"        - {name}" for name in plain]
    for name in names:
        path = _shadowed(module, name)
        if path is not None:
            lines += ["", f'<span id="{module}.{name}"></span>', "", f"::: {path}",
                      "    options:", "      show_root_heading: true",
                      "      show_root_full_path: false", ""]
    return "\n".join([*lines, ""])


def python_index() -> str:
    lines = ["# Python API", "",
             "The modules a program imports, each page generated from the docstrings of the "
             "names in the module's `__all__`.", "", "| module | what it holds |", "|---|---|"]
    lines += [f"| [`{module}`]({module}.md) | {summary} |" for module, summary in PUBLIC_MODULES]
    return "\n".join([*lines, ""])


PROTO = (Path(__file__).resolve().parents[2] / "src" / "polite" / "frontier" / "_proto"
         / "urlfrontier.proto")
_RPC = re.compile(r"^\s*rpc\s+(\w+)\s*\((.+?)\)\s*returns\s*\((.+?)\)")
_FIELD = re.compile(r"^\s*((?:optional |repeated )?[\w.]+(?:<[\w., ]+>)?)\s+(\w+)\s*=\s*(\d+)\s*;"
                    r"\s*(?://\s*(.*))?$")
_VALUE = re.compile(r"^\s*(\w+)\s*=\s*(\d+)\s*;")


def _comment_text(lines: list[str]) -> str:
    text = " ".join(line.strip().strip("/*").strip() for line in lines)
    return re.sub(r"\s+", " ", text).strip()


def proto_items(text: str) -> tuple[list[tuple[str, str, str, str]],
                                    list[tuple[str, str, list[tuple[str, str, str, str]]]]]:
    """The RPCs (name, request, response, comment) and the messages and enums (name,
    comment, fields or values as (name, type, number, comment)) of a .proto's text."""
    rpcs: list[tuple[str, str, str, str]] = []
    blocks: list[tuple[str, str, list[tuple[str, str, str, str]]]] = []
    comment: list[str] = []
    in_block_comment = False
    # one entry per open brace: the message or enum it opened, or None (service, oneof)
    stack: list[tuple[str, str, list[tuple[str, str, str, str]]] | None] = []
    for line in text.splitlines():
        stripped = line.strip()
        if in_block_comment:
            comment.append(stripped)
            in_block_comment = "*/" not in stripped
            continue
        if stripped.startswith("/*"):
            comment = [stripped]
            in_block_comment = "*/" not in stripped
            continue
        if stripped.startswith("//"):
            comment.append(stripped)
            continue
        said = _comment_text(comment)
        opened = [block for block in stack if block is not None]
        if match := _RPC.match(line):
            rpcs.append((match[1], match[2], match[3], said))
        elif match := re.match(r"^\s*(message|enum)\s+(\w+)\s*\{", line):
            name = ".".join([*(block[0] for block in opened), match[2]])
            blocks.append((name, said, []))
            stack.append(blocks[-1])
            stripped = stripped[stripped.index("{") + 1:]
        elif opened and (match := _FIELD.match(line)):
            opened[-1][2].append((match[2], match[1], match[3], match[4] or said))
        elif opened and (match := _VALUE.match(line)):
            opened[-1][2].append((match[1], "", match[2], said))
        for char in stripped.split("//")[0]:
            if char == "{":
                stack.append(None)
            elif char == "}" and stack:
                stack.pop()
        if line.strip():
            comment = []
    return rpcs, blocks


def urlfrontier_page() -> str:
    rpcs, blocks = proto_items(PROTO.read_text(encoding="utf-8"))
    lines = ["# URL Frontier API", "",
             "Generated from `urlfrontier.proto` (crawler-commons/url-frontier, vendored in "
             "`src/polite/frontier/_proto` with its licence and the commit it came from): the "
             "gRPC service `urlfrontier.URLFrontier` that `polite frontier serve` implements. "
             "[polite as StormCrawler's frontier](../how-to/frontier.md) says what polite "
             "does in each call.", "", "## Service `URLFrontier`", "",
             "| RPC | request | response | what it does |", "|---|---|---|---|"]
    lines += [f"| `{name}` | `{request}` | `{response}` | {_cell(said)} |"
              for name, request, response, said in rpcs]
    lines += ["", "## Messages and enums", ""]
    for name, said, fields in blocks:
        lines += [f"### `{name}`", ""]
        if said:
            lines += [_cell(said), ""]
        if fields:
            lines += ["| field | type | number | what it is |", "|---|---|---|---|"]
            lines += [f"| `{field}` | {f'`{kind}`' if kind else 'value'} | {number} | "
                      f"{_cell(text)} |" for field, kind, number, text in fields]
            lines.append("")
    return "\n".join(lines)


def pages() -> dict[str, str]:
    """Every generated page by its path under docs/."""
    generated = {"reference/cli.md": cli_page(), "reference/rest.md": rest_page(),
                 "reference/python/index.md": python_index(),
                 "reference/urlfrontier.md": urlfrontier_page()}
    for module, summary in PUBLIC_MODULES:
        generated[f"reference/python/{module}.md"] = python_page(module, summary)
    return generated


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, content in pages().items():
        files.append(File.generated(config, path, content=content))
    return files
