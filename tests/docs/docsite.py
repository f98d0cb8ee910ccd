"""Reading the manual's sources and its built pages in tests."""

from __future__ import annotations

import html
import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def reference_hook() -> ModuleType:
    """docs/hooks/reference.py, the code that writes the reference pages at each build."""
    spec = importlib.util.spec_from_file_location("polite_docs_reference",
                                                  DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pages() -> list[Path]:
    """The manual's hand-written pages."""
    return sorted(path for path in DOCS.rglob("*.md") if "hooks" not in path.parts)


def text_of(page: str) -> str:
    """A built page's visible text, tags dropped and entities read."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def ids_of(page: str) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', page))
