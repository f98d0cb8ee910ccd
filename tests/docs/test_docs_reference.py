"""The generated reference pages against what they describe: the parser, the OpenAPI document
the service answers, and the public modules' ``__all__``. A command, option, endpoint or name
missing from its page fails here, whoever added it."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
from html import escape
from typing import Any

import pytest

import polite
from tests.docs.conftest import BuiltSite
from tests.docs.docsite import ids_of, reference_hook, text_of
from tests.serving import polite_serve


def _sections(page: str, ids: list[str], *, markup: bool = False) -> dict[str, str]:
    """The text (or with ``markup`` the HTML) under each heading id, up to the next of
    ``ids``."""
    starts = sorted((page.rindex("<", 0, page.index(f'id="{name}"')), name) for name in ids)
    ends = [start for start, _ in starts[1:]] + [len(page)]
    return {name: page[start:end] if markup else text_of(page[start:end])
            for (start, name), end in zip(starts, ends, strict=True)}


def _table_cells(section: str) -> str:
    """The section's tables alone: an option must be in its table, not only in the usage."""
    return " ".join(re.findall(r"<table\b.*?</table>", section, flags=re.DOTALL))


def test_every_command_and_option_is_on_the_cli_page(docs_site: BuiltSite) -> None:
    hook = reference_hook()
    page = (docs_site.path / "reference" / "cli.html").read_text(encoding="utf-8")
    commands = list(hook.commands())
    anchors = [hook.anchor(words) for words, _, _ in commands]
    missing = set(anchors) - ids_of(page)
    assert not missing, missing
    sections = _sections(page, anchors)
    tables = {name: _table_cells(html) for name, html in
              _sections(page, anchors, markup=True).items()}
    seen = 0
    for (words, _, parser), name in zip(commands, anchors, strict=True):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices:
                    assert f"polite {' '.join((*words, child))}".strip() in sections[name]
                continue
            if action.help == argparse.SUPPRESS:
                continue
            for flag in action.option_strings or [str(action.metavar or action.dest)]:
                assert f"<code>{escape(flag, quote=False)}</code>" in tables[name], (words, flag)
                seen += 1
    # the walk reached the subcommands' options, not only the top level's
    assert len(commands) > 20 and seen > 150, (len(commands), seen)


def test_every_path_method_and_parameter_the_service_describes_is_on_the_rest_page(
        docs_site: BuiltSite) -> None:
    with polite_serve("--store", "memory://") as api:
        document = api.get("/openapi.json").json()
    hook = reference_hook()
    page = (docs_site.path / "reference" / "rest.html").read_text(encoding="utf-8")
    operations = [(method, path) for path, item in document["paths"].items()
                  for method in item if method in hook.METHODS]
    assert len(operations) > 15
    anchors = [hook.operation_anchor(method, path) for method, path in operations]
    missing = set(anchors) - ids_of(page)
    assert not missing, missing
    sections = _sections(page, anchors)
    tables = {name: _table_cells(html) for name, html in
              _sections(page, anchors, markup=True).items()}
    for (method, path), name in zip(operations, anchors, strict=True):
        section = " ".join(sections[name].split())
        assert section.startswith(f"{method.upper()} {path}"), section[:80]
        operation = document["paths"][path][method]
        assert operation["summary"] in section, name
        for parameter in operation.get("parameters", []):
            row = f"<td><code>{parameter['name']}</code></td>\n<td>{parameter['in']}</td>"
            assert row in tables[name], (name, parameter)


def test_every_public_name_is_on_its_python_page(docs_site: BuiltSite) -> None:
    hook = reference_hook()
    count = 0
    for module, _ in hook.PUBLIC_MODULES:
        page = (docs_site.path / "reference" / "python" / f"{module}.html").read_text(
            encoding="utf-8")
        names = importlib.import_module(module).__all__
        missing = {name for name in names if f"{module}.{name}" not in ids_of(page)}
        assert not missing, (module, missing)
        count += len(names)
    assert count > 150


def test_every_package_with_public_names_is_documented_or_named_internal() -> None:
    hook = reference_hook()
    documented = {module for module, _ in hook.PUBLIC_MODULES}
    for info in pkgutil.walk_packages(polite.__path__, prefix="polite."):
        name = info.name
        top_level = name.count(".") == 1
        if not (info.ispkg or top_level) or name.split(".")[-1].startswith("_"):
            continue
        if name == "polite.__main__" or name.startswith(hook.INTERNAL):
            continue
        module = importlib.import_module(name)
        if module.__all__:
            assert name in documented, f"{name} exports names but has no reference page"


def test_every_rpc_message_field_and_value_of_the_proto_is_on_its_page(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The URL Frontier page, against the descriptors protobuf's own compiler makes of the
    vendored .proto (not the page's parser)."""
    from tests.frontier.frontier_client import stubs

    pb = stubs(tmp_path_factory.mktemp("stubs"))[0]
    page = reference_hook().urlfrontier_page()
    service = pb.DESCRIPTOR.services_by_name["URLFrontier"]
    for method in service.methods:
        assert (f"| `{method.name}` | `{'stream ' if method.client_streaming else ''}"
                f"{method.input_type.name}` |") in page, method.name

    def check(message: Any, prefix: str) -> None:
        assert f"### `{prefix}{message.name}`" in page, message.full_name
        for field in message.fields:
            assert f"| `{field.name}` |" in page.split(f"### `{prefix}{message.name}`")[1], \
                field.full_name
        for enum in message.enum_types:
            assert f"### `{prefix}{message.name}.{enum.name}`" in page, enum.full_name
            for value in enum.values:
                assert f"| `{value.name}` | value | {value.number} |" in page, value.name
        for nested in message.nested_types:
            if not nested.GetOptions().map_entry:
                check(nested, f"{prefix}{message.name}.")

    assert pb.DESCRIPTOR.message_types_by_name
    for message in pb.DESCRIPTOR.message_types_by_name.values():
        check(message, "")
