"""A page's readable part as markdown, for an agent: the article found by readability-lxml
(a port of Arc90's Readability on lxml, kept up: pure Python, no Node.js, unlike
readabilipy's Readability.js path) and written as markdown by markdownify."""

from __future__ import annotations

import markdownify
from lxml.etree import LxmlError  # type: ignore[import-untyped]
from readability import Document  # type: ignore[import-untyped]
from readability.readability import Unparseable  # type: ignore[import-untyped]

__all__ = ["NOT_SIMPLIFIED", "readable_markdown"]

NOT_SIMPLIFIED = "<error>Page failed to be simplified from HTML</error>"


def readable_markdown(html: str, url: str) -> str:
    """The main content of ``html`` as markdown (ATX headings); :data:`NOT_SIMPLIFIED` when
    nothing readable is found."""
    if not html.strip():
        return NOT_SIMPLIFIED
    try:
        document = Document(html, url=url)
        title = document.short_title().strip()
        article = document.summary(html_partial=True)
    except (Unparseable, LxmlError, ValueError):  # what is not HTML enough to read
        return NOT_SIMPLIFIED
    text = markdownify.markdownify(article, heading_style=markdownify.ATX).strip()
    if not text:
        return NOT_SIMPLIFIED
    if title and title not in text[:len(title) + 4]:
        text = f"# {title}\n\n{text}"
    return text
